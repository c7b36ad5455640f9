package osiris

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/warren-mq/warren/segment"
	"golang.org/x/sys/unix"
)

// SpecKind says where a reader starts.
type SpecKind uint8

// Offset specification kinds, numbered as the stream protocol numbers them.
const (
	SpecFirst     SpecKind = 1 // the first chunk of the oldest segment
	SpecLast      SpecKind = 2 // the last user chunk; next when there is none
	SpecNext      SpecKind = 3 // after the last chunk: new data only
	SpecOffset    SpecKind = 4 // the chunk holding Offset, clamped to [first, next]
	SpecTimestamp SpecKind = 5 // the first chunk with timestamp >= Timestamp
)

// OffsetSpec is where a reader starts.
type OffsetSpec struct {
	Kind      SpecKind
	Offset    uint64 // for SpecOffset
	Timestamp int64  // for SpecTimestamp, ms
}

// First, Last, Next, AtOffset and AtTimestamp build offset specs.
func First() OffsetSpec               { return OffsetSpec{Kind: SpecFirst} }
func Last() OffsetSpec                { return OffsetSpec{Kind: SpecLast} }
func Next() OffsetSpec                { return OffsetSpec{Kind: SpecNext} }
func AtOffset(o uint64) OffsetSpec    { return OffsetSpec{Kind: SpecOffset, Offset: o} }
func AtTimestamp(ms int64) OffsetSpec { return OffsetSpec{Kind: SpecTimestamp, Timestamp: ms} }
func (s OffsetSpec) String() string {
	switch s.Kind {
	case SpecFirst:
		return "first"
	case SpecLast:
		return "last"
	case SpecNext:
		return "next"
	case SpecOffset:
		return fmt.Sprintf("offset=%d", s.Offset)
	case SpecTimestamp:
		return fmt.Sprintf("timestamp=%d", s.Timestamp)
	}
	return fmt.Sprintf("spec(%d)", s.Kind)
}

// ErrInvalidSpec is returned for an unknown offset spec kind.
var ErrInvalidSpec = errors.New("osiris: invalid offset spec")

// ReaderOptions tune a reader.
type ReaderOptions struct {
	// Filter skips chunks whose Bloom filter rules out the wanted values.
	Filter *segment.Matcher
	// AllChunks returns tracking chunks too; by default only user chunks.
	AllChunks bool
	// ReadAhead reads up to 128 KiB of the segment at once, so that a
	// run of small chunks costs one pread rather than one per chunk, and
	// hands out their data in memory (Chunk.Data). The buffer goes back
	// to a shared pool whenever the reader parks at the end of the
	// stream. Off, a reader reads each header (and Bloom filter) alone.
	ReadAhead bool
}

// Chunk is one committed chunk handed out by a Reader. File and the
// positions stay valid until the reader's next call to Next, TryNext, Park
// or Close (use Hold to keep them longer).
type Chunk struct {
	Header      segment.Header
	Bloom       []byte               // the chunk's Bloom bytes (valid until the next Next)
	BloomFormat segment.FilterFormat // how to read Bloom: its segment's format
	File        *os.File             // the segment file: read with ReadAt or sendfile only
	Pos         int64                // position of the chunk header in File
	// Data is the chunk's entry data when the reader's read-ahead
	// already holds it (small chunks), valid until the reader's next
	// call; nil otherwise (read it from File). Either way it is the same
	// committed bytes.
	Data []byte
	ref  *segRef // the segment, for Hold
}

// DataPos is the position of the chunk's entry data in File.
func (c *Chunk) DataPos() int64 { return c.Pos + c.Header.DataOffset() }

// ReadData reads the chunk's entry data into buf (grown if need be).
func (c *Chunk) ReadData(buf []byte) ([]byte, error) {
	if c.Data != nil {
		return append(buf[:0], c.Data...), nil
	}
	n := int(c.Header.DataLen)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := c.File.ReadAt(buf, c.DataPos()); err != nil {
		return buf, fmt.Errorf("osiris: chunk %d: read data: %w", c.Header.ChunkID, err)
	}
	return buf, nil
}

