package osiris

import (
	"fmt"
	"sort"

	"github.com/warren-mq/warren/segment"
)

// Epochs. Every chunk carries the epoch of the leader that wrote it, and
// a leader's epoch is above every earlier leader's, so a log's epochs
// never decrease. As in Osiris (and Raft's log matching), two logs that
// hold a chunk with the same id and epoch hold the same chunks up to it:
// one leader wrote them, and a replica appends only what follows on from
// its leader's log. A log's epoch history (the first chunk id of each
// epoch) comes from its index files, whose records carry the epoch; a
// replica joining a leader compares histories to find the last offset
// both logs share and truncates its log to there.

// EpochStart is where an epoch begins in a log.
type EpochStart struct {
	Epoch uint64 // the epoch
	First uint64 // id of its first chunk in the log
}

// EpochHistory describes a log for the replica handshake.
type EpochHistory struct {
	First  uint64       // base of the oldest segment (the next offset when empty)
	Next   uint64       // offset after the last chunk
	Starts []EpochStart // oldest first; empty for a log without chunks
}

// LastEpoch is the epoch of the log's last chunk, 0 when it has none.
func (h *EpochHistory) LastEpoch() uint64 {
	if len(h.Starts) == 0 {
		return 0
	}
	return h.Starts[len(h.Starts)-1].Epoch
}

// end returns the offset after the last chunk of epoch i of h.
func (h *EpochHistory) end(i int) uint64 {
	if i+1 < len(h.Starts) {
		return h.Starts[i+1].First
	}
	return h.Next
}

// CommonNext returns the offset up to which (exclusive) a replica's log
// with history replica holds the same chunks as a leader's log with
// history leader; ok is false when they share no chunk. It looks for the
// newest epoch of the replica that the leader's log also holds, with
// overlapping chunk ids: both logs agree up to where the shorter run of
// that epoch ends.
func CommonNext(leader, replica EpochHistory) (next uint64, ok bool) {
	for i := len(replica.Starts) - 1; i >= 0; i-- {
		e := replica.Starts[i].Epoch
		k := sort.Search(len(leader.Starts), func(k int) bool { return leader.Starts[k].Epoch >= e })
		if k == len(leader.Starts) || leader.Starts[k].Epoch != e {
			continue
		}
		lo := max(replica.Starts[i].First, leader.Starts[k].First)
		hi := min(replica.end(i), leader.end(k))
		if lo < hi {
			return hi, true
		}
	}
	return 0, false
}

// FollowPoint returns where a replica with history replica starts
// following a leader with history leader: it truncates its log to offset
// (TruncateTail), or, when reset, empties it and starts again at offset,
// the leader's first (ResetTo): when the logs share nothing, or the
// leader's retention has deleted what the replica would need next.
func FollowPoint(leader, replica EpochHistory) (offset uint64, reset bool) {
	next, ok := CommonNext(leader, replica)
	if !ok {
		if len(replica.Starts) == 0 && replica.Next == leader.First {
			return replica.Next, false // an empty replica where the leader's log starts
		}
		return leader.First, true
	}
	if next < leader.First {
		return leader.First, true
	}
	return next, false
}

// EpochHistory returns the epoch history of everything written to the
// stream (committed or not). It reads O(log n) index records per segment
// and epoch change.
func (s *Stream) EpochHistory() (EpochHistory, error) {
	var h EpochHistory
	var err error
	if e := s.do(func() { h, err = s.w.epochHistory() }); e != nil {
		return h, e
	}
	return h, err
}

// epochHistory is EpochHistory with the writer role.
func (w *writer) epochHistory() (EpochHistory, error) {
	h := EpochHistory{First: w.segs[0].base, Next: w.next}
	for i, r := range w.segs {
		seg, err := r.acquire()
		if err != nil {
			return h, err
		}
		var n int
		if i == len(w.segs)-1 {
			n = w.activeTail().Count
		} else {
			ext, _ := r.writtenExtent()
			n = ext.Count
		}
		h.Starts, err = segmentEpochs(seg, n, h.Starts)
		r.release()
		if err != nil {
			return h, err
		}
	}
	return h, nil
}

// segmentEpochs appends to starts the epochs that begin among the first n
// chunks of seg, finding each change by binary search.
func segmentEpochs(seg *segment.Segment, n int, starts []EpochStart) ([]EpochStart, error) {
	if n == 0 {
		return starts, nil
	}
	rec, err := seg.Record(0)
	if err != nil {
		return starts, err
	}
	if len(starts) == 0 || starts[len(starts)-1].Epoch != rec.Epoch {
		starts = append(starts, EpochStart{Epoch: rec.Epoch, First: rec.ChunkID})
	}
	cur, lo := rec.Epoch, 1
	for lo < n {
		var serr error
		j := lo + sort.Search(n-lo, func(k int) bool {
			r, err := seg.Record(lo + k)
			if err != nil {
				serr = err
				return true
			}
			return r.Epoch > cur
		})
		if serr != nil {
			return starts, serr
		}
		if j >= n {
			break
		}
		if rec, err = seg.Record(j); err != nil {
			return starts, err
		}
		starts = append(starts, EpochStart{Epoch: rec.Epoch, First: rec.ChunkID})
		cur, lo = rec.Epoch, j+1
	}
	return starts, nil
}

