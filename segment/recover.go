package segment

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Recovery says what Open repaired.
type Recovery struct {
	TruncatedBytes int64 // bytes cut from the end of the segment file
	DroppedRecords int   // index records removed (invalid or zero-filled)
	AddedRecords   int   // index records rebuilt from the segment file
	IndexRebuilt   bool  // the index file was missing or had a bad header
}

// Repaired reports whether Open changed anything.
func (r Recovery) Repaired() bool {
	return r.TruncatedBytes > 0 || r.DroppedRecords > 0 || r.AddedRecords > 0 || r.IndexRebuilt
}

// Open opens the segment starting at base in dir and repairs its tail:
// see the package documentation. It trusts the chunks before the last
// valid index record, so it suits a segment this process has opened with
// Recover before, or one that was synced whole (a sealed segment). The
// segment file must exist; a missing or damaged index is rebuilt. A
// segment file with a foreign header is an ErrCorrupt error and is left
// untouched.
func Open(dir string, base uint64) (*Segment, Recovery, error) {
	return open(dir, base, false)
}

// Recover opens the segment starting at base in dir as Open does, but
// validates every chunk (see Recovery in the package documentation): for
// the last segment of a stream after a crash, whose unsynced part a power
// cut can damage anywhere, not only at the tail.
func Recover(dir string, base uint64) (*Segment, Recovery, error) {
	return open(dir, base, true)
}

func open(dir string, base uint64, full bool) (*Segment, Recovery, error) {
	s := &Segment{
		base:    base,
		segPath: filepath.Join(dir, SegmentFileName(base)),
		idxPath: filepath.Join(dir, IndexFileName(base)),
	}
	var rec Recovery
	var err error
	if s.seg, err = os.OpenFile(s.segPath, os.O_RDWR, 0); err != nil {
		return nil, rec, fmt.Errorf("segment open %s: %w", s.segPath, err)
	}
	if err := s.recover(&rec, full); err != nil {
		s.seg.Close()
		if s.idx != nil {
			s.idx.Close()
		}
		return nil, rec, err
	}
	return s, rec, nil
}

func (s *Segment) recover(rec *Recovery, full bool) error {
	var origSize int64
	if st, err := s.seg.Stat(); err == nil {
		origSize = st.Size()
	}
	segSize, version, err := checkFileHeader(s.seg, segmentMagic)
	if err != nil {
		return fmt.Errorf("segment open %s: %w", s.segPath, err)
	}
	if segSize < origSize {
		rec.TruncatedBytes = origSize - segSize // a torn header: emptied
	}
	s.version = version
	if s.idx, err = os.OpenFile(s.idxPath, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return fmt.Errorf("segment open %s: %w", s.idxPath, err)
	}
	if st, err := s.idx.Stat(); err == nil && st.Size() < FileHeaderSize {
		rec.IndexRebuilt = true // missing, or torn before its header
	} else if err == nil {
		var b [FileHeaderSize]byte
		if _, err := s.idx.ReadAt(b[:], 0); err == nil && tornHeader(b[:], indexMagic) {
			rec.IndexRebuilt = true // created, never synced
		}
	}
	idxSize, _, err := checkFileHeader(s.idx, indexMagic)
	if err != nil {
		// A torn or foreign index is rebuilt from the segment.
		if err := resetFile(s.idx, indexMagic); err != nil {
			return fmt.Errorf("segment open %s: %w", s.idxPath, err)
		}
		idxSize = FileHeaderSize
		rec.IndexRebuilt = true
	}
	n := int((idxSize - FileHeaderSize) / IndexRecordSize)
	partial := int64(n)*IndexRecordSize+FileHeaderSize != idxSize
	if !full {
		if partial {
			rec.DroppedRecords++
		}
		return s.recoverTail(n, segSize, rec)
	}

	// Validate every chunk of the segment, from the first: a power cut
	// can leave more than a torn tail when the page cache wrote the
	// unsynced part back out of order (a zero page in the middle of a
	// chunk, behind a valid last chunk), and only a full scan tells
	// where the valid prefix ends. Then keep the index records that
	// agree with it and write the rest.
	ibuf, err := s.scan(segSize)
	if err != nil {
		return err
	}
	old := make([]byte, n*IndexRecordSize)
	if _, err := s.idx.ReadAt(old, FileHeaderSize); err != nil && err != io.EOF {
		return fmt.Errorf("segment open %s: index read: %w", s.idxPath, err)
	}
	same := 0
	for same < n && same < s.count &&
		string(old[same*IndexRecordSize:(same+1)*IndexRecordSize]) == string(ibuf[same*IndexRecordSize:(same+1)*IndexRecordSize]) {
		same++
	}
	rec.DroppedRecords = n - same
	if partial {
		rec.DroppedRecords++
	}
	rec.AddedRecords = s.count - same
	if same < n || partial {
		if err := s.idx.Truncate(FileHeaderSize + int64(same)*IndexRecordSize); err != nil {
			return fmt.Errorf("segment open %s: truncate index: %w", s.idxPath, err)
		}
	}
	if same < s.count {
		if _, err := s.idx.WriteAt(ibuf[same*IndexRecordSize:], FileHeaderSize+int64(same)*IndexRecordSize); err != nil {
			return fmt.Errorf("segment open %s: index write: %w", s.idxPath, err)
		}
	}
	if s.size < segSize {
		rec.TruncatedBytes = segSize - s.size
		if err := s.seg.Truncate(s.size); err != nil {
			return fmt.Errorf("segment open %s: truncate: %w", s.segPath, err)
		}
	}
	return nil
}

