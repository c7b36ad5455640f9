package classic

import (
	"testing"
)

func TestAddConsumerPriorityOrder(t *testing.T) {
	var q Queue
	for i, p := range []int{0, 5, -1, 5, 0, 10} {
		q.addConsumerLocked(&Consumer{tag: string(rune('a' + i)), priority: p})
	}
	got := ""
	for _, c := range q.mu.consumers {
		got += c.tag
	}
	if want := "fbdaec"; got != want {
		t.Fatalf("order %q, want %q", got, want)
	}
}

func TestReservePriority(t *testing.T) {
	var q Queue
	hi1 := &Consumer{q: &q, tag: "h1", priority: 1, prefetch: 1}
	hi2 := &Consumer{q: &q, tag: "h2", priority: 1, prefetch: 1}
	lo := &Consumer{q: &q, tag: "l", prefetch: 0}
	for _, c := range []*Consumer{lo, hi1, hi2} {
		q.addConsumerLocked(c)
	}
	var got []string
	for range 4 {
		c := q.reserveLocked()
		q.mu.delivering = nil
		got = append(got, c.tag)
	}
	if want := []string{"h1", "h2", "l", "l"}; len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("got %v, want %v", got, want)
	}
	hi1.unacked = 0 // acked
	if c := q.reserveLocked(); c != hi1 {
		t.Fatalf("got %s, want h1", c.tag)
	}
}