// TruncateTail drops a replica's chunks at and after offset next, which
// must be a chunk boundary of its log, none of them committed
// (ErrTruncateCommitted). Tracking is replayed to what the kept chunks
// say. next at or past the log's end changes nothing; next at or before
// its first chunk empties the log (ResetTo(next)).
func (s *Stream) TruncateTail(next uint64) error {
	if !s.isReplica() {
		return ErrNotReplica
	}
	var err error
	if e := s.do(func() { err = s.w.truncateTail(next) }); e != nil {
		return e
	}
	return err
}

// ResetTo empties a replica's log and starts it again, empty, at offset
// base: the leader's log no longer holds what would follow on from the
// replica's. Readers positioned in the deleted segments read on to their
// end and then fail with ErrClosed or go on at base.
func (s *Stream) ResetTo(base uint64) error {
	if !s.isReplica() {
		return ErrNotReplica
	}
	var err error
	if e := s.do(func() { err = s.w.reset(base) }); e != nil {
		return e
	}
	return err
}

// truncateTail is TruncateTail with the writer role.
func (w *writer) truncateTail(next uint64) error {
	if w.werr != nil {
		return w.werr
	}
	if next >= w.next {
		return nil
	}
	if w.pub.chunk >= 0 && w.pub.next > next {
		return fmt.Errorf("osiris: %s: truncate to %d, committed to %d: %w", w.s.dir, next, w.pub.next, ErrTruncateCommitted)
	}
	k := -1
	for i := len(w.segs) - 1; i >= 0; i-- {
		if w.segs[i].base < next {
			k = i
			break
		}
	}
	if k < 0 {
		return w.reset(next)
	}
	if err := w.resume(); err != nil {
		return err
	}
	ref := w.segs[k]
	if _, sealed := ref.extent(); sealed {
		return fmt.Errorf("osiris: %s: truncate to %d in sealed segment %d: %w", w.s.dir, next, ref.base, ErrTruncateCommitted)
	}
	if ref != w.activeRef {
		// The segment holding the last kept chunk becomes the active one
		// again; those after it go.
		seg, err := ref.acquire() // the writer's hold from here on
		if err != nil {
			return err
		}
		w.activeRef.release()
		kept := w.toSeal[:0]
		for _, sl := range w.toSeal {
			if sl.ref.base < ref.base {
				kept = append(kept, sl)
			} else if !sl.unheld {
				sl.ref.release()
			}
		}
		w.toSeal = kept
		for _, r := range w.segs[k+1:] {
			if err := r.remove(); err != nil {
				w.werr = fmt.Errorf("osiris: %s: truncate: %w", w.s.dir, err)
				return w.werr
			}
		}
		ref.unroll()
		w.segs = w.segs[: k+1 : k+1]
		w.active, w.activeRef = seg, ref
		if err := syncDir(w.s.dir); err != nil {
			w.werr = err
			return err
		}
	}
	n := w.active.Count()
	j, err := w.active.SearchOffset(n, next-1)
	if err != nil {
		return err
	}
	keep := j + 1
	if keep < n {
		rec, err := w.active.Record(keep)
		if err != nil {
			return err
		}
		if rec.ChunkID != next {
			return fmt.Errorf("osiris: %s: truncate to %d: not a chunk boundary (chunk %d): %w", w.s.dir, next, rec.ChunkID, ErrNotContiguous)
		}
	}
	if err := w.active.TruncateTo(keep); err != nil {
		w.werr = err
		return err
	}
	return w.reload()
}

// reload recomputes the writer's position and the tracking from the log
// after a truncation, and publishes.
func (w *writer) reload() error {
	w.lastChunk, w.lastUser, w.lastEpoch, w.segHasUser = -1, -1, 0, false
	if err := w.recoverPosition(); err != nil {
		w.werr = err
		return err
	}
	t := w.s.track
	t.mu.Lock()
	t.clearLocked()
	t.mu.Unlock()
	if err := w.recoverTracking(); err != nil {
		w.werr = err
		return err
	}
	w.s.lastWritten.Store(w.lastChunk)
	w.points = w.points[:0]
	w.publishWritten()
	w.wrote()
	w.publish()
	return nil
}

// reset is ResetTo with the writer role.
func (w *writer) reset(base uint64) error {
	if w.werr != nil {
		return w.werr
	}
	if w.active != nil {
		w.activeRef.release() // the writer's hold
		w.active = nil
	}
	w.buf, w.hdrs = w.buf[:0], w.hdrs[:0]
	for _, sl := range w.toSeal {
		if !sl.unheld {
			sl.ref.release()
		}
	}
	w.toSeal = w.toSeal[:0]
	// Oldest first: a crash in between leaves a log that starts later,
	// whose segments each start with a snapshot as before.
	for _, r := range w.segs {
		if err := r.remove(); err != nil {
			w.werr = fmt.Errorf("osiris: %s: reset: %w", w.s.dir, err)
			return w.werr
		}
	}
	seg, err := segment.Create(w.s.dir, base)
	if err == nil {
		err = syncDir(w.s.dir)
	}
	if err != nil {
		w.werr = fmt.Errorf("osiris: %s: reset: %w", w.s.dir, err)
		return w.werr
	}
	w.activeRef = newActiveRef(w.s.dir, base, seg)
	w.active = seg
	w.segs = []*segRef{w.activeRef}
	w.next = base
	w.pub = commitPoint{chunk: -1}
	return w.reload()
}