// recoverTail repairs the tail of a segment whose index has n whole
// records: it walks back over index records that are zero or do not
// describe a complete valid chunk, fully verifies the last survivor, then
// validates and indexes the chunks after it.
func (s *Segment) recoverTail(n int, segSize int64, rec *Recovery) error {
	var err error
	// Walk back over index records that are zero or do not describe a
	// complete valid chunk. The last survivor is fully verified.
	buf := make([]byte, HeaderSize+MaxBloomSize)
	var lastH Header
	var last IndexRecord
	valid := 0
	for i := n - 1; i >= 0; i-- {
		r, err := s.Record(i)
		if err != nil {
			return err
		}
		if h, ok := s.validRecord(&r, segSize, buf); ok {
			valid, last, lastH = i+1, r, h
			break
		}
		rec.DroppedRecords++
	}
	if valid > 0 {
		if valid == 1 && last.Pos != FileHeaderSize {
			valid = 0 // the first record must point at the first chunk
			rec.DroppedRecords++
		} else if last.ChunkID < s.base {
			valid = 0
			rec.DroppedRecords++
		}
	}
	s.count = valid
	s.size = FileHeaderSize
	if valid > 0 {
		s.last, s.lastH = last, lastH
		s.size = int64(last.Pos) + lastH.Size()
		if s.first, err = s.Record(0); err != nil {
			return err
		}
	}
	if err := s.idx.Truncate(FileHeaderSize + int64(valid)*IndexRecordSize); err != nil {
		return fmt.Errorf("segment open %s: truncate index: %w", s.idxPath, err)
	}

	// Index (and validate) the chunks after the last indexed one.
	if err := s.scanTail(segSize, rec); err != nil {
		return err
	}
	if s.size < segSize {
		rec.TruncatedBytes = segSize - s.size
		if err := s.seg.Truncate(s.size); err != nil {
			return fmt.Errorf("segment open %s: truncate: %w", s.segPath, err)
		}
	}
	return nil
}

// validRecord reports whether r points at a chunk that matches it, lies
// within segSize and passes Verify.
func (s *Segment) validRecord(r *IndexRecord, segSize int64, buf []byte) (Header, bool) {
	var zero [IndexRecordSize]byte
	if isZero(r.AppendTo(zero[:0])) || r.Pos < FileHeaderSize {
		return Header{}, false
	}
	h, _, err := s.ReadHeader(int64(r.Pos), segSize, buf)
	if err != nil || !r.matches(&h, int64(r.Pos)) {
		return Header{}, false
	}
	chunk := make([]byte, h.Size())
	if s.ReadAt(chunk, int64(r.Pos)) != nil {
		return Header{}, false
	}
	if _, err := Verify(chunk); err != nil {
		return Header{}, false
	}
	return h, true
}