// Reader reads a stream's committed chunks in order. A Reader is used by
// one goroutine.
//
// A reader that has read everything committed lets go of the active
// segment (it parks) and takes it again when more is committed, so that
// readers waiting at the end of an idle stream keep no file open.
type Reader struct {
	s    *Stream
	opts ReaderOptions
	ref  *segRef          // segment being read: held, or parked at its end; nil once closed
	seg  *segment.Segment // its open segment while held; nil while parked
	pos  int64            // next chunk position in seg
	next uint64           // offset after the last chunk returned or skipped

	// Read-ahead: ra holds committed bytes of raSeg from raPos, so that
	// consecutive small chunks cost one pread for many rather than one
	// each (headers, Bloom filters and data). Committed bytes never
	// change, so the window stays valid as the segment grows. A reader
	// meeting large chunks reads headers only (raBig), as the data goes
	// by sendfile anyway.
	ra    []byte
	raPos int64
	raSeg *segment.Segment
	raBig bool
	nw    noWaitRead // fill's first try
}

// readAhead is the most a reader reads at once; chunks whose header,
// Bloom filter and data fit in it come with Data.
const readAhead = 128 << 10

// NewReader opens a reader at spec.
func (s *Stream) NewReader(spec OffsetSpec, opts ReaderOptions) (*Reader, error) {
	select {
	case <-s.closed:
		return nil, ErrClosed
	default:
	}
	r := &Reader{s: s, opts: opts}
	for attempt := 0; ; attempt++ {
		err := r.seek(spec)
		if err == nil {
			return r, nil
		}
		// Retention may remove a segment between looking it up and opening
		// it; look again.
		if !errors.Is(err, errSegmentRemoved) || attempt > 3 {
			return nil, err
		}
	}
}

// seek positions the reader at spec.
func (r *Reader) seek(spec OffsetSpec) error {
	t := r.s.tail.Load()
	switch spec.Kind {
	case SpecFirst:
		return r.at(t, 0, segment.FileHeaderSize, t.segs[0].base)
	case SpecNext:
		return r.atEnd(t)
	case SpecLast:
		if t.lastUser < 0 {
			return r.atEnd(t)
		}
		return r.atOffset(t, uint64(t.lastUser))
	case SpecOffset:
		return r.atOffset(t, spec.Offset)
	case SpecTimestamp:
		return r.atTimestamp(t, spec.Timestamp)
	}
	return fmt.Errorf("%w: %d", ErrInvalidSpec, spec.Kind)
}

// count is the number of committed chunks of segment i of t.
func count(t *tail, i int) int {
	if i == len(t.segs)-1 {
		return t.active.Count
	}
	ext, _ := t.segs[i].extent()
	return ext.Count
}

// at positions the reader in segment i of t at pos.
func (r *Reader) at(t *tail, i int, pos int64, next uint64) error {
	seg, err := t.segs[i].acquire()
	if err != nil {
		return err
	}
	r.release()
	r.ref, r.seg, r.pos, r.next = t.segs[i], seg, pos, next
	return nil
}

func (r *Reader) atEnd(t *tail) error {
	return r.at(t, len(t.segs)-1, t.active.Size, t.next)
}

// atOffset positions the reader at the chunk holding off, clamped.
func (r *Reader) atOffset(t *tail, off uint64) error {
	if off >= t.next {
		return r.atEnd(t)
	}
	// The newest segment whose base is <= off.
	i := sort.Search(len(t.segs), func(i int) bool { return t.segs[i].base > off }) - 1
	if i < 0 {
		return r.at(t, 0, segment.FileHeaderSize, t.segs[0].base)
	}
	seg, err := t.segs[i].acquire()
	if err != nil {
		return err
	}
	defer t.segs[i].release()
	n := count(t, i)
	j, err := seg.SearchOffset(n, off)
	if err != nil {
		return err
	}
	if j < 0 {
		return r.at(t, i, segment.FileHeaderSize, t.segs[i].base)
	}
	rec, err := seg.Record(j)
	if err != nil {
		return err
	}
	return r.at(t, i, int64(rec.Pos), rec.ChunkID)
}

