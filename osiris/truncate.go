package osiris

import "time"

// Truncation is retention driven by the log's owner rather than by limits:
// a queue that has settled every record below some offset (its head) asks
// for the segments wholly below it to go.

// CanTruncateBefore reports whether TruncateBefore(offset) would delete a
// segment: whether a sealed segment lies wholly below offset. It is cheap
// (it reads the published tail) and does not involve the writer.
func (s *Stream) CanTruncateBefore(offset uint64) bool {
	t := s.tail.Load()
	return len(t.segs) > 1 && t.segs[1].base <= offset
}

// TruncateBefore deletes, oldest first, the segments all of whose records
// lie below offset. The active segment is never deleted, and readers still
// positioned in a deleted segment keep reading it (its files go when the
// last of them moves on), as with retention. It runs on the writer
// goroutine and returns the number of segments deleted.
func (s *Stream) TruncateBefore(offset uint64) (int, error) {
	var n int
	var err error
	if e := s.do(func() { n, err = s.w.truncateBefore(offset) }); e != nil {
		return 0, e
	}
	return n, err
}

// truncateBefore is TruncateBefore on the writer goroutine.
func (w *writer) truncateBefore(offset uint64) (int, error) {
	if w.werr != nil {
		return 0, w.werr
	}
	// Segment i holds [segs[i].base, segs[i+1].base); it can go when the
	// next segment starts at or below offset. The last (active) segment
	// has no successor and always stays.
	drop := 0
	for drop < len(w.segs)-1 && w.segs[drop+1].base <= offset {
		drop++
	}
	if drop == 0 {
		return 0, nil
	}
	return drop, w.dropOldest(drop)
}

// RetentionFloor returns the first offset that retention limits maxBytes
// and maxAge (0: unlimited) would keep: the base of the oldest segment
// they keep, or the log's next offset when it has no segment. It is what
// a queue that keeps its settled history truncates to (with
// TruncateBefore, never past its head): the limits apply as retention
// applies them to a stream (whole segments, oldest first, the active one
// always kept; sizes counted from the tail, ages by a segment's newest
// chunk), on the stream's clock. It judges by the published tail and
// does not involve the writer; it opens a sealed segment's files only the
// first time it looks at it. A later tail can only lower what it keeps.
func (s *Stream) RetentionFloor(maxBytes int64, maxAge time.Duration) (uint64, error) {
	t := s.tail.Load()
	if len(t.segs) == 0 {
		return t.next, nil
	}
	cfg := &Config{MaxLengthBytes: max(maxBytes, 0), MaxAge: max(maxAge, 0)}
	drop, err := retentionDrop(cfg, t.segs, t.active.Size, s.opts.Now())
	return t.segs[drop].base, err
}