// scanTail validates and indexes the chunks between s.size and segSize,
// stopping at the first invalid one. s.size ends at the last good chunk.
func (s *Segment) scanTail(segSize int64, rec *Recovery) error {
	if s.size >= segSize {
		return nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(s.seg, s.size, segSize-s.size), 1<<20)
	var chunk []byte
	var hdrs []Header
	var ibuf []byte
	pos := s.size
	for pos+HeaderSize <= segSize {
		hb, err := br.Peek(HeaderSize)
		if err != nil {
			break
		}
		h, err := ParseHeader(hb)
		if err != nil || pos+h.Size() > segSize {
			break
		}
		if s.count+len(hdrs) == 0 {
			if h.ChunkID != s.base {
				break
			}
		} else {
			prev := s.lastH
			if len(hdrs) > 0 {
				prev = hdrs[len(hdrs)-1]
			}
			if h.ChunkID != prev.NextOffset() {
				break
			}
		}
		chunk = grow(chunk[:0], int(h.Size()))
		if _, err := io.ReadFull(br, chunk); err != nil {
			break
		}
		if _, err := Verify(chunk); err != nil {
			break
		}
		r := RecordFor(&h, pos)
		ibuf = r.AppendTo(ibuf)
		hdrs = append(hdrs, h)
		if s.count+len(hdrs) == 1 {
			s.first = r
		}
		s.last, s.lastH = r, h
		pos += h.Size()
	}
	if len(hdrs) > 0 {
		if _, err := s.idx.WriteAt(ibuf, FileHeaderSize+int64(s.count)*IndexRecordSize); err != nil {
			return fmt.Errorf("segment open %s: index write: %w", s.idxPath, err)
		}
		s.count += len(hdrs)
		rec.AddedRecords += len(hdrs)
	}
	s.size = pos
	return nil
}

// scan validates the chunks of the segment file's first segSize bytes,
// from the first, stopping at the first that is not whole, valid and
// next in line (its id following on from the one before, the first
// one's the segment's base). It sets count, size, first, last and lastH
// to the valid prefix and returns its index records.
func (s *Segment) scan(segSize int64) ([]byte, error) {
	s.count, s.size = 0, FileHeaderSize
	br := bufio.NewReaderSize(io.NewSectionReader(s.seg, s.size, segSize-s.size), 1<<20)
	var chunk, ibuf []byte
	pos := s.size
	for pos+HeaderSize <= segSize {
		hb, err := br.Peek(HeaderSize)
		if err != nil {
			break
		}
		h, err := ParseHeader(hb)
		if err != nil || pos+h.Size() > segSize {
			break
		}
		if s.count == 0 && h.ChunkID != s.base || s.count > 0 && h.ChunkID != s.lastH.NextOffset() {
			break
		}
		chunk = grow(chunk[:0], int(h.Size()))
		if _, err := io.ReadFull(br, chunk); err != nil {
			break
		}
		if _, err := Verify(chunk); err != nil {
			break
		}
		r := RecordFor(&h, pos)
		ibuf = r.AppendTo(ibuf)
		if s.count == 0 {
			s.first = r
		}
		s.last, s.lastH = r, h
		s.count++
		pos += h.Size()
	}
	s.size = pos
	return ibuf, nil
}

// checkFileHeader returns the file's size and format version after
// checking its 8-byte header: the magic, and a version this code reads. A
// file shorter than the header or whose header is all zeros (torn
// creation) is emptied and given a fresh header of the current version.
func checkFileHeader(f *os.File, magic string) (int64, uint32, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	if st.Size() < FileHeaderSize {
		if err := resetFile(f, magic); err != nil {
			return 0, 0, err
		}
		return FileHeaderSize, binary.BigEndian.Uint32(appendFileHeader(nil, magic)[4:]), nil
	}
	var b [FileHeaderSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0, 0, err
	}
	if tornHeader(b[:], magic) {
		// Created, then a power cut before anything of it was synced: the
		// size reached the disk, the header did not. Nothing in such a
		// file was synced (a sync covers the header too), so it starts
		// again empty, as a file torn before its header does.
		if err := resetFile(f, magic); err != nil {
			return 0, 0, err
		}
		return FileHeaderSize, binary.BigEndian.Uint32(appendFileHeader(nil, magic)[4:]), nil
	}
	v := binary.BigEndian.Uint32(b[4:])
	if string(b[:4]) != magic || !readableVersion(magic, v) {
		return 0, 0, fmt.Errorf("file header %q: %w", b[:], ErrCorrupt)
	}
	return st.Size(), v, nil
}

// tornHeader reports whether b, a file's header, is what a power cut
// leaves of a header never synced: a prefix of the header Create writes,
// then zeros.
func tornHeader(b []byte, magic string) bool {
	want := appendFileHeader(nil, magic)
	k := 0
	for k < len(b) && b[k] == want[k] {
		k++
	}
	return k < len(b) && isZero(b[k:])
}

// resetFile truncates f to just a fresh file header.
func resetFile(f *os.File, magic string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(appendFileHeader(nil, magic), 0); err != nil {
		return err
	}
	return nil
}

// IsCorrupt reports whether err marks corrupt data.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }
