package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Segment is one segment file and its index. One goroutine (the stream's
// writer) appends; any number of readers may call the read methods
// concurrently with the appends, as long as they only look at chunks and
// index records the writer has published to them (see Tail).
type Segment struct {
	// Static after construction.
	base    uint64 // id of the segment's first chunk; names the files
	segPath string
	idxPath string
	seg     *os.File
	idx     *os.File
	version uint32 // file format version: SegmentVersion, or 1 (read-only); changed only by Upgrade

	// Owned by the writer.
	size  int64       // bytes in the segment file
	count int         // records in the index
	first IndexRecord // valid when count > 0
	last  IndexRecord // valid when count > 0
	lastH Header      // header of the last chunk, valid when count > 0
	werr  error       // sticky write error
	ibuf  []byte      // index record scratch
	// synced is the extent the last successful Sync made durable: a
	// power cut keeps at least this much of both files. Zero for a
	// segment Create made (not even its file headers are synced yet)
	// and for one Open repaired (what it read may have been in the page
	// cache only).
	synced Tail
}

// Tail is what a writer publishes to readers about a segment: how far its
// files are complete.
type Tail struct {
	Size  int64 // bytes of complete chunks in the segment file
	Count int   // records in the index
}

// Create makes a new empty segment starting at base in dir. It fails if
// the files exist.
func Create(dir string, base uint64) (*Segment, error) {
	s := &Segment{
		base:    base,
		segPath: filepath.Join(dir, SegmentFileName(base)),
		idxPath: filepath.Join(dir, IndexFileName(base)),
		version: SegmentVersion,
	}
	var err error
	if s.seg, err = createWithHeader(s.segPath, segmentMagic); err != nil {
		return nil, err
	}
	if s.idx, err = createWithHeader(s.idxPath, indexMagic); err != nil {
		s.seg.Close()
		os.Remove(s.segPath)
		return nil, err
	}
	s.size = FileHeaderSize
	return s, nil
}

func createWithHeader(path, magic string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("segment create %s: %w", path, err)
	}
	if _, err := f.Write(appendFileHeader(nil, magic)); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("segment create %s: %w", path, err)
	}
	return f, nil
}

// Base is the id of the segment's first chunk.
func (s *Segment) Base() uint64 { return s.base }

// Path is the segment file's path.
func (s *Segment) Path() string { return s.segPath }

// Version is the segment file's format version: SegmentVersion, or 1 for a
// segment written before the chunk filters changed (read-only).
func (s *Segment) Version() uint32 { return s.version }

// FilterFormat is the format of the Bloom bytes of the segment's chunks.
func (s *Segment) FilterFormat() FilterFormat {
	if s.version == 1 {
		return FilterV1
	}
	return FilterV2
}

// File is the segment file, for positional reads and sendfile. Callers must
// not change its offset or write to it.
func (s *Segment) File() *os.File { return s.seg }

// Size is the number of bytes in the segment file (writer only).
func (s *Segment) Size() int64 { return s.size }

// Count is the number of chunks in the segment (writer only).
func (s *Segment) Count() int { return s.count }

// Tail is the segment's current extent (writer only).
func (s *Segment) Tail() Tail { return Tail{Size: s.size, Count: s.count} }

// Synced is the extent the last successful Sync made durable: the
// promise of the fsync policies ("synced up to"). Writer only.
func (s *Segment) Synced() Tail { return s.synced }

// First is the index record of the first chunk; ok is false when empty
// (writer only).
func (s *Segment) First() (IndexRecord, bool) { return s.first, s.count > 0 }

// Last is the index record and header of the last chunk; ok is false when
// empty (writer only).
func (s *Segment) Last() (IndexRecord, Header, bool) { return s.last, s.lastH, s.count > 0 }

