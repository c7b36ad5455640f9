package osiris

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/warren-mq/warren/segment"
)

// Replication: a stream opened with Options.Replication is a member of a
// replicated stream, the leader or a replica. See the package
// documentation for the design; ServeReplica and Follow (replnet.go)
// speak the protocol over a connection.
//
// What the writer of a replicated stream does differently:
//
//   - It keeps the written log and the committed log apart. Readers see
//     the committed log (the published tail); ServeReplica ships the
//     written one (s.wtail). A segment the writer rolls away from is
//     "rolled" at once and sealed only when the commit offset passes it,
//     so that the reader code, which reads the last published segment to
//     the published extent, needs no change.
//   - After each write it records a commit point (the end of what it has
//     written) and publishes the newest point at or below the commit
//     offset; batches wait in w.waiting until the commit covers them.
//
// A single-node stream (Options.Replication nil) takes none of these
// paths: it commits what it writes, as before.

// Role is a member's part in a replicated stream.
type Role uint8

// Roles.
const (
	// RoleLeader writes: appenders submit to it; it ships its chunks to
	// the replicas (ServeReplica) and commits what a majority holds.
	RoleLeader Role = 1
	// RoleReplica appends the leader's chunks verbatim (Follow,
	// AppendChunks); Submit, StoreOffset and StoreState fail with
	// ErrNotLeader.
	RoleReplica Role = 2
)

// Replication configures a stream as a member of a replicated stream. A
// member changes role by closing the stream and opening it again.
type Replication struct {
	// Role is this member's part.
	Role Role
	// Member names this member; a replica sends it to the leader, which
	// counts acknowledgements by it, so members' names differ. At most
	// 255 bytes.
	Member string
	// Members is the number of members, this one included. The leader
	// commits a chunk once Members/2+1 of them hold it; 1 commits what is
	// written.
	Members int
	// Epoch is the leader's epoch, stamped on the chunks it writes and
	// persisted in the stream's Config. A new leader takes an epoch above
	// every earlier leader's; Open refuses one below the log's last
	// chunk's (ErrStaleEpoch). 0 keeps the Config's epoch.
	Epoch uint64
	// SyncBeforeAck makes a replica fsync what it appended before it
	// acknowledges it (the stream's FsyncAlways policy does too);
	// otherwise it acknowledges once the write reached the OS.
	SyncBeforeAck bool
}

// Replication errors.
var (
	// ErrNotLeader is returned by Submit, SubmitCounted, StoreOffset and
	// StoreState on a replica, and by ServeReplica on a stream that is not
	// a leader.
	ErrNotLeader = errors.New("osiris: not the leader")
	// ErrNotReplica is returned by replica operations on a stream that is
	// not a replica.
	ErrNotReplica = errors.New("osiris: not a replica")
	// ErrStaleEpoch marks an epoch below one the log already holds.
	ErrStaleEpoch = errors.New("osiris: stale epoch")
	// ErrNotContiguous marks a chunk that does not start at the replica's
	// next offset.
	ErrNotContiguous = errors.New("osiris: chunk not contiguous")
	// ErrTruncateCommitted is returned for a truncation that would remove
	// committed chunks.
	ErrTruncateCommitted = errors.New("osiris: truncation below the commit offset")
)

// replState is a replicated stream's membership and commit state.
type replState struct {
	// Static after open.
	role    Role
	member  string
	quorum  int // members that must hold a chunk for it to commit
	syncAck bool

	leaderCommit atomic.Int64 // replica: the commit offset the leader sent, -1 when none

	mu struct {
		sync.Mutex
		held   int64            // last chunk this member has written (and synced as the policy asks)
		acks   map[string]int64 // leader: last chunk each replica acknowledged
		commit int64            // leader: last chunk a majority holds, -1 when none
		// epochFirst is the leader's first chunk of its own epoch: the
		// commit offset moves only to chunks from there on (see startEpoch).
		epochFirst int64
		wake       chan struct{} // leader: closed when commit advances
		posted     bool          // leader: an advance request is queued for the writer
		scratch    []int64
	}
}

