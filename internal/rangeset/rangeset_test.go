package rangeset

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// Ensure the set merges, splits nothing, and answers like a plain set, on
// random operations checked against a map.
func TestRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var s Set
		ref := map[uint64]bool{}
		for op := 0; op < 100; op++ {
			lo := uint64(rng.IntN(200))
			hi := lo + uint64(rng.IntN(5)) + 1
			if rng.IntN(3) == 0 {
				s.Add(lo)
				ref[lo] = true
			} else {
				s.AddRange(lo, hi)
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
			if s.Contains(x) != ref[x] {
				t.Fatalf("Contains(%d) = %v, want %v; %v", x, s.Contains(x), ref[x], s.r)
			}
			gap := x
			for ref[gap] {
				gap++
			}
			if g := s.FirstGap(x); g != gap {
				t.Fatalf("FirstGap(%d) = %d, want %d", x, g, gap)
			}
		}

		enc := s.AppendTo([]byte{9})
		var back Set
		rest, err := back.ReadFrom(enc[1:])
		if err != nil || len(rest) != 0 || !reflect.DeepEqual(back.r, s.r) && len(s.r) > 0 {
			t.Fatalf("round trip: %v %v\n got %v\nwant %v", err, rest, back.r, s.r)
		}

		lo, hi := uint64(rng.IntN(200)), uint64(rng.IntN(220))
		next := lo
		for next < hi && !ref[next] {
			next++
		}
		if got, want := s.NextIn(lo, hi), min(next, hi); got != want {
			t.Fatalf("NextIn(%d, %d) = %d, want %d", lo, hi, got, want)
		}
		s.RemoveRange(lo, hi)
		for x := lo; x < hi; x++ {
			delete(ref, x)
		}
		for x := uint64(0); x < 220; x++ {
			if s.Contains(x) != ref[x] {
				t.Fatalf("after RemoveRange(%d, %d): Contains(%d) = %v", lo, hi, x, s.Contains(x))
			}
		}

		cut := uint64(rng.IntN(220))
		s.ClipAt(cut)
		for x := uint64(0); x < 220; x++ {
			if want := ref[x] && x < cut; s.Contains(x) != want {
				t.Fatalf("after ClipAt(%d): Contains(%d) = %v", cut, x, !want)
			}
		}
	}
}

// Ensure a fully settled backlog is one range however many offsets it
// holds, that adds arriving in order only extend it, and that damaged
// encodings are refused.
func TestCompact(t *testing.T) {
	var s Set
	for x := uint64(0); x < 1_000_000; x++ {
		s.Add(x)
	}
	if s.Len() != 1 || s.r[0] != (span{0, 1_000_000}) {
		t.Fatalf("ranges %v", s.r)
	}
	s.Add(1_000_005)
	s.AddRange(1_000_000, 1_000_005)
	if s.Len() != 1 || s.r[0].hi != 1_000_006 {
		t.Fatalf("ranges %v", s.r)
	}
	var bad Set
	for _, b := range [][]byte{nil, {5}, {1, 0, 0}, {2, 0, 1, 0, 1}} {
		if _, err := bad.ReadFrom(b); err == nil {
			t.Fatalf("ReadFrom(% x) accepted", b)
		}
	}
}
