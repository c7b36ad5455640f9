package osiris

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/warren-mq/warren/segment"
)

// flushBytes is how much chunk data the writer buffers before it writes in
// the middle of a cycle.
const flushBytes = 8 << 20

// Adaptive chunk sizing, as RabbitMQ's osiris writer batches (its batching
// server starts at 32 writes a batch, doubles while batches fill, up to
// 8192, and halves when its mailbox runs dry): a chunk holds at most
// chunkEntries entries. A chunk that fills doubles the bound; a cycle that
// brings fewer than a quarter of it halves it (a quarter, not a half, so
// that steady cycles of about the same size do not make the bound, and
// the chunks, swing). So a burst on an idle stream forms small chunks
// first (one credit of a stream consumer, one chunk, is then a small
// amount), and sustained load forms large ones.
const (
	minChunkEntries = 32
	maxChunkEntries = 8192
)

// writer owns the active segment and everything that changes the log. All
// its fields are owned by whoever holds the writer role (see idle.go): the
// writer goroutine, a caller running a request while the writer is idle,
// or openWriter and Close.
type writer struct {
	s *Stream

	segs       []*segRef        // oldest first; copied on change (readers hold old slices)
	active     *segment.Segment // the last segment, held through activeRef; nil while suspended
	activeRef  *segRef          // the last segment
	idleTail   segment.Tail     // extent of the active segment while suspended
	segHasUser bool             // the active segment (or buf) holds a user chunk
	next       uint64           // next offset to assign
	lastTs     int64            // timestamp of the last chunk, ms
	lastChunk  int64            // last written chunk id, -1 when none
	lastUser   int64            // last written user chunk id, -1 when none
	lastEpoch  uint64           // epoch of the last chunk, 0 when none

	// Replication (see replica.go); unused on a single-node stream.
	points  []commitPoint  // ends of written chunks not yet committed, oldest first
	waiting []waitingBatch // batches whose Done waits for the commit
	pub     commitPoint    // what readers were last shown

	buf           []byte           // chunks built and not yet written
	hdrs          []segment.Header // headers of the chunks in buf
	b             segment.Builder
	chunkEntries  int      // the adaptive bound on a chunk's entries (see minChunkEntries)
	cycleEntries  int      // entries added in this cycle
	open          bool     // a chunk is being built in b
	chunkTs       int64    // timestamp of this cycle's chunks
	trailer       []byte   // trailer scratch
	seqs          []seqRec // producer sequences in the chunk being built
	offsets       []offsetUpdate
	state         []byte // a state blob to write with the next delta, when hasState
	hasState      bool
	chunkID       uint64 // id of the chunk being built
	toSeal        []sealing
	rolledInCycle bool
	werr          error // sticky: after a failed write the stream only fails

	dirty    bool      // data written since the last sync
	lastSync time.Time // for FsyncInterval
	work     uint64    // rounds that found work queued, for the idle check
}

type seqRec struct {
	ref string
	seq uint64
}

// sealing is a segment rolled away from in this cycle, still held by the
// writer, to seal when the cycle commits.
type sealing struct {
	ref    *segRef
	ext    segment.Tail
	lastTs int64 // newest chunk's timestamp, when hasTs
	hasTs  bool
	unheld bool // the writer holds no reference to release (a replicated stream's segments found at open)
}