func newReplState(rp *Replication) (*replState, error) {
	switch {
	case rp.Role != RoleLeader && rp.Role != RoleReplica:
		return nil, fmt.Errorf("osiris: replication role %d: %w", rp.Role, ErrInvalidConfig)
	case rp.Members < 1:
		return nil, fmt.Errorf("osiris: replication members %d: %w", rp.Members, ErrInvalidConfig)
	case len(rp.Member) > MaxReferenceLen:
		return nil, fmt.Errorf("osiris: replication member name: %w", ErrReferenceTooLong)
	}
	r := &replState{role: rp.Role, member: rp.Member, quorum: rp.Members/2 + 1, syncAck: rp.SyncBeforeAck}
	r.leaderCommit.Store(-1)
	r.mu.held, r.mu.commit = -1, -1
	r.mu.epochFirst = math.MaxInt64 // until the leader's epoch has begun (startEpoch)
	r.mu.acks = map[string]int64{}
	r.mu.wake = make(chan struct{})
	return r, nil
}

// isReplica reports whether the stream is opened as a replica.
func (s *Stream) isReplica() bool { return s.repl != nil && s.repl.role == RoleReplica }

// target is the chunk id up to which the writer may publish: the
// leader's majority, or on a replica the leader's commit offset as far as
// the replica holds it.
func (r *replState) target() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.role == RoleReplica {
		return min(r.mu.held, r.leaderCommit.Load())
	}
	return r.mu.commit
}

// commitState returns the leader's commit offset and a channel closed
// when it advances.
func (r *replState) commitState() (int64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.commit, r.mu.wake
}

// setHeld records what this member has written.
func (r *replState) setHeld(chunk int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.held = chunk
	if r.role == RoleLeader {
		r.recomputeLocked()
	}
}

