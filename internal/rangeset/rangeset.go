// Package rangeset is a set of uint64 offsets kept as sorted, disjoint,
// non-adjacent half-open ranges. A queue's settled (acked, discarded,
// purged, skipped) offsets form a few long runs, so a backlog of millions
// of settled messages costs O(ranges) memory, not O(messages); the queues
// package keeps its settled and claimed offsets in it.
//
// Encoding (AppendTo, ReadFrom), all uvarints:
//
//	| count | per range: gap from the previous range's end (from 0) | length |
//
// Every length is at least 1 and every gap after the first range at least
// 1, so an encoding has exactly one decoding. The queues package persists
// it inside a queue's ack state: do not change it.
package rangeset

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
)

// Set is a set of offsets. The zero Set is empty and ready to use. It is
// not safe for concurrent use.
type Set struct {
	r []span // sorted by lo; r[i].hi < r[i+1].lo
}

// span is the offsets [lo, hi).
type span struct{ lo, hi uint64 }

// find returns the index of the first range with hi >= x: the range that
// holds x or touches it from above, or where x would go.
func (s *Set) find(x uint64) int {
	return sort.Search(len(s.r), func(i int) bool { return s.r[i].hi >= x })
}

// Contains reports whether x is in the set.
func (s *Set) Contains(x uint64) bool {
	if n := len(s.r); n == 0 || x >= s.r[n-1].hi {
		return false // fast path: beyond everything (the common case)
	}
	i := s.find(x + 1)
	return i < len(s.r) && s.r[i].lo <= x
}

// EndOf returns the end (exclusive) of the range holding x, if any.
func (s *Set) EndOf(x uint64) (uint64, bool) {
	if n := len(s.r); n == 0 || x >= s.r[n-1].hi {
		return 0, false
	}
	i := s.find(x + 1)
	if i < len(s.r) && s.r[i].lo <= x {
		return s.r[i].hi, true
	}
	return 0, false
}

// Add adds x.
func (s *Set) Add(x uint64) { s.AddRange(x, x+1) }

// AddRange adds [lo, hi). Adding at the end of the last range, as
// in-order acks do, only extends it.
func (s *Set) AddRange(lo, hi uint64) {
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

// FirstGap returns the smallest offset >= from that is not in the set.
func (s *Set) FirstGap(from uint64) uint64 {
	if end, ok := s.EndOf(from); ok {
		return end
	}
	return from
}

// Len is the number of ranges (not offsets).
func (s *Set) Len() int { return len(s.r) }

// AppendTo appends the set's encoding (see the package doc) to dst.
func (s *Set) AppendTo(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s.r)))
	var prev uint64
	for _, r := range s.r {
		dst = binary.AppendUvarint(dst, r.lo-prev)
		dst = binary.AppendUvarint(dst, r.hi-r.lo)
		prev = r.hi
	}
	return dst
}

// ReadFrom replaces the set by the one AppendTo encoded at the start of b
// and returns the rest of b.
func (s *Set) ReadFrom(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) { // each range takes at least 2 bytes
		return b, fmt.Errorf("rangeset: bad count")
	}
	b = b[k:]
	s.r = make([]span, 0, n)
	var prev uint64
	for i := uint64(0); i < n; i++ {
		gap, k1 := binary.Uvarint(b)
		if k1 <= 0 {
			return b, fmt.Errorf("rangeset: range %d: bad start", i)
		}
		l, k2 := binary.Uvarint(b[k1:])
		if k2 <= 0 || l == 0 || (i > 0 && gap == 0) {
			return b, fmt.Errorf("rangeset: range %d: bad length", i)
		}
		b = b[k1+k2:]
		lo := prev + gap
		s.r = append(s.r, span{lo, lo + l})
		prev = lo + l
	}
	return b, nil
}

// RemoveRange removes [lo, hi).
func (s *Set) RemoveRange(lo, hi uint64) {
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

// ClipAt removes every offset >= x.
func (s *Set) ClipAt(x uint64) {
	i := s.find(x) // first range with hi >= x
	if i < len(s.r) && s.r[i].lo < x {
		s.r[i].hi = x
		i++
	}
	s.r = s.r[:i]
}

// NextIn returns the first offset of [lo, hi) that is in the set, or hi.
func (s *Set) NextIn(lo, hi uint64) uint64 {
	if n := len(s.r); n == 0 || lo >= s.r[n-1].hi {
		return hi
	}
	i := s.find(lo + 1)
	if i == len(s.r) {
		return hi
	}
	return min(max(s.r[i].lo, lo), hi)
}