// atTimestamp positions the reader at the first chunk with a timestamp
// >= ts: next when all are older, first when all are newer.
func (r *Reader) atTimestamp(t *tail, ts int64) error {
	for i := len(t.segs) - 1; i >= 0; i-- {
		seg, err := t.segs[i].acquire()
		if err != nil {
			return err
		}
		n := count(t, i)
		if n == 0 {
			t.segs[i].release()
			continue
		}
		first, err := seg.Record(0)
		if err != nil {
			t.segs[i].release()
			return err
		}
		if first.Timestamp >= ts && i > 0 {
			// Maybe an older segment has it.
			t.segs[i].release()
			continue
		}
		j, err := seg.SearchTimestamp(n, ts)
		if err != nil {
			t.segs[i].release()
			return err
		}
		if j == n {
			// Everything here is older: the next segment's first chunk, or
			// the end.
			t.segs[i].release()
			if i == len(t.segs)-1 {
				return r.atEnd(t)
			}
			return r.at(t, i+1, segment.FileHeaderSize, t.segs[i+1].base)
		}
		rec, err := seg.Record(j)
		t.segs[i].release()
		if err != nil {
			return err
		}
		return r.at(t, i, int64(rec.Pos), rec.ChunkID)
	}
	return r.at(t, 0, segment.FileHeaderSize, t.segs[0].base)
}

// readChunk reads the header and Bloom filter of the chunk at r.pos in
// r.seg, whose committed bytes end at end, and its data when the
// read-ahead holds it, refilling the read-ahead as needed.
func (r *Reader) readChunk(end int64) (h segment.Header, bloom, data []byte, err error) {
	const headMax = segment.HeaderSize + segment.MaxBloomSize
	need := min(int64(headMax), end-r.pos)
	if need < segment.HeaderSize {
		return h, nil, nil, fmt.Errorf("osiris: chunk at %d: %d bytes left: %w", r.pos, end-r.pos, segment.ErrCorrupt)
	}
	if r.raSeg != r.seg || r.pos < r.raPos || r.pos+need > r.raPos+int64(len(r.ra)) {
		n := min(int64(readAhead), end-r.pos)
		if r.raBig || !r.opts.ReadAhead {
			n = need
		}
		if err := r.fill(n); err != nil {
			return h, nil, nil, err
		}
	}
	b := r.ra[r.pos-r.raPos:]
	if h, err = segment.ParseHeader(b[:need]); err != nil {
		return h, nil, nil, fmt.Errorf("osiris: chunk at %d: %w", r.pos, err)
	}
	size := h.Size()
	if r.pos+size > end || segment.HeaderSize+int64(h.BloomSize) > need {
		return h, nil, nil, fmt.Errorf("osiris: chunk at %d: %d bytes pass the end %d: %w", r.pos, size, end, segment.ErrCorrupt)
	}
	off := h.DataOffset()
	if r.opts.ReadAhead && off+int64(h.DataLen) > int64(len(b)) && size <= readAhead/2 {
		// A small chunk across the window's end: move the window to it
		// rather than hand it out without Data, which would cost a
		// read of its own (and, in streamproto, a hand-off to the
		// connection's writer) per such chunk.
		if err := r.fill(min(int64(readAhead), end-r.pos)); err != nil {
			return h, nil, nil, err
		}
		b = r.ra
	}
	bloom = b[segment.HeaderSize : segment.HeaderSize+int(h.BloomSize)]
	if off+int64(h.DataLen) <= int64(len(b)) {
		data = b[off : off+int64(h.DataLen) : off+int64(h.DataLen)]
	}
	// Chunks larger than half the window make the next reads header
	// reads; smaller ones bring the window back.
	r.raBig = size > readAhead/2
	return h, bloom, data, nil
}

// fill reads n bytes of r.seg at r.pos into the read-ahead window.
func (r *Reader) fill(n int64) error {
	const headMax = segment.HeaderSize + segment.MaxBloomSize
	if cap(r.ra) < int(n) {
		r.putRA()
		if n > headMax {
			r.ra = *raPool.Get().(*[]byte)
		} else {
			r.ra = make([]byte, headMax)
		}
	}
	r.ra = r.ra[:n]
	r.raSeg, r.raPos = nil, r.pos
	if !r.nw.read(r.seg, r.ra, r.pos) {
		if err := r.seg.ReadAt(r.ra, r.pos); err != nil {
			r.ra = r.ra[:0]
			return err
		}
	}
	r.raSeg = r.seg
	return nil
}

