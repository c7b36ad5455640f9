package osiris

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/warren-mq/warren/segment"
)

// segRef is one segment of a stream as the stream and its readers share it.
// Its files are open only while somebody holds it: a reader positioned in
// it, or the writer while it appends to it (the active segment). Whoever
// first needs the files opens them; the last holder to let go closes them,
// sealed or active alike, so an idle stream keeps no file open. A removed
// segment's files stay readable by the holders left.
type segRef struct {
	// Static after construction.
	dir  string
	base uint64

	mu struct {
		sync.Mutex
		seg      *segment.Segment // nil while nobody holds the segment
		refs     int              // holders (readers, the writer) plus one for the stream while listed
		removed  bool             // files deleted, or the stream closed
		sealed   bool             // no more appends; final is set
		final    segment.Tail     // extent of a sealed segment
		lastTs   int64            // timestamp of the newest chunk, when lastTsOK
		lastTsOK bool             // lastTs is known (sealed segments only)
		// rolled is set on a replicated stream when the writer has moved
		// on from the segment, which may not be committed (and so not
		// sealed) yet; rolledExt is then its complete extent, which
		// ServeReplica ships to.
		rolled    bool
		rolledExt segment.Tail
	}
}

// newSegRef returns a listed segment nobody holds yet.
func newSegRef(dir string, base uint64, sealed bool) *segRef {
	r := &segRef{dir: dir, base: base}
	r.mu.refs = 1
	r.mu.sealed = sealed
	return r
}

// newActiveRef returns the listed segment the writer has just opened (or
// created) and holds.
func newActiveRef(dir string, base uint64, seg *segment.Segment) *segRef {
	r := newSegRef(dir, base, false)
	r.mu.seg = seg
	r.mu.refs++
	return r
}

// acquire returns the open segment, opening (and if need be repairing) it
// first, and takes a reference that release gives back.
func (r *segRef) acquire() (*segment.Segment, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.removed {
		return nil, fmt.Errorf("osiris: segment %d: %w", r.base, errSegmentRemoved)
	}
	if r.mu.seg == nil {
		seg, rec, err := segment.Open(r.dir, r.base)
		if err != nil {
			return nil, err
		}
		// A sealed segment only needs repair after outside damage, and
		// the active one is opened only while the writer is idle (it holds
		// the segment while it writes), so that there is nothing to repair.
		_ = rec
		r.mu.seg = seg
		if r.mu.sealed {
			r.mu.final = seg.Tail()
		}
	}
	r.mu.refs++
	return r.mu.seg, nil
}

// release gives back a reference taken by acquire.
func (r *segRef) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.refs--
	r.closeIdleLocked()
}

// closeIdleLocked closes the files of a segment nobody holds: only the
// stream's listing reference is left, or (removed) none.
// REQUIRES: r.mu held.
func (r *segRef) closeIdleLocked() {
	idle := r.mu.refs == 0 || (r.mu.refs == 1 && !r.mu.removed)
	if idle && r.mu.seg != nil {
		r.mu.seg.Close()
		r.mu.seg = nil
	}
}

// extent returns the complete size of a sealed segment; ok is false for
// the active one.
func (r *segRef) extent() (segment.Tail, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.final, r.mu.sealed
}

// seal marks the segment complete at t; lastTs is its newest chunk's
// timestamp when ok.
func (r *segRef) seal(t segment.Tail, lastTs int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.sealed = true
	r.mu.final = t
	r.mu.lastTs, r.mu.lastTsOK = lastTs, ok
	r.closeIdleLocked()
}

// remove deletes the segment's files and drops the stream's reference.
// Readers still holding it keep reading the unlinked file.
func (r *segRef) remove() error {
	r.mu.Lock()
	r.mu.removed = true
	r.mu.Unlock()
	err1 := os.Remove(filepath.Join(r.dir, segment.SegmentFileName(r.base)))
	err2 := os.Remove(filepath.Join(r.dir, segment.IndexFileName(r.base)))
	r.release()
	if err1 != nil {
		return err1
	}
	return err2
}

// fileSize is the size of the segment file on disk.
func (r *segRef) fileSize() (int64, error) {
	if t, ok := r.extent(); ok && t.Size > 0 {
		return t.Size, nil
	}
	st, err := os.Stat(filepath.Join(r.dir, segment.SegmentFileName(r.base)))
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// lastTimestamp is the timestamp of a sealed segment's newest chunk. It
// is remembered, so that retention checks on an idle stream open no file.
func (r *segRef) lastTimestamp() (int64, error) {
	r.mu.Lock()
	ts, ok := r.mu.lastTs, r.mu.lastTsOK
	r.mu.Unlock()
	if ok {
		return ts, nil
	}
	seg, err := r.acquire()
	if err != nil {
		return 0, err
	}
	defer r.release()
	ext, sealed := r.extent()
	if ext.Count > 0 {
		var rec segment.IndexRecord
		if rec, err = seg.Record(ext.Count - 1); err != nil {
			return 0, err
		}
		ts = rec.Timestamp
	}
	if sealed {
		r.mu.Lock()
		r.mu.lastTs, r.mu.lastTsOK = ts, true
		r.mu.Unlock()
	}
	return ts, nil
}

// hold takes one more reference on an open segment, even one retention has
// removed (its file stays readable until the last reference goes).
func (r *segRef) hold() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.seg == nil {
		return fmt.Errorf("osiris: segment %d: %w", r.base, ErrClosed)
	}
	r.mu.refs++
	return nil
}

// setRolled records that the writer of a replicated stream has moved on
// from the segment, whose complete extent is t.
func (r *segRef) setRolled(t segment.Tail) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.rolled, r.mu.rolledExt = true, t
}

// unroll makes a rolled segment that is not sealed the active one again
// (a replica truncating its log back into it).
func (r *segRef) unroll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.rolled, r.mu.rolledExt = false, segment.Tail{}
}

// writtenExtent returns the complete extent of a segment the writer has
// moved on from (sealed or rolled); ok is false for the active one.
func (r *segRef) writtenExtent() (segment.Tail, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.sealed {
		return r.mu.final, true
	}
	return r.mu.rolledExt, r.mu.rolled
}