// openWriter recovers the stream's state from its directory.
func openWriter(s *Stream) (*writer, error) {
	w := &writer{s: s, lastChunk: -1, lastUser: -1, lastSync: s.opts.Now(), chunkEntries: minChunkEntries}
	bases, err := listSegments(s.dir)
	if err != nil {
		return nil, err
	}
	if len(bases) == 0 {
		seg, err := segment.Create(s.dir, 0)
		if err != nil {
			return nil, err
		}
		w.active = seg
		w.activeRef = newActiveRef(s.dir, 0, seg)
		w.segs = []*segRef{w.activeRef}
	} else {
		last := bases[len(bases)-1]
		// The last segment may hold what was never synced: a power cut
		// can damage it anywhere after the last sync, so every chunk is
		// validated unless the caller knows there was none since
		// (TrustTail). The others were synced whole at the roll.
		open := segment.Recover
		if s.opts.TrustTail {
			open = segment.Open
		}
		seg, rec, err := open(s.dir, last)
		if err != nil {
			return nil, err
		}
		if seg.Count() == 0 {
			// An empty segment of an older format version takes the
			// current one; one with chunks is rolled away from before
			// the first write (see needsRoll).
			if err := seg.Upgrade(); err != nil {
				seg.Close()
				return nil, err
			}
		}
		if rec.Repaired() {
			s.opts.Logger.Warn("osiris: repaired segment tail", "dir", s.dir, "segment", last,
				"truncated_bytes", rec.TruncatedBytes, "dropped_index_records", rec.DroppedRecords,
				"added_index_records", rec.AddedRecords, "index_rebuilt", rec.IndexRebuilt)
		}
		for _, b := range bases[:len(bases)-1] {
			// A replicated stream seals a segment only once the commit
			// offset has passed it (see replica.go).
			w.segs = append(w.segs, newSegRef(s.dir, b, s.repl == nil))
		}
		w.active = seg
		w.activeRef = newActiveRef(s.dir, last, seg)
		w.segs = append(w.segs, w.activeRef)
	}
	if err := w.recoverPosition(); err != nil {
		w.close()
		return nil, err
	}
	if err := w.recoverTracking(); err != nil {
		w.close()
		return nil, err
	}
	if w.active.Count() == 0 && w.active.Base() > 0 && !s.isReplica() {
		// A crash tore the snapshot that starts a segment rolled to
		// with tracking (or came before it): write it again, or
		// retention would lose the tracking of the older segments.
		t := s.track
		t.mu.Lock()
		body := t.appendSnapshotLocked(nil, w.segs[0].base)
		t.mu.Unlock()
		if len(body) > 0 {
			w.chunkTs = max(s.opts.Now().UnixMilli(), w.lastTs)
			w.writeTracking(segment.ChunkTrackingSnapshot, body)
			if w.flush(); w.werr != nil {
				w.close()
				return nil, w.werr
			}
		}
	}
	s.lastWritten.Store(w.lastChunk)
	if s.repl != nil {
		if err := w.openReplicated(); err != nil {
			w.close()
			return nil, err
		}
	}
	w.publish()
	return w, nil
}

// recoverPosition sets next, lastTs, lastChunk and lastUser from the last
// non-empty segment.
func (w *writer) recoverPosition() error {
	w.next = w.active.Base()
	for i := len(w.segs) - 1; i >= 0; i-- {
		r := w.segs[i]
		seg, err := r.acquire()
		if err != nil {
			return err
		}
		rec, h, ok := seg.Last()
		var user int
		if ok && w.lastUser < 0 {
			ext := seg.Tail()
			user, err = seg.LastOfType(ext.Count, segment.ChunkUser)
		}
		var urec segment.IndexRecord
		if err == nil && user >= 0 && ok && w.lastUser < 0 {
			urec, err = seg.Record(user)
		}
		r.release()
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if w.lastChunk < 0 {
			w.lastChunk = int64(rec.ChunkID)
			w.lastTs = h.Timestamp
			w.lastEpoch = h.Epoch
			if i == len(w.segs)-1 {
				w.next = h.NextOffset()
				w.segHasUser = true
			}
		}
		if user >= 0 {
			w.lastUser = int64(urec.ChunkID)
			return nil
		}
	}
	return nil
}

// recoverTracking replays the tracking of the last segment. A roll
// writes a snapshot first in the new segment whenever tracking is not
// empty, so the last segment either starts with one or began with no
// tracking at all. Only when it is empty (a crash came before its first
// chunk was whole) does the segment before it count too.
func (w *writer) recoverTracking() error {
	start := len(w.segs) - 1
	if w.active.Count() == 0 && start > 0 {
		start--
	}
	t := w.s.track
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range w.segs[start:] {
		seg, err := r.acquire()
		if err != nil {
			return err
		}
		err = replaySegment(seg, t)
		r.release()
		if err != nil {
			return err
		}
	}
	return nil
}