// noWaitRead reads a segment's bytes that are in the page cache with a
// raw preadv2(RWF_NOWAIT) system call, which fails rather than wait for
// the disk. A raw call skips the Go scheduler's system call bookkeeping:
// a reader woken from idle (a stream consumer's credit after a pause)
// whose read-ahead is an ordinary pread wakes the runtime's sysmon
// thread, which costs more than the read. Bytes not all cached, or a
// kernel without RWF_NOWAIT, leave the read to Segment.ReadAt. It keeps
// its state between reads so that a read allocates nothing.
type noWaitRead struct {
	seg *segment.Segment
	raw syscall.RawConn  // seg's file's; nil: none
	fn  func(fd uintptr) // nw.pread, made once
	b   []byte
	off int64
	ok  bool
}

// noWaitUnsupported is set once preadv2 or RWF_NOWAIT turns out to be
// missing (ENOSYS, EOPNOTSUPP, EINVAL): no reader tries again.
var noWaitUnsupported atomic.Bool

// read fills b from seg at off if the page cache holds all of it, and
// reports whether it did.
func (nw *noWaitRead) read(seg *segment.Segment, b []byte, off int64) bool {
	if noWaitUnsupported.Load() || len(b) == 0 {
		return false
	}
	if nw.seg != seg {
		nw.seg, nw.raw = seg, nil
		if f := seg.File(); f != nil {
			if raw, err := f.SyscallConn(); err == nil {
				nw.raw = raw
			}
		}
	}
	if nw.raw == nil {
		return false
	}
	if nw.fn == nil {
		nw.fn = nw.pread
	}
	nw.b, nw.off, nw.ok = b, off, false
	err := nw.raw.Control(nw.fn) // holds the file open during the call
	nw.b = nil
	return err == nil && nw.ok
}

// pread is nw.fn.
func (nw *noWaitRead) pread(fd uintptr) {
	iov := unix.Iovec{Base: unsafe.SliceData(nw.b)}
	iov.SetLen(len(nw.b))
	// preadv2's position comes in two longs, low and high, as
	// x/sys/unix's Preadv2 passes it.
	const longBits = unsafe.Sizeof(uintptr(0)) * 8
	lo, hi := uintptr(nw.off), uintptr(uint64(nw.off)>>(longBits-1)>>1)
	n, _, errno := unix.RawSyscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&iov)), 1, lo, hi, unix.RWF_NOWAIT)
	switch errno {
	case 0:
		nw.ok = int(n) == len(nw.b)
	case unix.ENOSYS, unix.EOPNOTSUPP, unix.EINVAL:
		noWaitUnsupported.Store(true)
	}
}

// raPool holds read-ahead buffers of readers that parked.
var raPool = sync.Pool{New: func() any { b := make([]byte, readAhead); return &b }}

// putRA gives a read-ahead buffer back to the pool.
func (r *Reader) putRA() {
	if cap(r.ra) == readAhead {
		b := r.ra[:readAhead]
		raPool.Put(&b)
		r.ra = nil
	}
	r.ra, r.raSeg = r.ra[:0], nil
}

// NextOffset is the offset after the last chunk returned (or skipped).
func (r *Reader) NextOffset() uint64 { return r.next }

// Next returns the next committed chunk, waiting for one if the reader is
// at the end. It returns ctx's error when ctx ends and ErrClosed when the
// stream closes.
func (r *Reader) Next(ctx context.Context) (Chunk, error) {
	for {
		c, ok, wake, err := r.tryNext()
		if err != nil || ok {
			return c, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return Chunk{}, ctx.Err()
		case <-r.s.closed:
			return Chunk{}, ErrClosed
		}
	}
}

// TryNext returns the next committed chunk if there is one, without
// waiting; ok is false at the end.
func (r *Reader) TryNext() (Chunk, bool, error) {
	c, ok, _, err := r.tryNext()
	return c, ok, err
}

