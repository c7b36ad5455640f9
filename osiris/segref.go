package osiris

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/warren-mq/warren/segment"
)

// segRef is one segment of a stream as the stream and its readers share it.
// Sealed segments are opened lazily by whoever first needs them and closed
// when retention removes them and the last reader lets go.
type segRef struct {
	// Static after construction.
	dir  string
	base uint64

	mu struct {
		sync.Mutex
		seg     *segment.Segment // nil until opened
		refs    int              // readers holding seg, plus one for the stream while listed
		removed bool             // files deleted; close when refs drops to 0
		sealed  bool             // no more appends; final is set
		final   segment.Tail     // extent of a sealed segment
	}
}

func newSegRef(dir string, base uint64, seg *segment.Segment, sealed bool) *segRef {
	r := &segRef{dir: dir, base: base}
	r.mu.seg = seg
	r.mu.refs = 1
	r.mu.sealed = sealed
	if seg != nil && sealed {
		r.mu.final = seg.Tail()
	}
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
		_ = rec // a sealed segment only needs repair after outside damage
		r.mu.seg = seg
		r.mu.final = seg.Tail()
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

// closeIdleLocked closes the files of a sealed segment no reader holds,
// and of a removed one.
// REQUIRES: r.mu held.
func (r *segRef) closeIdleLocked() {
	idle := r.mu.refs == 0 || (r.mu.sealed && r.mu.refs == 1 && !r.mu.removed)
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

// seal marks the segment complete at t.
func (r *segRef) seal(t segment.Tail) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.sealed = true
	r.mu.final = t
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

// lastTimestamp is the timestamp of the segment's newest chunk.
func (r *segRef) lastTimestamp() (int64, error) {
	seg, err := r.acquire()
	if err != nil {
		return 0, err
	}
	defer r.release()
	ext, _ := r.extent()
	if ext.Count == 0 {
		return 0, nil
	}
	rec, err := seg.Record(ext.Count - 1)
	return rec.Timestamp, err
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
