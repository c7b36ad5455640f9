package queues

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// Ensure the range set merges, splits nothing, and answers like a plain
// set, on random operations checked against a map.
func TestRangeSetRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var s rangeSet
		ref := map[uint64]bool{}
		for op := 0; op < 100; op++ {
			lo := uint64(rng.IntN(200))
			hi := lo + uint64(rng.IntN(5)) + 1
			if rng.IntN(3) == 0 {
				s.add(lo)
				ref[lo] = true
			} else {
				s.addRange(lo, hi)
				for x := lo; x < hi; x++ {
					ref[x] = true
				}
			}
		}
		for i := 1; i < len(s.r); i++ {
			if s.r[i-1].hi >= s.r[i].lo || s.r[i].lo >= s.r[i].hi {
				t.Fatalf("ranges not disjoint, ordered and non-adjacent: %v", s.r)
			}
		}
		for x := uint64(0); x < 220; x++ {
			if s.contains(x) != ref[x] {
				t.Fatalf("contains(%d) = %v, want %v; %v", x, s.contains(x), ref[x], s.r)
			}
			gap := x
			for ref[gap] {
				gap++
			}
			if g := s.firstGap(x); g != gap {
				t.Fatalf("firstGap(%d) = %d, want %d", x, g, gap)
			}
		}
		lo, hi := uint64(rng.IntN(200)), uint64(rng.IntN(220))
		var n uint64
		for x := lo; x < hi; x++ {
			if ref[x] {
				n++
			}
		}
		if got := s.countIn(lo, hi); got != n {
			t.Fatalf("countIn(%d, %d) = %d, want %d", lo, hi, got, n)
		}

		enc := s.appendTo([]byte{9})
		var back rangeSet
		rest, err := back.readFrom(enc[1:])
		if err != nil || len(rest) != 0 || !reflect.DeepEqual(back.r, s.r) && len(s.r) > 0 {
			t.Fatalf("round trip: %v %v\n got %v\nwant %v", err, rest, back.r, s.r)
		}

		cut := uint64(rng.IntN(220))
		s.clipAt(cut)
		for x := uint64(0); x < 220; x++ {
			if want := ref[x] && x < cut; s.contains(x) != want {
				t.Fatalf("after clipAt(%d): contains(%d) = %v", cut, x, !want)
			}
		}
	}
}

// Ensure a fully settled backlog is one range however many messages it
// holds, and that acks arriving in order only extend it.
func TestRangeSetCompact(t *testing.T) {
	var s rangeSet
	for x := uint64(0); x < 1_000_000; x++ {
		s.add(x)
	}
	if s.len() != 1 || s.r[0] != (span{0, 1_000_000}) {
		t.Fatalf("ranges %v", s.r)
	}
	s.add(1_000_005)
	s.addRange(1_000_000, 1_000_005)
	if s.len() != 1 || s.r[0].hi != 1_000_006 {
		t.Fatalf("ranges %v", s.r)
	}
	var bad rangeSet
	for _, b := range [][]byte{nil, {5}, {1, 0, 0}, {2, 0, 1, 0, 1}} {
		if _, err := bad.readFrom(b); err == nil {
			t.Fatalf("readFrom(% x) accepted", b)
		}
	}
}

// Ensure requeued ids come out in ascending order whatever order they
// went in, without duplicates.
func TestRequeueSetOrder(t *testing.T) {
	var s requeueSet
	for _, id := range []uint64{5, 3, 9, 3, 1, 7} {
		s.add(reqEntry{id: id, count: uint32(id)})
	}
	if s.pop().id != 1 {
		t.Fatal("first is not 1")
	}
	s.add(reqEntry{id: 2})
	var got []uint64
	for s.len() > 0 {
		got = append(got, s.pop().id)
	}
	if want := []uint64{2, 3, 5, 7, 9}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
