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

// Open opens the segment starting at base in dir and repairs its tail: see
// the package documentation. The segment file must exist; a missing or
// damaged index is rebuilt. A segment file with a foreign header is an
// ErrCorrupt error and is left untouched.
func Open(dir string, base uint64) (*Segment, Recovery, error) {
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
	if err := s.recover(&rec); err != nil {
		s.seg.Close()
		if s.idx != nil {
			s.idx.Close()
		}
		return nil, rec, err
	}
	return s, rec, nil
}

func (s *Segment) recover(rec *Recovery) error {
	segSize, version, err := checkFileHeader(s.seg, segmentMagic)
	if err != nil {
		return fmt.Errorf("segment open %s: %w", s.segPath, err)
	}
	s.version = version
	if s.idx, err = os.OpenFile(s.idxPath, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return fmt.Errorf("segment open %s: %w", s.idxPath, err)
	}
	if st, err := s.idx.Stat(); err == nil && st.Size() < FileHeaderSize {
		rec.IndexRebuilt = true // missing, or torn before its header
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
	if int64(n)*IndexRecordSize+FileHeaderSize != idxSize {
		rec.DroppedRecords++ // a partial record
	}

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

// checkFileHeader returns the file's size and format version after
// checking its 8-byte header: the magic, and a version this code reads. A
// file shorter than the header (torn creation) is given a fresh header of
// the current version.
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
	v := binary.BigEndian.Uint32(b[4:])
	if string(b[:4]) != magic || !readableVersion(magic, v) {
		return 0, 0, fmt.Errorf("file header %q: %w", b[:], ErrCorrupt)
	}
	return st.Size(), v, nil
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
