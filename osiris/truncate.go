package osiris

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