// replaySegment applies the tracking found in every chunk of seg.
// REQUIRES: t.mu held.
func replaySegment(seg *segment.Segment, t *tracking) error {
	sc := newScanner(seg, seg.Tail().Size)
	for {
		h, pos, ok, err := sc.next()
		if err != nil || !ok {
			return err
		}
		var data, trailer []byte
		if h.Type != segment.ChunkUser {
			if data, err = sc.read(pos+h.DataOffset(), int(h.DataLen)); err != nil {
				return err
			}
		}
		if h.TrailerLen > 0 {
			if trailer, err = sc.read(pos+h.DataOffset()+int64(h.DataLen), int(h.TrailerLen)); err != nil {
				return err
			}
		}
		if err := t.replayChunkLocked(&h, data, trailer); err != nil {
			return fmt.Errorf("osiris: segment %d: %w", seg.Base(), err)
		}
	}
}

// run is the writer goroutine. It holds the writer role, claimed for it
// by whoever started it, until Close or until it has been idle for
// Options.IdleTimeout.
func (w *writer) run() {
	defer w.s.wg.Done()
	cfg := w.s.cfg.Load()
	var syncTick <-chan time.Time
	if cfg.Fsync == FsyncInterval {
		t := time.NewTicker(cfg.FsyncInterval)
		defer t.Stop()
		syncTick = t.C
	}
	var idle *time.Timer
	var idleC <-chan time.Time
	if w.s.opts.IdleTimeout > 0 {
		idle = time.NewTimer(w.s.opts.IdleTimeout)
		defer idle.Stop()
		idleC = idle.C
	}
	seen := w.work
	for {
		select {
		case <-w.s.signal:
		case <-syncTick:
			if w.dirty && w.werr == nil {
				w.sync()
			}
			continue
		case <-idleC:
			if w.work != seen {
				// Busy during the last period: look again after another.
				seen = w.work
				idle.Reset(w.s.opts.IdleTimeout)
				continue
			}
			if w.goIdle() {
				return
			}
			idle.Reset(w.s.opts.IdleTimeout)
			continue
		}
		q := &w.s.q
		q.Lock()
		batches, offsets, state, requests, closed := q.batches, q.offsets, q.state, q.requests, q.closed
		q.batches, q.offsets, q.state, q.requests = nil, nil, stateUpdate{}, nil
		q.Unlock()
		if len(batches) > 0 || len(offsets) > 0 || state.set {
			if w.s.opts.BeforeCycle != nil {
				w.s.opts.BeforeCycle()
			}
			w.cycle(batches, offsets, state)
		}
		for _, fn := range requests {
			fn()
		}
		if closed {
			// Submissions after closed are refused, so this drained
			// everything; Close syncs and closes.
			return
		}
		if len(batches) > 0 || len(offsets) > 0 || state.set || len(requests) > 0 {
			w.work++
		}
	}
}

// cycle writes one group of batches and tracking updates and confirms them.
func (w *writer) cycle(batches []*Batch, offsets []offsetUpdate, state stateUpdate) {
	w.offsets = append(w.offsets, offsets...)
	if err := w.resume(); err != nil {
		// The offsets stay pending for the next cycle; a state is
		// failed (its owner stores it again).
		for _, b := range batches {
			if b.Done != nil {
				b.Done(Result{Err: err})
			}
		}
		for _, done := range state.dones {
			done(err)
		}
		return
	}
	w.chunkTs = max(w.s.opts.Now().UnixMilli(), w.lastTs)
	results := make([]Result, len(batches))
	cfg := w.s.cfg.Load()
	for i, b := range batches {
		results[i] = w.addBatch(b, cfg)
	}
	if w.cycleEntries < w.chunkEntries/4 {
		// The queue ran dry with little in it.
		w.chunkEntries = max(w.chunkEntries/2, minChunkEntries)
	}
	w.cycleEntries = 0
	if w.werr == nil {
		w.finishChunk()
		if state.set {
			w.state, w.hasState = state.blob, true
		}
		if len(w.offsets) > 0 || w.hasState {
			// No user chunk carried them in its trailer (a state
			// always goes in a delta chunk of its own).
			w.writeDelta(cfg)
		}
		sync := len(offsets) > 0 || state.set
		for _, b := range batches {
			sync = sync || !b.NoSync
		}
		w.commit(cfg, sync)
	}
	for i, b := range batches {
		r := results[i]
		if w.werr != nil {
			r = Result{Err: w.werr}
		}
		if w.s.repl != nil && r.Err == nil {
			// Confirmed once the commit offset covers the cycle.
			w.waiting = append(w.waiting, waitingBatch{b: b, r: r, need: w.next})
			continue
		}
		if b.Done != nil {
			b.Done(r)
		}
	}
	for _, done := range state.dones {
		switch {
		case w.werr != nil:
			done(w.werr)
		case w.s.repl != nil:
			w.waiting = append(w.waiting, waitingBatch{state: done, need: w.next})
		default:
			done(nil)
		}
	}
	if w.s.repl != nil {
		w.releaseWaiting()
	}
	if w.rolledInCycle {
		w.rolledInCycle = false
		if err := w.enforceRetention(); err != nil {
			w.s.opts.Logger.Error("osiris: retention", "dir", w.s.dir, "err", err)
		}
	}
}

