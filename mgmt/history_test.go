package mgmt

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// samplesOf returns the sample values of a *_details object, newest first.
func samplesOf(t *testing.T, details any) []int64 {
	t.Helper()
	d, ok := details.(map[string]any)
	if !ok {
		t.Fatalf("details %v", details)
	}
	ss, ok := d["samples"].([]any)
	if !ok {
		t.Fatalf("no samples in %v", d)
	}
	var out []int64
	for _, s := range ss {
		out = append(out, num(t, s.(map[string]any)["sample"]))
	}
	return out
}

// Ensure the overview answers msg_rates_age and lengths_age with the
// totals' history, newest first, and that a deleted queue's counts stay
// in the message totals.
func TestOverviewHistorySamples(t *testing.T) {
	tb := startBroker(t)
	var mu sync.Mutex
	clock := time.Unix(1_700_000_000, 0) // a multiple of 5 s
	tb.api.rates.setClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })
	advance := func() {
		mu.Lock()
		clock = clock.Add(5 * time.Second)
		mu.Unlock()
		tb.api.rates.tick()
	}
	_, ch := dialGuest(t, tb)
	if _, err := ch.QueueDeclare("hist", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	tb.api.rates.tick()
	publishN(t, ch, "", "hist", 10, true)
	advance()
	publishN(t, ch, "", "hist", 5, true)
	advance()
	want(t, tb.guest("DELETE", "/api/queues/%2F/hist", nil), 204)
	advance()

	o := tb.guest("GET", "/api/overview?msg_rates_age=60&msg_rates_incr=5&lengths_age=60&lengths_incr=5", nil).obj(t)
	ms := o["message_stats"].(map[string]any)
	if got := fmt.Sprint(samplesOf(t, ms["publish_details"])); got != "[15 15 10 0]" {
		t.Errorf("publish samples %s, want [15 15 10 0]", got)
	}
	if got := ms["publish_details"].(map[string]any)["avg_rate"]; fmt.Sprint(got) != "1" {
		t.Errorf("publish avg_rate %v, want 1 (15 in 15 s)", got)
	}
	qt := o["queue_totals"].(map[string]any)
	if got := fmt.Sprint(samplesOf(t, qt["messages_details"])); got != "[0 15 10 0]" {
		t.Errorf("messages samples %s, want [0 15 10 0]", got)
	}
	ts := ms["publish_details"].(map[string]any)["samples"].([]any)[0].(map[string]any)["timestamp"]
	if num(t, ts) != clock.UnixMilli() {
		t.Errorf("newest sample at %v, want %d", ts, clock.UnixMilli())
	}

	// Without the parameters there are no samples; bad ranges are 400s.
	o = tb.guest("GET", "/api/overview", nil).obj(t)
	if _, ok := o["message_stats"].(map[string]any)["publish_details"].(map[string]any)["samples"]; ok {
		t.Error("samples without msg_rates_age")
	}
	want(t, tb.guest("GET", "/api/overview?lengths_age=6000&lengths_incr=1", nil), 400,
		"bad_request", "Invalid range parameters: age 6000, incr 1")
	want(t, tb.guest("GET", "/api/overview?msg_rates_age=0&msg_rates_incr=5", nil), 400,
		"bad_request", "Invalid range parameters: age 0, incr 5")
}

// Ensure the history is bounded.
func TestHistoryBounded(t *testing.T) {
	var h vhostHistory
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 3 * historyLen {
		h.push(t0.Add(time.Duration(i)*time.Second), reading{publish: 1, messages: float64(i)})
	}
	if h.n != historyLen {
		t.Fatalf("n %d, want %d", h.n, historyLen)
	}
	r, ok := h.at(t0.Add(time.Hour))
	if !ok || r.publish != 3*historyLen || r.messages != 3*historyLen-1 {
		t.Fatalf("latest %+v %v", r, ok)
	}
	if _, ok := h.at(t0.Add(time.Duration(2*historyLen-1) * time.Second)); ok {
		t.Fatal("a reading older than the ring kept")
	}
}
