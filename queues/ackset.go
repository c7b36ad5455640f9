package queues

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
)

// rangeSet is a set of offsets kept as sorted, disjoint, non-adjacent
// half-open ranges. A queue's settled (acked, discarded, purged, skipped)
// offsets form a few long runs, so a backlog of millions of settled
// messages costs O(ranges) memory, not O(messages).
type rangeSet struct {
	r []span // sorted by lo; r[i].hi < r[i+1].lo
}

// span is the offsets [lo, hi).
type span struct{ lo, hi uint64 }

// find returns the index of the first range with hi >= x: the range that
// holds x or touches it from above, or where x would go.
func (s *rangeSet) find(x uint64) int {
	return sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= x })
}

// contains reports whether x is in the set.
func (s *rangeSet) contains(x uint64) bool {
	if n := len(s.r); n == 0 || x >= s.r[n-1].hi {
		return false // fast path: beyond everything (the common case)
	}
	i := s.find(x + 1)
	return i < len(s.r) && s.r[i].lo <= x
}

// endOf returns the end of the range holding x, if any.
func (s *rangeSet) endOf(x uint64) (uint64, bool) {
	if n := len(s.r); n == 0 || x >= s.r[n-1].hi {
		return 0, false
	}
	i := s.find(x + 1)
	if i < len(s.r) && s.r[i].lo <= x {
		return s.r[i].hi, true
	}
	return 0, false
}

// add adds x.
func (s *rangeSet) add(x uint64) { s.addRange(x, x+1) }

// addRange adds [lo, hi).
func (s *rangeSet) addRange(lo, hi uint64) {
	if lo >= hi {
		return
	}
	n := len(s.r)
	if n == 0 || lo > s.r[n-1].hi {
		s.r = append(s.r, span{lo, hi})
		return
	}
	if lo == s.r[n-1].hi {
		s.r[n-1].hi = hi // the common case: extending the last range
		return
	}
	i := s.find(lo) // first range that ends at or after lo
	j := i          // ranges i..j-1 overlap or touch [lo, hi)
	for j < n && s.r[j].lo <= hi {
		j++
	}
	if i == j {
		// Disjoint: insert at i.
		s.r = append(s.r, span{})
		copy(s.r[i+1:], s.r[i:])
		s.r[i] = span{lo, hi}
		return
	}
	merged := span{min(lo, s.r[i].lo), max(hi, s.r[j-1].hi)}
	s.r[i] = merged
	s.r = append(s.r[:i+1], s.r[j:]...)
}

// firstGap returns the smallest offset >= from that is not in the set.
func (s *rangeSet) firstGap(from uint64) uint64 {
	if end, ok := s.endOf(from); ok {
		return end
	}
	return from
}

// countIn returns how many offsets of [lo, hi) are in the set.
func (s *rangeSet) countIn(lo, hi uint64) uint64 {
	var n uint64
	if lo >= hi {
		return 0
	}
	for i := s.find(lo + 1); i < len(s.r) && s.r[i].lo < hi; i++ {
		n += min(hi, s.r[i].hi) - max(lo, s.r[i].lo)
	}
	return n
}

// len is the number of ranges.
func (s *rangeSet) len() int { return len(s.r) }

// appendTo encodes the set: a uvarint count, then per range the uvarint
// distance from the previous range's end (from 0) and the uvarint length.
func (s *rangeSet) appendTo(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s.r)))
	var prev uint64
	for _, r := range s.r {
		dst = binary.AppendUvarint(dst, r.lo-prev)
		dst = binary.AppendUvarint(dst, r.hi-r.lo)
		prev = r.hi
	}
	return dst
}

// readFrom decodes what appendTo wrote, returning the rest of b.
func (s *rangeSet) readFrom(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) { // each range takes at least 2 bytes
		return b, fmt.Errorf("queues: range set: bad count")
	}
	b = b[k:]
	s.r = make([]span, 0, n)
	var prev uint64
	for i := uint64(0); i < n; i++ {
		gap, k1 := binary.Uvarint(b)
		if k1 <= 0 {
			return b, fmt.Errorf("queues: range set: range %d: bad start", i)
		}
		l, k2 := binary.Uvarint(b[k1:])
		if k2 <= 0 || l == 0 || (i > 0 && gap == 0) {
			return b, fmt.Errorf("queues: range set: range %d: bad length", i)
		}
		b = b[k1+k2:]
		lo := prev + gap
		s.r = append(s.r, span{lo, lo + l})
		prev = lo + l
	}
	return b, nil
}

// remove removes x.
func (s *rangeSet) remove(x uint64) { s.removeRange(x, x+1) }

// removeRange removes [lo, hi).
func (s *rangeSet) removeRange(lo, hi uint64) {
	if lo >= hi || len(s.r) == 0 || lo >= s.r[len(s.r)-1].hi {
		return
	}
	i := s.find(lo + 1) // first range with hi > lo
	j := i
	var keep []span
	for ; j < len(s.r) && s.r[j].lo < hi; j++ {
		r := s.r[j]
		if r.lo < lo {
			keep = append(keep, span{r.lo, lo})
		}
		if r.hi > hi {
			keep = append(keep, span{hi, r.hi})
		}
	}
	if i == j {
		return
	}
	if len(keep) == j-i {
		copy(s.r[i:j], keep)
		return
	}
	s.r = slices.Concat(s.r[:i:i], keep, s.r[j:])
}

// nextIn returns the first offset of [lo, hi) that is in the set, or hi.
func (s *rangeSet) nextIn(lo, hi uint64) uint64 {
	if n := len(s.r); n == 0 || lo >= s.r[n-1].hi {
		return hi
	}
	i := s.find(lo + 1)
	if i == len(s.r) {
		return hi
	}
	return min(max(s.r[i].lo, lo), hi)
}
