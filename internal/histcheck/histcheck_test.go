package histcheck

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// parse builds a history from lines of
//
//	pub P S [T]          Publish (no T: any target)
//	confirm P S
//	deliver T C P S      Deliver, not redelivered
//	redeliver T C P S    Deliver, redelivered
//	ack T P S
func parse(t *testing.T, src string) *History {
	t.Helper()
	h := &History{}
	for line := range strings.SplitSeq(src, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		seq := func(s string) uint64 {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			return n
		}
		switch {
		case f[0] == "pub" && len(f) == 3:
			h.Publish(f[1], seq(f[2]), "")
		case f[0] == "pub" && len(f) == 4:
			h.Publish(f[1], seq(f[2]), f[3])
		case f[0] == "confirm" && len(f) == 3:
			h.Confirm(f[1], seq(f[2]))
		case (f[0] == "deliver" || f[0] == "redeliver") && len(f) == 5:
			h.Deliver(f[1], f[2], f[3], seq(f[4]), f[0] == "redeliver")
		case f[0] == "ack" && len(f) == 4:
			h.Ack(f[1], f[2], seq(f[3]))
		default:
			t.Fatalf("bad line %q", line)
		}
	}
	return h
}

// brief is a violation without its detail: "kind target publisher/seq".
func brief(vs []Violation) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%s %s %s/%d", v.Kind, v.Target, v.Publisher, v.Seq))
	}
	return out
}

// Ensure histories that keep every promise pass.
func TestGoodHistories(t *testing.T) {
	for _, tc := range []struct{ name, history string }{
		{"in order, acked", `
			pub p 1 q
			pub p 2 q
			confirm p 1
			confirm p 2
			deliver q c p 1
			ack q p 1
			deliver q c p 2
			ack q p 2`},
		{"unacked redelivered, out of order", `
			pub p 1 q
			pub p 2 q
			pub p 3 q
			confirm p 1
			confirm p 2
			confirm p 3
			deliver q c p 1
			deliver q c p 2
			deliver q c p 3
			ack q p 1
			ack q p 3
			redeliver q c2 p 2
			redeliver q c2 p 2
			ack q p 2`},
		{"consumers share a queue", `
			pub p 1 q
			pub p 2 q
			pub p 3 q
			deliver q a p 1
			deliver q b p 2
			deliver q a p 3`},
		{"publishers interleave", `
			pub p 1 q
			pub r 1 q
			pub p 2 q
			deliver q c p 1
			deliver q c r 1
			deliver q c p 2`},
		{"unconfirmed may be lost", `
			pub p 1 q
			pub p 2 q
			confirm p 1
			deliver q c p 1`},
		{"a retried publish is two copies", `
			pub p 1 q
			pub p 2 q
			pub p 1 q
			pub p 2 q
			confirm p 1
			confirm p 2
			deliver q c p 1
			ack q p 1
			deliver q c p 2
			ack q p 2
			deliver q c p 1
			deliver q c p 2`},
		{"fan-out: one delivery per target", `
			pub p 1 q1
			pub p 1 q2
			confirm p 1
			deliver q1 c p 1
			ack q1 p 1
			deliver q2 c p 1
			ack q2 p 1`},
		{"any target", `
			pub p 1
			confirm p 1
			deliver s c p 1`},
		{"a stream read again by a new consumer", `
			pub p 1 s
			pub p 2 s
			deliver s c1 p 1
			deliver s c1 p 2
			deliver s c2 p 1
			deliver s c2 p 2`},
		{"empty", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if vs := parse(t, tc.history).Check(); len(vs) != 0 {
				t.Fatalf("violations: %v", vs)
			}
		})
	}
}

