package osiris

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/segment"
)

// Errors returned by streams.
var (
	// ErrClosed is returned by operations on a closed or deleted stream.
	ErrClosed = errors.New("osiris: stream closed")
	// ErrExists is returned by Create when the directory holds a stream.
	ErrExists = errors.New("osiris: stream exists")
	// ErrReferenceTooLong is returned for tracking references over 255 bytes.
	ErrReferenceTooLong = errors.New("osiris: reference longer than 255 bytes")

	errSegmentRemoved = errors.New("segment removed by retention")
)

// Message is one entry to append.
type Message struct {
	// Entry is an encoded entry, simple or sub-batch (see package segment),
	// exactly as it is to be stored.
	Entry []byte
	// Filter is the entry's filter value for the chunk Bloom filter; nil
	// for none.
	Filter []byte
	// PublishingID is the producer's sequence number for deduplication,
	// used when the batch has a Producer.
	PublishingID uint64
}

// Batch is a unit of appending. The caller must not change it between
// Submit and the call of Done.
type Batch struct {
	// Producer is the publisher reference for deduplication; with "" no
	// message is deduplicated. At most 255 bytes.
	Producer string
	// Messages are the entries to append, in order.
	Messages []Message
	// Done is called once by the writer goroutine when the batch is durable
	// as the fsync policy defines, or has failed. It must not block.
	Done func(Result)
	// NoSync asks for the batch to be confirmed once written to the
	// operating system, without an fsync, even under FsyncAlways: its
	// owner can rebuild it after a crash from elsewhere. The next sync of
	// the stream (another batch's, a roll's, Sync) covers it.
	NoSync bool
}

// Result is the outcome of a Batch.
type Result struct {
	Err        error  // non-nil: nothing of the batch is durable
	Written    int    // messages written
	Duplicates int    // messages dropped as duplicates (and so confirmed)
	LastOffset uint64 // offset of the last record written, when Written > 0
}

// Stats describe a stream.
type Stats struct {
	FirstOffset      uint64 // offset of the first chunk (next offset when empty)
	FirstTimestamp   int64  // timestamp of the first chunk, ms; 0 when empty
	LastChunkID      int64  // id of the last written chunk, -1 when none
	CommittedChunkID int64  // id of the last committed chunk, -1 when none
	NextOffset       uint64 // offset the next record will get
	Segments         int    // segment files
	Bytes            int64  // bytes in segment files
	Duplicates       uint64 // messages dropped as duplicates since open
}

// tail is what the writer publishes to readers after each commit. It is
// immutable once published.
type tail struct {
	segs      []*segRef     // oldest first; the last is active
	active    segment.Tail  // committed extent of the active segment
	next      uint64        // next offset to be assigned
	lastChunk int64         // last committed chunk id, -1 when none
	lastUser  int64         // last committed user chunk id, -1 when none
	wake      chan struct{} // closed when a newer tail is published
}

// Stream is an open stream directory. Its methods are safe for concurrent
// use.
type Stream struct {
	// Static after open.
	dir  string
	opts Options

	cfg   atomic.Pointer[Config] // current config; replaced by SetRetention
	tail  atomic.Pointer[tail]   // last published tail
	track *tracking
	repl  *replState              // nil for a single-node stream; static after open
	wtail atomic.Pointer[written] // replicated: the written log, for ServeReplica

	q struct {
		sync.Mutex
		batches  []*Batch
		offsets  []offsetUpdate
		state    stateUpdate // StoreState's newest blob, when set
		requests []func()    // run by the writer goroutine
		closed   bool
		running  bool // the writer role is held (see idle.go)
		// plainNext is the offset the next submitted record gets, true
		// while plain holds: the stream has never had tracking (no stored
		// offsets, no producer), so it has no offsets but its records',
		// taken in submit order (SubmitCounted).
		plainNext uint64
		plain     bool
	}
	signal    chan struct{}  // cap 1: work is queued; never closed
	closed    chan struct{}  // closed by Close: readers stop waiting
	wg        sync.WaitGroup // holders of the writer role, retention ticks
	retention *time.Timer    // retention timer, nil when disabled; guarded by q

	lastWritten atomic.Int64 // last written chunk id, -1 when none
	duplicates  atomic.Uint64
	idles       atomic.Uint64 // times the writer goroutine went idle and exited
	closeOnce   sync.Once
	closeErr    error
	w           *writer // owned by the holder of the writer role

	removeHook func(base uint64) // tests: called before a segment's files are removed
}

type offsetUpdate struct {
	ref    string
	offset uint64
}