// addBatch adds a batch's messages to chunks. The batch is validated
// first, so that it is written all or nothing.
func (w *writer) addBatch(b *Batch, cfg *Config) Result {
	if w.werr != nil {
		return Result{Err: w.werr}
	}
	for _, m := range b.Messages {
		_, rest, err := segment.ParseEntry(m.Entry)
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("%d bytes after the entry: %w", len(rest), segment.ErrInvalidEntry)
		}
		if err != nil {
			return Result{Err: fmt.Errorf("osiris: append: %w", err)}
		}
	}
	var r Result
	t := w.s.track
	for _, m := range b.Messages {
		if b.Producer != "" {
			t.mu.Lock()
			last, known := t.sequences[b.Producer]
			dup := known && m.PublishingID <= last.seq
			if dup {
				t.dups[b.Producer]++
			}
			t.mu.Unlock()
			if dup {
				r.Duplicates++
				w.s.duplicates.Add(1)
				Metrics.Duplicates.Add(1)
				continue
			}
		}
		e, _, _ := segment.ParseEntry(m.Entry)
		if err := w.addEntry(m.Entry, e.Records, m.Filter, cfg); err != nil {
			w.werr = err
			return Result{Err: err}
		}
		r.Written++
		r.LastOffset = w.b.NextOffset() - 1
		if b.Producer != "" {
			t.mu.Lock()
			t.sequences[b.Producer] = sequence{chunkID: w.chunkID, seq: m.PublishingID}
			t.mu.Unlock()
			w.noteSeq(b.Producer, m.PublishingID)
		}
	}
	return r
}

// noteSeq records a producer's sequence for the trailer of the chunk
// being built.
func (w *writer) noteSeq(ref string, seq uint64) {
	for i := range w.seqs {
		if w.seqs[i].ref == ref {
			w.seqs[i].seq = seq
			return
		}
	}
	w.seqs = append(w.seqs, seqRec{ref, seq})
}

// addEntry adds one entry to the chunk being built, finishing the chunk and
// rolling the segment when limits are reached.
func (w *writer) addEntry(entry []byte, records uint32, filter []byte, cfg *Config) error {
	if w.open {
		if w.b.Len() >= w.chunkEntries {
			w.chunkEntries = min(w.chunkEntries*2, maxChunkEntries)
			w.finishChunk()
		} else if w.b.DataLen()+len(entry) > w.s.opts.MaxChunkBytes ||
			w.segBytes()+int64(len(entry)) > cfg.MaxSegmentSize {
			w.finishChunk()
		}
	}
	if !w.open {
		if w.needsRoll() || w.segHasUser && (w.segBytes()+segment.HeaderSize+int64(cfg.FilterSize)+int64(len(entry)) > cfg.MaxSegmentSize ||
			w.active.Count()+len(w.hdrs) >= cfg.MaxSegmentChunks) {
			if err := w.roll(cfg); err != nil {
				return err
			}
		}
		w.b.Begin(w.buf, segment.ChunkUser, w.next, cfg.FilterSize)
		w.chunkID = w.next
		w.open = true
	}
	if err := w.b.AddEntry(entry, records, filter); err != nil {
		return err
	}
	w.cycleEntries++
	return nil
}