// recomputeLocked recomputes the leader's commit offset, the quorum-th
// highest chunk held among the members, and reports whether it advanced.
// REQUIRES: r.mu held.
func (r *replState) recomputeLocked() bool {
	vals := append(r.mu.scratch[:0], r.mu.held)
	for _, a := range r.mu.acks {
		vals = append(vals, min(a, r.mu.held))
	}
	r.mu.scratch = vals
	if len(vals) < r.quorum {
		return false
	}
	slices.SortFunc(vals, func(a, b int64) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	c := vals[r.quorum-1]
	if c <= r.mu.commit || c < r.mu.epochFirst {
		return false
	}
	r.mu.commit = c
	close(r.mu.wake)
	r.mu.wake = make(chan struct{})
	return true
}

// Acknowledge records on a leader that replica member holds the log up
// to chunk chunkID (the Ack frame); the commit offset advances when a
// majority holds a chunk. It does not block on the writer.
func (s *Stream) Acknowledge(member string, chunkID int64) {
	r := s.repl
	if r == nil || r.role != RoleLeader {
		return
	}
	r.mu.Lock()
	if prev, ok := r.mu.acks[member]; !ok || chunkID > prev {
		r.mu.acks[member] = chunkID
	}
	post := r.recomputeLocked() && !r.mu.posted
	if post {
		r.mu.posted = true
	}
	r.mu.Unlock()
	if post {
		s.post(func() {
			r.mu.Lock()
			r.mu.posted = false
			r.mu.Unlock()
			s.w.advance()
		})
	}
}

// SetCommit gives a replica the leader's commit offset (the id of the
// last committed chunk): readers may read up to it as far as the replica
// holds it.
func (s *Stream) SetCommit(chunkID int64) error {
	if !s.isReplica() {
		return ErrNotReplica
	}
	if !s.repl.raiseLeaderCommit(chunkID) {
		return nil
	}
	return s.do(func() { s.w.advance() })
}

// raiseLeaderCommit stores the leader's commit offset if it is higher and
// reports whether it was.
func (r *replState) raiseLeaderCommit(c int64) bool {
	for {
		old := r.leaderCommit.Load()
		if c <= old {
			return false
		}
		if r.leaderCommit.CompareAndSwap(old, c) {
			return true
		}
	}
}

// post queues fn for the writer without waiting for it, starting the
// writer goroutine if it is idle.
func (s *Stream) post(fn func()) {
	s.q.Lock()
	if s.q.closed {
		s.q.Unlock()
		return
	}
	s.q.requests = append(s.q.requests, fn)
	start := s.claimWriterLocked()
	s.q.Unlock()
	s.notify(start)
}

// commitPoint is an end of the written log: what readers are shown when
// the commit offset reaches chunk.
type commitPoint struct {
	chunk    int64        // last chunk, -1 for an empty log
	ref      *segRef      // its segment; nil for an empty log
	ext      segment.Tail // that segment's extent up to the chunk's end
	next     uint64       // offset after the chunk
	lastUser int64        // last user chunk at or before it, -1 when none
}

// waitingBatch is a written batch, or a written state (StoreState),
// waiting for the commit offset.
type waitingBatch struct {
	b     *Batch
	r     Result
	state func(error) // a state's done, instead of b
	need  uint64      // committed when the committed log's next offset reaches it
}

// written is the written log as ServeReplica reads it: published by the
// writer after each write. Immutable once published.
type written struct {
	segs   []*segRef     // oldest first; the last is active
	active segment.Tail  // written extent of the active segment
	next   uint64        // offset after the last written chunk
	wake   chan struct{} // closed when a newer one is published
}

// publishWritten publishes the written log to ServeReplica.
func (w *writer) publishWritten() {
	v := &written{segs: w.segs, active: w.activeTail(), next: w.next, wake: make(chan struct{})}
	if old := w.s.wtail.Swap(v); old != nil {
		close(old.wake)
	}
}

// openReplicated sets up the replication state of a stream just opened:
// nothing is committed until the commit offset reaches the end of the
// log it was opened with (one commit point), and every segment before the
// active one waits to be sealed.
func (w *writer) openReplicated() error {
	for _, r := range w.segs[:len(w.segs)-1] {
		seg, err := r.acquire()
		if err != nil {
			return err
		}
		ext := seg.Tail()
		_, h, ok := seg.Last()
		r.release()
		r.setRolled(ext)
		w.toSeal = append(w.toSeal, sealing{ref: r, ext: ext, lastTs: h.Timestamp, hasTs: ok, unheld: true})
	}
	w.pub = commitPoint{chunk: -1}
	w.publishWritten()
	w.wrote()
	return nil
}

// startEpoch begins the epoch of a leader just opened. As in Raft, a
// leader commits by counting replicas only chunks of its own epoch; the
// chunks before them commit with them. Otherwise a chunk of an older
// epoch that a majority came to hold only now could be committed and
// then lost: a member holding a newer epoch's different chunk at that
// offset would win a later election. So a leader of a log that ends in
// an older epoch first writes a chunk of its own, an empty tracking
// delta (one offset), which commits the tail before it once a majority
// holds it.
func (w *writer) startEpoch() error {
	cfg := w.s.cfg.Load()
	if w.lastChunk >= 0 && w.lastEpoch < cfg.Epoch {
		w.chunkTs = max(w.s.opts.Now().UnixMilli(), w.lastTs)
		w.writeDelta(cfg)
		w.commit(cfg, true)
		if w.werr != nil {
			return w.werr
		}
	}
	first := int64(w.next) // no chunk of this epoch yet: the next is the first
	if w.lastChunk >= 0 && w.lastEpoch == cfg.Epoch {
		h, err := w.epochHistory()
		if err != nil {
			return err
		}
		first = int64(h.Starts[len(h.Starts)-1].First)
	}
	r := w.s.repl
	r.mu.Lock()
	r.mu.epochFirst = first
	r.recomputeLocked()
	r.mu.Unlock()
	w.advance()
	return nil
}

// wrote records the end of what was just written as a commit point and
// publishes what is committed.
func (w *writer) wrote() {
	if w.lastChunk >= 0 && w.lastChunk > w.pub.chunk &&
		(len(w.points) == 0 || w.points[len(w.points)-1].chunk < w.lastChunk) {
		w.points = append(w.points, commitPoint{
			chunk: w.lastChunk, ref: w.activeRef, ext: w.activeTail(), next: w.next, lastUser: w.lastUser,
		})
	}
	w.s.repl.setHeld(w.lastChunk)
	w.advance()
}

// advance publishes the newest commit point the commit offset covers,
// sealing the segments it has passed, and confirms the batches it
// covers.
func (w *writer) advance() {
	target := w.s.repl.target()
	n := 0
	for n < len(w.points) && w.points[n].chunk <= target {
		n++
	}
	if n == 0 {
		return
	}
	p := w.points[n-1]
	w.points = append(w.points[:0], w.points[n:]...)
	i := 0
	for ; i < len(w.toSeal) && w.toSeal[i].ref.base < p.ref.base; i++ {
		sl := w.toSeal[i]
		sl.ref.seal(sl.ext, sl.lastTs, sl.hasTs)
		if !sl.unheld {
			sl.ref.release() // the writer's hold
		}
	}
	w.toSeal = append(w.toSeal[:0], w.toSeal[i:]...)
	w.pub = p
	w.publishCommitted()
	w.releaseWaiting()
}

// committedSegs is the number of segments, oldest first, that hold
// committed chunks (the last of them up to the commit point).
func (w *writer) committedSegs() int {
	if w.pub.ref == nil {
		return 0
	}
	for i := len(w.segs) - 1; i >= 0; i-- {
		if w.segs[i] == w.pub.ref {
			return i + 1
		}
	}
	return 0
}

// publishCommitted shows readers the committed log: the segments up to
// the commit point's, the last of them to the point's extent.
func (w *writer) publishCommitted() {
	t := &tail{lastChunk: -1, lastUser: -1, wake: make(chan struct{})}
	if k := w.committedSegs(); k > 0 {
		p := w.pub
		t.segs, t.active, t.next, t.lastChunk, t.lastUser = w.segs[:k:k], p.ext, p.next, p.chunk, p.lastUser
	} else {
		// Nothing committed: an empty view of the first segment, which
		// is not sealed.
		t.segs, t.active, t.next = w.segs[:1:1], segment.Tail{Size: segment.FileHeaderSize}, w.segs[0].base
	}
	if old := w.s.tail.Swap(t); old != nil {
		close(old.wake)
	}
}

// releaseWaiting confirms the batches the commit offset covers.
func (w *writer) releaseWaiting() {
	if w.pub.chunk < 0 {
		return
	}
	i := 0
	for ; i < len(w.waiting) && w.waiting[i].need <= w.pub.next; i++ {
		if done := w.waiting[i].state; done != nil {
			done(nil)
		} else if b := w.waiting[i].b; b.Done != nil {
			b.Done(w.waiting[i].r)
		}
	}
	clear(w.waiting[:i])
	w.waiting = append(w.waiting[:0], w.waiting[i:]...)
}

// failWaiting fails the batches still waiting for the commit offset.
func (w *writer) failWaiting(err error) {
	for _, wb := range w.waiting {
		err := fmt.Errorf("osiris: %s: not committed: %w", w.s.dir, err)
		if wb.state != nil {
			wb.state(err)
		} else if wb.b.Done != nil {
			wb.b.Done(Result{Err: err})
		}
	}
	w.waiting = nil
}

// AppendChunks appends chunks received from the leader to a replica,
// verbatim: chunks is one or more whole chunks as stored (header, Bloom
// bytes, data, trailer). Each must pass segment.Verify (header, check,
// data CRC, entries), start at the replica's next offset
// (ErrNotContiguous) and carry an epoch no lower than the last chunk's
// (ErrStaleEpoch). Their tracking (trailers, delta and snapshot chunks)
// is applied as the leader applied it. The chunks before a bad one are
// written. It returns the id of the last chunk written (and synced when
// Replication.SyncBeforeAck or the FsyncAlways policy ask), which is what
// the replica acknowledges.
//
// The replica rolls to a new segment at its own size limits, but only in
// front of a tracking snapshot chunk (which the leader writes first in
// each of its segments while there is tracking) or while there is no
// tracking, so that each of its segments, as each of the leader's,
// starts with a snapshot or began with no tracking: retention never
// loses tracking and reopening replays only the last segment. A replica
// writes nothing of its own, so its chunks and offsets are the leader's.
func (s *Stream) AppendChunks(chunks []byte) (int64, error) {
	if !s.isReplica() {
		return -1, ErrNotReplica
	}
	var last int64
	var err error
	if e := s.onWriter(func() { last, err = s.w.appendChunks(chunks) }); e != nil {
		return -1, e
	}
	return last, err
}

// onWriter runs fn on the writer goroutine, starting it if need be, and
// waits for it. Unlike do, it never runs fn on the caller's goroutine, so
// that a replica's writer, like a leader's, goes idle after
// Options.IdleTimeout without appends and lets go of its files.
func (s *Stream) onWriter(fn func()) error {
	s.q.Lock()
	if s.q.closed {
		s.q.Unlock()
		return ErrClosed
	}
	ch := make(chan struct{})
	s.q.requests = append(s.q.requests, func() { fn(); close(ch) })
	start := s.claimWriterLocked()
	s.q.Unlock()
	s.notify(start)
	<-ch
	return nil
}

// appendChunks is AppendChunks with the writer role.
func (w *writer) appendChunks(b []byte) (int64, error) {
	if err := w.resume(); err != nil {
		return w.lastChunk, err
	}
	cfg := w.s.cfg.Load()
	var err error
	for len(b) > 0 {
		var h segment.Header
		if h, err = segment.ParseHeader(b); err != nil {
			err = fmt.Errorf("osiris: %s: append chunks: %w", w.s.dir, err)
			break
		}
		if int64(len(b)) < h.Size() {
			err = fmt.Errorf("osiris: %s: append chunks: chunk %d of %d bytes, %d left: %w",
				w.s.dir, h.ChunkID, h.Size(), len(b), segment.ErrCorrupt)
			break
		}
		chunk := b[:h.Size()]
		if _, err = segment.Verify(chunk); err != nil {
			err = fmt.Errorf("osiris: %s: append chunks: %w", w.s.dir, err)
			break
		}
		if h.ChunkID != w.next {
			err = fmt.Errorf("osiris: %s: append chunks: chunk %d, next offset %d: %w", w.s.dir, h.ChunkID, w.next, ErrNotContiguous)
			break
		}
		if h.Epoch < w.lastEpoch {
			err = fmt.Errorf("osiris: %s: append chunks: chunk %d of epoch %d after epoch %d: %w",
				w.s.dir, h.ChunkID, h.Epoch, w.lastEpoch, ErrStaleEpoch)
			break
		}
		if w.replicaRollDue(&h, cfg) {
			if err = w.rollSegment(); err != nil {
				break
			}
		}
		at := h.DataOffset()
		data, trailer := chunk[at:at+int64(h.DataLen)], chunk[at+int64(h.DataLen):]
		t := w.s.track
		t.mu.Lock()
		err = t.replayChunkLocked(&h, data, trailer)
		t.mu.Unlock()
		if err != nil {
			err = fmt.Errorf("osiris: %s: append chunks: %w", w.s.dir, err)
			break
		}
		w.buf = append(w.buf, chunk...)
		w.addedChunk(h)
		if h.Type == segment.ChunkUser {
			w.segHasUser = true
		}
		if len(w.buf) >= flushBytes {
			w.flush()
		}
		b = b[h.Size():]
	}
	w.flush()
	if w.werr != nil {
		return w.lastChunk, w.werr
	}
	if w.dirty && (w.s.repl.syncAck || cfg.Fsync == FsyncAlways) {
		if w.sync(); w.werr != nil {
			return w.lastChunk, w.werr
		}
	}
	w.wrote()
	if w.rolledInCycle {
		w.rolledInCycle = false
		if err := w.enforceRetention(); err != nil {
			w.s.opts.Logger.Error("osiris: retention", "dir", w.s.dir, "err", err)
		}
	}
	return w.lastChunk, err
}

// replicaRollDue reports whether a replica rolls to a new segment before
// appending the chunk with header h (see AppendChunks).
func (w *writer) replicaRollDue(h *segment.Header, cfg *Config) bool {
	n := w.active.Count() + len(w.hdrs)
	if n == 0 {
		return false
	}
	size := w.segBytes() + h.Size()
	if w.needsRoll() || size > segment.MaxSegmentPos {
		// The segment takes no more: roll even where the leader's
		// chunks give no snapshot.
		return true
	}
	if size <= cfg.MaxSegmentSize && n < cfg.MaxSegmentChunks {
		return false
	}
	if h.Type == segment.ChunkTrackingSnapshot {
		return true
	}
	t := w.s.track
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.emptyLocked()
}