// Append writes complete chunks (as built by Builder) to the segment file
// with one write, then their index records with one write. hdrs are the
// chunks' headers in order. After an error the segment refuses all writes.
// A segment of an older format version refuses them all along
// (ErrReadOnly): its chunks' filters are of another format.
func (s *Segment) Append(chunks []byte, hdrs []Header) error {
	if s.werr != nil {
		return s.werr
	}
	if s.version != SegmentVersion {
		return fmt.Errorf("segment %s: append: format version %d: %w", s.segPath, s.version, ErrReadOnly)
	}
	if len(hdrs) == 0 {
		return nil
	}
	if s.size+int64(len(chunks)) > MaxSegmentPos {
		return fmt.Errorf("segment %s: %d bytes would pass the 4 GiB index limit", s.segPath, s.size+int64(len(chunks)))
	}
	s.ibuf = s.ibuf[:0]
	pos := s.size
	for i := range hdrs {
		r := RecordFor(&hdrs[i], pos)
		s.ibuf = r.AppendTo(s.ibuf)
		pos += hdrs[i].Size()
	}
	if pos != s.size+int64(len(chunks)) {
		return fmt.Errorf("segment %s: append: headers describe %d bytes, got %d", s.segPath, pos-s.size, len(chunks))
	}
	if _, err := s.seg.WriteAt(chunks, s.size); err != nil {
		s.werr = fmt.Errorf("segment %s: write at %d: %w", s.segPath, s.size, err)
		return s.werr
	}
	if _, err := s.idx.WriteAt(s.ibuf, FileHeaderSize+int64(s.count)*IndexRecordSize); err != nil {
		s.werr = fmt.Errorf("segment %s: index write: %w", s.idxPath, err)
		return s.werr
	}
	if s.count == 0 {
		s.first = parseIndexRecord(s.ibuf)
	}
	s.last = parseIndexRecord(s.ibuf[len(s.ibuf)-IndexRecordSize:])
	s.lastH = hdrs[len(hdrs)-1]
	s.size = pos
	s.count += len(hdrs)
	return nil
}

// Upgrade rewrites the file header of an empty segment of an older format
// version with the current version, so that it takes appends: with no
// chunk there is no filter of the older format to keep. A segment with
// chunks stays as it is (ErrReadOnly); the writer moves on to a new one.
// Writer only, before any reader uses the segment.
func (s *Segment) Upgrade() error {
	if s.werr != nil {
		return s.werr
	}
	if s.version == SegmentVersion {
		return nil
	}
	if s.count > 0 || s.size > FileHeaderSize {
		return fmt.Errorf("segment %s: upgrade with %d chunks: %w", s.segPath, s.count, ErrReadOnly)
	}
	if _, err := s.seg.WriteAt(appendFileHeader(nil, segmentMagic), 0); err != nil {
		s.werr = fmt.Errorf("segment %s: upgrade: %w", s.segPath, err)
		return s.werr
	}
	if err := unix.Fdatasync(int(s.seg.Fd())); err != nil {
		s.werr = fmt.Errorf("segment %s: upgrade: fdatasync: %w", s.segPath, err)
		return s.werr
	}
	s.version = SegmentVersion
	return nil
}

// Sync flushes the segment and index files to stable storage.
func (s *Segment) Sync() error {
	if s.werr != nil {
		return s.werr
	}
	if err := unix.Fdatasync(int(s.seg.Fd())); err != nil {
		s.werr = fmt.Errorf("segment %s: fdatasync: %w", s.segPath, err)
		return s.werr
	}
	if err := unix.Fdatasync(int(s.idx.Fd())); err != nil {
		s.werr = fmt.Errorf("segment %s: fdatasync: %w", s.idxPath, err)
		return s.werr
	}
	s.synced = s.Tail()
	return nil
}

// Close closes the files. Later writes return ErrClosed.
func (s *Segment) Close() error {
	if s.werr == nil {
		s.werr = fmt.Errorf("segment %s: %w", s.segPath, ErrClosed)
	}
	err1 := s.seg.Close()
	err2 := s.idx.Close()
	return errors.Join(err1, err2)
}

// Remove closes and deletes the segment's files. (osiris unlinks files
// itself while readers still hold them open; see its segRef.)
func (s *Segment) Remove() error {
	s.Close()
	err1 := os.Remove(s.segPath)
	err2 := os.Remove(s.idxPath)
	return errors.Join(err1, err2)
}

// Record reads index record i.
func (s *Segment) Record(i int) (IndexRecord, error) {
	var b [IndexRecordSize]byte
	if _, err := s.idx.ReadAt(b[:], FileHeaderSize+int64(i)*IndexRecordSize); err != nil {
		return IndexRecord{}, fmt.Errorf("segment %s: index record %d: %w", s.idxPath, i, err)
	}
	return parseIndexRecord(b[:]), nil
}

// search returns the smallest i in [0, n) for which pred(record i) is
// true, or n, reading O(log n) records.
func (s *Segment) search(n int, pred func(*IndexRecord) bool) (int, error) {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		r, err := s.Record(m)
		if err != nil {
			return 0, err
		}
		if pred(&r) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo, nil
}

// SearchOffset returns the index of the chunk among the first n that holds
// offset off: the last chunk whose id is <= off. It returns -1 when off is
// before the first chunk.
func (s *Segment) SearchOffset(n int, off uint64) (int, error) {
	i, err := s.search(n, func(r *IndexRecord) bool { return r.ChunkID > off })
	return i - 1, err
}

// SearchTimestamp returns the index of the first chunk among the first n
// whose timestamp is >= ts, or n if there is none.
func (s *Segment) SearchTimestamp(n int, ts int64) (int, error) {
	return s.search(n, func(r *IndexRecord) bool { return r.Timestamp >= ts })
}