// needsRoll reports whether the active segment is of an older format
// version (written before the chunk filters changed), which takes no
// appends: the first chunk written after an upgrade goes to a new segment,
// so that each segment's chunks have one filter format.
func (w *writer) needsRoll() bool { return w.active.Version() != segment.SegmentVersion }

// segBytes is the size the active segment has once buf is written,
// including the chunk being built.
func (w *writer) segBytes() int64 {
	n := w.active.Size() + int64(len(w.buf))
	if w.open {
		n += segment.HeaderSize + int64(w.b.DataLen())
	}
	return n
}

// finishChunk completes the chunk being built, if any, with a trailer of
// its producers' sequences and the pending stored offsets.
func (w *writer) finishChunk() {
	if !w.open {
		return
	}
	w.open = false
	w.trailer = w.trailer[:0]
	for _, s := range w.seqs {
		w.trailer = appendRecord(w.trailer, trackSequence, s.ref, s.seq)
	}
	for _, o := range w.offsets {
		w.trailer = appendRecord(w.trailer, trackOffset, o.ref, o.offset)
	}
	w.seqs = w.seqs[:0]
	w.offsets = w.offsets[:0]
	var h segment.Header
	w.buf, h = w.b.Finish(w.chunkTs, w.s.cfg.Load().Epoch, w.trailer)
	w.addedChunk(h)
	w.segHasUser = true
	if len(w.buf) >= flushBytes {
		w.flush()
	}
}

// addedChunk books a chunk just appended to buf.
func (w *writer) addedChunk(h segment.Header) {
	w.hdrs = append(w.hdrs, h)
	w.next = h.NextOffset()
	w.lastTs = h.Timestamp
	w.lastChunk = int64(h.ChunkID)
	w.lastEpoch = h.Epoch
	if h.Type == segment.ChunkUser {
		w.lastUser = int64(h.ChunkID)
	}
}

// writeTracking appends a tracking chunk of type typ with body as its one
// entry.
func (w *writer) writeTracking(typ segment.ChunkType, body []byte) {
	w.b.Begin(w.buf, typ, w.next, 0)
	entry := segment.AppendSimpleEntry(nil, body)
	_ = w.b.AddEntry(entry, 1, nil)
	var h segment.Header
	w.buf, h = w.b.Finish(w.chunkTs, w.s.cfg.Load().Epoch, nil)
	w.addedChunk(h)
}

// writeDelta writes the pending stored offsets and state as a
// tracking-delta chunk.
func (w *writer) writeDelta(cfg *Config) {
	var body []byte
	for _, o := range w.offsets {
		body = appendRecord(body, trackOffset, o.ref, o.offset)
	}
	w.offsets = w.offsets[:0]
	if w.needsRoll() || w.active.Count()+len(w.hdrs) >= cfg.MaxSegmentChunks {
		// The roll's snapshot carries the state before this one.
		if err := w.roll(cfg); err != nil {
			w.werr = err
			return
		}
	}
	if w.hasState {
		body = appendStateRecord(body, w.state)
		t := w.s.track
		t.mu.Lock()
		t.state = w.state
		t.mu.Unlock()
		w.state, w.hasState = nil, false
	}
	w.writeTracking(segment.ChunkTrackingDelta, body)
}

// flush writes buf to the active segment.
func (w *writer) flush() {
	if w.werr != nil || len(w.hdrs) == 0 {
		return
	}
	if err := w.active.Append(w.buf, w.hdrs); err != nil {
		w.werr = err
		return
	}
	Metrics.BytesWritten.Add(uint64(len(w.buf)))
	Metrics.ChunksWritten.Add(uint64(len(w.hdrs)))
	for i := range w.hdrs {
		Metrics.chunk(w.hdrs[i].DataLen)
	}
	w.s.lastWritten.Store(w.lastChunk)
	w.dirty = true
	w.buf = w.buf[:0]
	w.hdrs = w.hdrs[:0]
	if w.s.repl != nil {
		w.publishWritten()
	}
}

