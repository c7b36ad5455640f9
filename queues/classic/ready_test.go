package classic

import (
	"reflect"
	"testing"
)

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