// LastOfType returns the index of the last chunk of type t among the first
// n, or -1. It reads the index backwards in blocks.
func (s *Segment) LastOfType(n int, t ChunkType) (int, error) {
	const block = 256
	buf := make([]byte, block*IndexRecordSize)
	for end := n; end > 0; end -= block {
		start := max(end-block, 0)
		b := buf[:(end-start)*IndexRecordSize]
		if _, err := s.idx.ReadAt(b, FileHeaderSize+int64(start)*IndexRecordSize); err != nil {
			return -1, fmt.Errorf("segment %s: index read: %w", s.idxPath, err)
		}
		for i := end - start - 1; i >= 0; i-- {
			if ChunkType(b[i*IndexRecordSize+28]) == t {
				return start + i, nil
			}
		}
	}
	return -1, nil
}

// ReadHeader reads the chunk header at pos and, into buf, the header and the
// Bloom bytes. limit is the end of complete data in the file; a chunk that
// would pass it is corrupt. It returns the header and the Bloom bytes
// (aliasing buf). buf should have room for HeaderSize+MaxBloomSize bytes.
func (s *Segment) ReadHeader(pos, limit int64, buf []byte) (Header, []byte, error) {
	buf = buf[:cap(buf)]
	if len(buf) < HeaderSize+MaxBloomSize {
		buf = make([]byte, HeaderSize+MaxBloomSize)
	}
	n := int64(HeaderSize + MaxBloomSize)
	if rem := limit - pos; rem < n {
		n = rem
	}
	if n < HeaderSize {
		return Header{}, nil, fmt.Errorf("segment %s: chunk at %d: %d bytes left: %w", s.segPath, pos, limit-pos, ErrCorrupt)
	}
	got, err := s.seg.ReadAt(buf[:n], pos)
	if err != nil && err != io.EOF {
		return Header{}, nil, fmt.Errorf("segment %s: chunk at %d: %w", s.segPath, pos, err)
	}
	h, err := ParseHeader(buf[:got])
	if err != nil {
		return h, nil, fmt.Errorf("segment %s: chunk at %d: %w", s.segPath, pos, err)
	}
	if pos+h.Size() > limit || HeaderSize+int(h.BloomSize) > got {
		return h, nil, fmt.Errorf("segment %s: chunk at %d: %d bytes pass the end %d: %w", s.segPath, pos, h.Size(), limit, ErrCorrupt)
	}
	return h, buf[HeaderSize : HeaderSize+int(h.BloomSize)], nil
}

// ReadAt reads len(p) bytes of the segment file at off.
func (s *Segment) ReadAt(p []byte, off int64) error {
	if _, err := s.seg.ReadAt(p, off); err != nil {
		return fmt.Errorf("segment %s: read %d bytes at %d: %w", s.segPath, len(p), off, err)
	}
	return nil
}

// TruncateTo keeps the segment's first n chunks and cuts the rest from
// both files, which it then syncs. A replica (package osiris) uses it to
// drop the tail its log does not share with a new leader's. Writer only;
// no reader may be positioned past the n-th chunk.
func (s *Segment) TruncateTo(n int) error {
	if s.werr != nil {
		return s.werr
	}
	if n < 0 || n > s.count {
		return fmt.Errorf("segment %s: truncate to %d of %d chunks", s.segPath, n, s.count)
	}
	if n == s.count {
		return nil
	}
	rec, err := s.Record(n)
	if err != nil {
		return err
	}
	size := int64(rec.Pos)
	var last IndexRecord
	var lastH Header
	if n > 0 {
		if last, err = s.Record(n - 1); err != nil {
			return err
		}
		var b [HeaderSize]byte
		if err := s.ReadAt(b[:], int64(last.Pos)); err != nil {
			return err
		}
		if lastH, err = ParseHeader(b[:]); err != nil {
			return fmt.Errorf("segment %s: truncate: chunk at %d: %w", s.segPath, last.Pos, err)
		}
	}
	// The segment file first: an index left longer by a crash between
	// the two is cut back to the chunks on open.
	if err := s.seg.Truncate(size); err != nil {
		s.werr = fmt.Errorf("segment %s: truncate: %w", s.segPath, err)
		return s.werr
	}
	if err := s.idx.Truncate(FileHeaderSize + int64(n)*IndexRecordSize); err != nil {
		s.werr = fmt.Errorf("segment %s: truncate: %w", s.idxPath, err)
		return s.werr
	}
	s.size, s.count, s.last, s.lastH = size, n, last, lastH
	if n == 0 {
		s.first = IndexRecord{}
	}
	if s.synced.Count > n {
		s.synced = Tail{Size: size, Count: n}
	}
	return s.Sync()
}