// roll seals the active segment and starts a new one with a tracking
// snapshot.
func (w *writer) roll(cfg *Config) error {
	if err := w.rollSegment(); err != nil {
		return err
	}
	first := w.segs[0].base
	t := w.s.track
	t.mu.Lock()
	body := t.appendSnapshotLocked(nil, first)
	t.mu.Unlock()
	if len(body) > 0 {
		// As Osiris: a snapshot only when there is tracking, so that a
		// stream without it has no offsets but its messages'.
		w.writeTracking(segment.ChunkTrackingSnapshot, body)
	}
	return nil
}

// rollSegment syncs the active segment, books it to be sealed at the
// next commit and starts a new empty one at the next offset.
func (w *writer) rollSegment() error {
	w.flush()
	if w.werr != nil {
		return w.werr
	}
	start := time.Now()
	if err := w.active.Sync(); err != nil {
		w.werr = err
		return err
	}
	Metrics.synced(time.Since(start))
	sl := sealing{ref: w.activeRef, ext: w.active.Tail()}
	if _, h, ok := w.active.Last(); ok {
		sl.lastTs, sl.hasTs = h.Timestamp, true
	}
	w.toSeal = append(w.toSeal, sl)
	if w.s.repl != nil {
		w.activeRef.setRolled(sl.ext)
	}
	seg, err := segment.Create(w.s.dir, w.next)
	if err != nil {
		w.werr = err
		return err
	}
	if err := syncDir(w.s.dir); err != nil {
		w.werr = err
		return err
	}
	ref := newActiveRef(w.s.dir, w.next, seg)
	w.segs = append(w.segs[:len(w.segs):len(w.segs)], ref)
	w.active, w.activeRef = seg, ref
	w.segHasUser = false
	w.rolledInCycle = true
	return nil
}

// commit writes what is buffered, syncs as the policy asks and publishes
// the new tail to readers.
// Under FsyncAlways it syncs unless sync is false (every batch of the
// cycle is NoSync).
func (w *writer) commit(cfg *Config, sync bool) {
	w.flush()
	if w.werr != nil {
		return
	}
	if cfg.Fsync == FsyncAlways && w.dirty && sync {
		w.sync()
		if w.werr != nil {
			return
		}
	}
	if w.s.repl != nil {
		// Readers and appenders wait for the commit offset.
		w.wrote()
		return
	}
	for _, s := range w.toSeal {
		s.ref.seal(s.ext, s.lastTs, s.hasTs)
		s.ref.release() // the writer's hold
	}
	w.toSeal = w.toSeal[:0]
	w.publish()
}

// sync syncs the active segment's files, opening them for it when the
// writer is suspended (Close after an idle period under FsyncNone).
func (w *writer) sync() {
	var err error
	start := time.Now()
	defer func() {
		if err == nil {
			Metrics.synced(time.Since(start))
		}
	}()
	if w.active != nil {
		err = w.active.Sync()
	} else {
		err = syncFiles(filepath.Join(w.s.dir, segment.SegmentFileName(w.activeRef.base)),
			filepath.Join(w.s.dir, segment.IndexFileName(w.activeRef.base)))
	}
	if err != nil {
		w.werr = err
		return
	}
	w.dirty = false
	w.lastSync = w.s.opts.Now()
}

// publish makes the written state visible to readers; on a replicated
// stream, what is committed of it.
func (w *writer) publish() {
	if w.s.repl != nil {
		w.publishCommitted()
		return
	}
	t := &tail{
		segs:      w.segs,
		active:    w.activeTail(),
		next:      w.next,
		lastChunk: w.lastChunk,
		lastUser:  w.lastUser,
		wake:      make(chan struct{}),
	}
	if old := w.s.tail.Swap(t); old != nil {
		close(old.wake)
	}
}

// close releases the stream's segments.
func (w *writer) close() error {
	var errs []error
	for _, r := range w.segs {
		r.mu.Lock()
		if r.mu.seg != nil {
			errs = append(errs, r.mu.seg.Close())
			r.mu.seg = nil
		}
		r.mu.removed = true
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}