// Ensure each kind of violation is found, and only it.
func TestBadHistories(t *testing.T) {
	for _, tc := range []struct {
		name, history string
		want          []string
	}{
		{"confirmed, never delivered", `
			pub p 1 q
			pub p 2 q
			confirm p 1
			confirm p 2
			deliver q c p 1`,
			[]string{"lost q p/2"}},
		{"fan-out: lost from one target", `
			pub p 1 q1
			pub p 1 q2
			confirm p 1
			deliver q1 c p 1`,
			[]string{"lost q2 p/1"}},
		{"any target: delivered nowhere", `
			pub p 1
			confirm p 1`,
			[]string{"lost  p/1"}},
		{"reordered", `
			pub p 1 q
			pub p 2 q
			pub p 3 q
			deliver q c p 1
			deliver q c p 3
			deliver q c p 2`,
			[]string{"reordered q p/2"}},
		{"repeated without the redelivered flag", `
			pub p 1 q
			pub p 2 q
			deliver q c p 1
			deliver q c p 2
			deliver q c p 1`,
			[]string{"reordered q p/1"}},
		{"duplicate of an acked delivery", `
			pub p 1 q
			confirm p 1
			deliver q c p 1
			ack q p 1
			redeliver q c p 1`,
			[]string{"duplicate q p/1"}},
		{"duplicate without the flag is only a duplicate", `
			pub p 1 q
			deliver q c p 1
			ack q p 1
			deliver q c2 p 1
			deliver q c p 1`,
			[]string{"duplicate q p/1", "duplicate q p/1"}},
		{"more acked deliveries than copies", `
			pub p 1 q
			pub p 1 q
			deliver q c p 1
			ack q p 1
			deliver q c p 1
			ack q p 1
			redeliver q c p 1`,
			[]string{"duplicate q p/1"}},
		{"never published", `
			pub p 1 q
			deliver q c p 1
			deliver q c p 2
			deliver q c x 1`,
			[]string{"unpublished q p/2", "unpublished q x/1"}},
		{"from a target it was not published to", `
			pub p 1 q1
			confirm p 1
			deliver q1 c p 1
			deliver q2 c p 1`,
			[]string{"unpublished q2 p/1"}},
		{"confirmed, never published", `
			confirm p 1`,
			[]string{"unpublished  p/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := parse(t, tc.history).Check()
			if got := brief(vs); !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q\n%v", got, tc.want, vs)
			}
			for _, v := range vs {
				if v.Detail == "" || !strings.HasPrefix(v.String(), v.Kind.String()+":") {
					t.Errorf("violation %+v: no detail or a bad String %q", v, v)
				}
			}
		})
	}
}

// Ensure a violation names the event that broke the promise.
func TestViolationEvent(t *testing.T) {
	h := parse(t, `
		pub p 1 q
		deliver q c p 1
		ack q p 1
		redeliver q c p 1`)
	vs := h.Check()
	if len(vs) != 1 || vs[0].Event != 3 {
		t.Fatalf("got %v, want one violation at event 3", vs)
	}
	if e := h.Events()[vs[0].Event]; e.Kind != Deliver || !e.Redelivered {
		t.Fatalf("event %d is %v", vs[0].Event, e)
	}
}

// Ensure recording from many goroutines loses nothing (and -race finds
// nothing), and a concurrent run's history checks clean.
func TestConcurrentRecording(t *testing.T) {
	h := &History{}
	const publishers, count = 8, 1000
	var wg sync.WaitGroup
	for p := range publishers {
		pub := fmt.Sprintf("p%d", p)
		q := fmt.Sprintf("q%d", p%2)
		deliveries := make(chan uint64, count)
		wg.Go(func() {
			defer close(deliveries)
			for s := range uint64(count) {
				h.Publish(pub, s, q)
				h.Confirm(pub, s)
				deliveries <- s
			}
		})
		wg.Go(func() { // the consumer of this publisher's messages
			for s := range deliveries {
				h.Deliver(q, "c-"+pub, pub, s, false)
				h.Ack(q, pub, s)
			}
		})
	}
	wg.Wait()
	if n := len(h.Events()); n != publishers*count*4 {
		t.Fatalf("%d events, want %d", n, publishers*count*4)
	}
	if vs := h.Check(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs[:min(len(vs), 5)])
	}
}
