package classic

import (
	"bytes"
	"encoding/binary"
	"maps"
	"slices"
	"testing"

	"github.com/warren-mq/warren/internal/rangeset"
)

// Ensure the ack state codec round-trips, reads version 1, and refuses
// damaged input.
func TestAckStateCodec(t *testing.T) {
	var set rangeset.Set
	set.AddRange(0, 10)
	set.AddRange(12, 13)
	enc := appendCounts(appendAckStateHead(nil, 40, &set), []idCount{{10, 3}, {11, 1}, {20, 7}})
	st, err := decodeAckState(enc)
	if err != nil {
		t.Fatal(err)
	}
	if st.mark != 40 || !sameSet(&st.settled, &set) || !maps.Equal(st.counts, map[uint64]uint32{10: 3, 11: 1, 20: 7}) {
		t.Fatalf("decoded %+v", st)
	}

	v1 := set.AppendTo(binary.AppendUvarint([]byte{1}, 40))
	st, err = decodeAckState(v1)
	if err != nil || st.mark != 40 || !sameSet(&st.settled, &set) || st.counts != nil {
		t.Fatalf("version 1: %+v %v", st, err)
	}

	for _, bad := range [][]byte{
		nil,
		{3, 0, 0, 0},
		enc[:len(enc)-1],
		append(slices.Clone(enc), 0),
		appendCounts(appendAckStateHead(nil, 40, &set), []idCount{{10, 3}, {10, 2}}), // id twice
		appendCounts(appendAckStateHead(nil, 40, &set), []idCount{{10, 0}}),          // count 0
	} {
		if _, err := decodeAckState(bad); err == nil {
			t.Errorf("decodeAckState(% x) accepted", bad)
		}
	}
}

// sameSet reports whether a and b hold the same offsets: their encoding
// has one form per set.
func sameSet(a, b *rangeset.Set) bool { return bytes.Equal(a.AppendTo(nil), b.AppendTo(nil)) }

// FuzzAckState decodes arbitrary bytes as a persisted ack state: no
// panic, and what decodes encodes back to the same state.
func FuzzAckState(f *testing.F) {
	var set rangeset.Set
	set.AddRange(3, 9)
	f.Add(appendCounts(appendAckStateHead(nil, 12, &set), []idCount{{4, 2}, {7, 9}}))
	f.Add(set.AppendTo(binary.AppendUvarint([]byte{1}, 5)))
	f.Add([]byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeAckState(b)
		if err != nil {
			return
		}
		var cs []idCount
		for _, id := range slices.Sorted(maps.Keys(st.counts)) {
			cs = append(cs, idCount{id, st.counts[id]})
		}
		again, err := decodeAckState(appendCounts(appendAckStateHead(nil, st.mark, &st.settled), cs))
		if err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		if again.mark != st.mark || !sameSet(&again.settled, &st.settled) || !maps.Equal(again.counts, st.counts) {
			t.Fatalf("round trip: %+v, then %+v", st, again)
		}
	})
}