// stateUpdate is the state blob StoreState queued for the next cycle,
// with the callbacks of every StoreState since the last cycle (the
// newest blob stands for them all).
type stateUpdate struct {
	blob  []byte
	set   bool
	dones []func(error)
}

// Create makes a new stream in dir (created if need be; it must not hold a
// stream) and opens it.
func Create(dir string, cfg Config, opts Options) (*Stream, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("osiris: create %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, configFile)); err == nil {
		return nil, fmt.Errorf("osiris: create %s: %w", dir, ErrExists)
	}
	if err := writeConfig(dir, cfg); err != nil {
		return nil, err
	}
	return Open(dir, opts)
}

// Open opens the stream in dir, repairing the tail of its last segment and
// replaying its tracking state.
func Open(dir string, opts Options) (*Stream, error) {
	cfg, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	s := &Stream{
		dir:    dir,
		opts:   opts.withDefaults(),
		track:  newTracking(),
		signal: make(chan struct{}, 1),
		closed: make(chan struct{}),
	}
	if rp := s.opts.Replication; rp != nil {
		if s.repl, err = newReplState(rp); err != nil {
			return nil, err
		}
		if rp.Role == RoleLeader && rp.Epoch != 0 && rp.Epoch != cfg.Epoch {
			if rp.Epoch < cfg.Epoch {
				return nil, fmt.Errorf("osiris: open %s: leader epoch %d below the stream's %d: %w", dir, rp.Epoch, cfg.Epoch, ErrStaleEpoch)
			}
			cfg.Epoch = rp.Epoch
			if err := writeConfig(dir, cfg); err != nil {
				return nil, err
			}
		}
	}
	s.cfg.Store(&cfg)
	w, err := openWriter(s)
	if err != nil {
		return nil, err
	}
	s.w = w
	if s.repl != nil && s.repl.role == RoleLeader {
		if w.lastEpoch > cfg.Epoch {
			w.close()
			return nil, fmt.Errorf("osiris: open %s: leader epoch %d below the log's %d: %w", dir, cfg.Epoch, w.lastEpoch, ErrStaleEpoch)
		}
		if err := w.startEpoch(); err != nil {
			w.close()
			return nil, err
		}
	}
	s.q.Lock()
	s.track.mu.Lock()
	s.q.plain = s.track.emptyLocked()
	s.track.mu.Unlock()
	s.q.plainNext = w.next
	if s.opts.IdleTimeout > 0 {
		// Born idle: the first write starts the writer.
		w.suspend()
	} else {
		s.notify(s.claimWriterLocked())
	}
	if s.opts.RetentionInterval > 0 {
		s.retention = time.AfterFunc(s.opts.RetentionInterval, s.retentionTick)
	}
	s.q.Unlock()
	return s, nil
}