// Wait returns a channel closed when the stream commits more data.
func (r *Reader) Wait() <-chan struct{} { return r.s.tail.Load().wake }

func (r *Reader) tryNext() (Chunk, bool, <-chan struct{}, error) {
	for {
		if r.ref == nil {
			return Chunk{}, false, nil, ErrClosed
		}
		t := r.s.tail.Load()
		limit, sealed := r.ref.extent()
		end := limit.Size
		if !sealed {
			end = t.active.Size
			if t.segs[len(t.segs)-1] != r.ref {
				// The stream closed under the reader.
				return Chunk{}, false, nil, ErrClosed
			}
		}
		if r.pos < end && r.seg == nil {
			if err := r.unpark(); err != nil {
				return Chunk{}, false, nil, err
			}
			continue
		}
		if r.pos < end {
			h, bloom, data, err := r.readChunk(end)
			if err != nil {
				return Chunk{}, false, nil, err
			}
			format := r.seg.FilterFormat()
			c := Chunk{Header: h, Bloom: bloom, BloomFormat: format, File: r.seg.File(), Pos: r.pos, Data: data, ref: r.ref}
			r.pos += h.Size()
			r.next = h.NextOffset()
			if h.Type != segment.ChunkUser && !r.opts.AllChunks {
				continue
			}
			if !r.opts.Filter.Match(format, bloom) {
				continue
			}
			return c, true, nil, nil
		}
		if !sealed {
			r.park()
			return Chunk{}, false, t.wake, nil
		}
		// Move to the next segment in the current list.
		i := sort.Search(len(t.segs), func(i int) bool { return t.segs[i].base > r.ref.base })
		if i == len(t.segs) {
			return Chunk{}, false, t.wake, nil
		}
		if err := r.at(t, i, segment.FileHeaderSize, r.next); err != nil {
			if errors.Is(err, errSegmentRemoved) {
				continue
			}
			return Chunk{}, false, nil, err
		}
	}
}

// Park tells the reader that its caller is done with the chunks it
// returned (their File may close). A reader that has read everything
// committed then lets go of the active segment's files at once, as Next
// and TryNext do when they find nothing more, instead of keeping them
// open until its next call; anywhere else Park does nothing, so that
// reading on reopens nothing. A queue that reads each chunk into memory
// calls it after reading, so that it holds no file once it is idle.
func (r *Reader) Park() {
	if r.seg == nil {
		return
	}
	t := r.s.tail.Load()
	if _, sealed := r.ref.extent(); !sealed && t.segs[len(t.segs)-1] == r.ref && r.pos >= t.active.Size {
		r.park()
	}
}

// park lets go of the segment being read but stays positioned in it.
func (r *Reader) park() {
	r.putRA()
	if r.seg != nil {
		r.ref.release()
		r.seg = nil
	}
}

// unpark takes the parked segment again. If retention removed it
// meanwhile (it was sealed since), the reader goes on at the oldest chunk
// at or after where it stopped.
func (r *Reader) unpark() error {
	seg, err := r.ref.acquire()
	if err == nil {
		r.seg = seg
		return nil
	}
	r.ref = nil
	if !errors.Is(err, errSegmentRemoved) {
		return err
	}
	select {
	case <-r.s.closed:
		return ErrClosed
	default:
	}
	for attempt := 0; ; attempt++ {
		err := r.atOffset(r.s.tail.Load(), r.next)
		if err == nil || !errors.Is(err, errSegmentRemoved) || attempt > 3 {
			return err
		}
	}
}

// release lets go of the segment being read.
func (r *Reader) release() {
	if r.ref != nil && r.seg != nil {
		r.ref.release()
	}
	r.ref, r.seg = nil, nil
}

// Close releases the reader's segment.
func (r *Reader) Close() {
	r.putRA()
	r.release()
}

// Hold keeps the chunk's segment file open after the reader moves on,
// until the returned release is called, so the data can be sent
// asynchronously.
func (c *Chunk) Hold() (release func(), err error) {
	if c.ref == nil {
		return func() {}, nil
	}
	if err := c.ref.hold(); err != nil {
		return nil, err
	}
	return c.ref.release, nil
}