// listSegments returns the base offsets of the segment files in dir, in
// order, and removes index files whose segment is gone.
func listSegments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("osiris: open %s: %w", dir, err)
	}
	var bases []uint64
	have := map[uint64]bool{}
	for _, e := range ents {
		if base, ok := segment.ParseSegmentFileName(e.Name()); ok {
			bases = append(bases, base)
			have[base] = true
		}
	}
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), segment.IndexExt); ok {
			if base, ok := segment.ParseSegmentFileName(name + segment.SegmentExt); ok && !have[base] {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	slices.Sort(bases)
	return bases, nil
}

// Dir is the stream's directory.
func (s *Stream) Dir() string { return s.dir }

// Config is the stream's current configuration.
func (s *Stream) Config() Config { return *s.cfg.Load() }

// Submit queues a batch for the writer. Done is called later, from the
// writer goroutine; Submit itself never blocks on I/O.
func (s *Stream) Submit(b *Batch) error {
	if len(b.Producer) > MaxReferenceLen {
		return ErrReferenceTooLong
	}
	if s.isReplica() {
		return ErrNotLeader
	}
	s.q.Lock()
	if s.q.closed {
		s.q.Unlock()
		return ErrClosed
	}
	s.q.batches = append(s.q.batches, b)
	if b.Producer != "" {
		s.q.plain = false
	} else {
		s.q.plainNext += uint64(len(b.Messages))
	}
	start := s.claimWriterLocked()
	s.q.Unlock()
	s.notify(start)
	return nil
}

// ErrNotPlain is returned by SubmitCounted on a stream that has had
// tracking: its offsets are not its records' alone.
var ErrNotPlain = errors.New("osiris: stream has tracking; record offsets are not predictable")

// SubmitCounted is Submit for a stream that never has tracking (no
// stored offsets, no producer references): it also returns the offset
// the batch's first record will get. Such a stream's records take
// consecutive offsets in submit order, so the offset is known before the
// batch is written, as long as every write succeeds: a failed batch
// (Result.Err) takes no offsets, and the offsets predicted for batches
// submitted after it are wrong. The caller checks each Result's
// LastOffset against what it was told. b.Producer must be empty.
func (s *Stream) SubmitCounted(b *Batch) (first uint64, err error) {
	if b.Producer != "" {
		return 0, ErrNotPlain
	}
	if s.isReplica() {
		return 0, ErrNotLeader
	}
	s.q.Lock()
	if s.q.closed {
		s.q.Unlock()
		return 0, ErrClosed
	}
	if !s.q.plain {
		s.q.Unlock()
		return 0, ErrNotPlain
	}
	first = s.q.plainNext
	s.q.plainNext += uint64(len(b.Messages))
	s.q.batches = append(s.q.batches, b)
	start := s.claimWriterLocked()
	s.q.Unlock()
	s.notify(start)
	return first, nil
}

// FirstSegmentBase is the base offset of the stream's oldest segment:
// every record the stream holds is at or above it. It changes only when
// segments are deleted; it reads the published tail and opens no file.
func (s *Stream) FirstSegmentBase() uint64 {
	t := s.tail.Load()
	if len(t.segs) == 0 {
		return t.next
	}
	return t.segs[0].base
}

// Append submits msgs as one batch and waits until they are durable.
func (s *Stream) Append(ctx context.Context, producer string, msgs ...Message) (Result, error) {
	ch := make(chan Result, 1)
	b := &Batch{Producer: producer, Messages: msgs, Done: func(r Result) { ch <- r }}
	if err := s.Submit(b); err != nil {
		return Result{}, err
	}
	select {
	case r := <-ch:
		return r, r.Err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// StoreOffset records offset for the consumer reference ref. It is visible
// to QueryOffset at once and written to the log with the next write.
func (s *Stream) StoreOffset(ref string, offset uint64) error {
	if len(ref) > MaxReferenceLen {
		return ErrReferenceTooLong
	}
	if s.isReplica() {
		return ErrNotLeader
	}
	s.q.Lock()
	if s.q.closed {
		s.q.Unlock()
		return ErrClosed
	}
	s.track.mu.Lock()
	s.track.offsets[ref] = offset
	s.track.mu.Unlock()
	s.q.plain = false
	s.q.offsets = append(s.q.offsets, offsetUpdate{ref, offset})
	start := s.claimWriterLocked()
	s.q.Unlock()
	s.notify(start)
	return nil
}

// StoreState queues blob, the stream's state, to be written to the log
// in a tracking-delta chunk with the writer's next cycle, and calls done
// (when not nil) once that chunk is as durable as the stream's appends
// are when their Batch.Done is called: written, and synced if the fsync
// policy asks, on a single node; committed (held by a majority) on a
// replicated leader. When several StoreStates are queued before the
// writer runs, only the newest blob is written, and done of each is
// called with its outcome. done gets an error instead when the write
// fails or the stream closes before the chunk commits; it is called on
// the writer goroutine, with no lock of the stream held, and must not
// block. When StoreState returns an error (ErrClosed, ErrNotLeader on a
// replica, ErrStateTooLarge), done is not called.
//
// The state travels with the log: a replica applies it from the chunks
// it appends, every tracking snapshot (the first chunk of each segment
// rolled to) carries it, so truncation and retention never lose it, and
// State returns it after Open. The stream keeps blob: the caller must
// not modify it afterwards. Like StoreOffset, a stored state makes the
// stream's offsets no longer its records' alone (SubmitCounted).
func (s *Stream) StoreState(blob []byte, done func(error)) error {
	if len(blob) > MaxStateLen {
		return ErrStateTooLarge
	}
	if s.isReplica() {
		return ErrNotLeader
	}
	s.q.Lock()
	if s.q.closed {
		s.q.Unlock()
		return ErrClosed
	}
	if blob == nil {
		blob = []byte{} // a stored state is never nil (State: nil is none)
	}
	s.q.state.blob, s.q.state.set = blob, true
	if done != nil {
		s.q.state.dones = append(s.q.state.dones, done)
	}
	s.q.plain = false
	start := s.claimWriterLocked()
	s.q.Unlock()
	s.notify(start)
	return nil
}

// QueryOffset returns the offset stored for ref.
func (s *Stream) QueryOffset(ref string) (uint64, bool) { return s.track.offset(ref) }

// PublisherSequence returns the last publishing id written for producer
// reference ref, 0 when there is none.
func (s *Stream) PublisherSequence(ref string) uint64 { return s.track.sequence(ref) }

// do runs fn with the writer role and waits for it: on the writer
// goroutine after what is queued, or, when the writer is idle (nothing is
// queued), at once on the calling goroutine. fn must not write to the
// active segment: it may find it suspended.
func (s *Stream) do(fn func()) error {
	s.q.Lock()
	if s.q.closed {
		s.q.Unlock()
		return ErrClosed
	}
	if s.claimWriterLocked() {
		s.q.Unlock()
		fn()
		s.releaseWriter()
		return nil
	}
	ch := make(chan struct{})
	s.q.requests = append(s.q.requests, func() { fn(); close(ch) })
	s.q.Unlock()
	s.notify(false)
	<-ch
	return nil
}

// Sync makes everything written so far durable: it syncs the active
// segment if anything was written to it since its last sync (sealed
// segments were synced when they rolled).
func (s *Stream) Sync() error {
	var err error
	if e := s.do(func() {
		if s.w.dirty && s.w.werr == nil {
			s.w.sync()
		}
		err = s.w.werr
	}); e != nil {
		return e
	}
	return err
}

// Flush waits until everything submitted before it is written and
// committed.
func (s *Stream) Flush() error { return s.do(func() {}) }

// EnforceRetention applies the retention limits now.
func (s *Stream) EnforceRetention() error {
	var err error
	if e := s.do(func() { err = s.w.enforceRetention() }); e != nil {
		return e
	}
	return err
}

// SetRetention changes the retention limits (0: unlimited), persists them
// and applies them at once.
func (s *Stream) SetRetention(maxBytes int64, maxAge time.Duration) error {
	var err error
	if e := s.do(func() {
		cfg := *s.cfg.Load()
		cfg.MaxLengthBytes, cfg.MaxAge = maxBytes, maxAge
		if cfg, err = cfg.withDefaults(); err != nil {
			return
		}
		if err = writeConfig(s.dir, cfg); err != nil {
			return
		}
		s.cfg.Store(&cfg)
		err = s.w.enforceRetention()
	}); e != nil {
		return e
	}
	return err
}

// Stats returns the stream's current statistics.
func (s *Stream) Stats() Stats {
	t := s.tail.Load()
	st := Stats{
		NextOffset:       t.next,
		LastChunkID:      s.lastWritten.Load(),
		CommittedChunkID: t.lastChunk,
		Segments:         len(t.segs),
		Duplicates:       s.duplicates.Load(),
		FirstOffset:      t.next,
	}
	for _, r := range t.segs {
		n, err := r.fileSize()
		if err == nil {
			st.Bytes += n
		}
	}
	if rec, ok := firstRecord(t); ok {
		st.FirstOffset, st.FirstTimestamp = rec.ChunkID, rec.Timestamp
	}
	return st
}

// firstRecord returns the index record of the stream's first chunk.
func firstRecord(t *tail) (segment.IndexRecord, bool) {
	for i, r := range t.segs {
		seg, err := r.acquire()
		if err != nil {
			continue
		}
		count := t.active.Count
		if i < len(t.segs)-1 {
			ext, _ := r.extent()
			count = ext.Count
		}
		var rec segment.IndexRecord
		if count > 0 {
			rec, err = seg.Record(0)
		}
		r.release()
		if count > 0 && err == nil {
			return rec, true
		}
	}
	return segment.IndexRecord{}, false
}

// Close stops the writer after it has written everything queued, wakes
// blocked readers, syncs and closes the files.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.q.Lock()
		s.q.closed = true
		running := s.q.running
		if s.retention != nil {
			s.retention.Stop()
		}
		s.q.Unlock()
		if running {
			s.notify(false)
		}
		s.wg.Wait() // nobody holds the writer role from here on
		close(s.closed)
		w := s.w
		if s.repl != nil {
			w.failWaiting(ErrClosed)
		}
		if w.dirty && w.werr == nil {
			w.sync()
		}
		s.closeErr = w.close()
	})
	return s.closeErr
}

// Delete closes the stream and removes its directory.
func (s *Stream) Delete() error {
	s.Close()
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("osiris: delete %s: %w", s.dir, err)
	}
	return nil
}

// CommittedChunkID is the id of the last committed chunk, -1 when none.
func (s *Stream) CommittedChunkID() int64 { return s.tail.Load().lastChunk }

// CommittedOffset is the offset of the last committed record (of any
// chunk type), -1 when none: osiris_log:committed_offset.
func (s *Stream) CommittedOffset() int64 {
	t := s.tail.Load()
	if t.lastChunk < 0 {
		return -1
	}
	return int64(t.next) - 1
}
