package mgmt

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Ensure a queue with history (here from a policy) shows it on its page
// (history: messages, bytes, offsets, first timestamp, limits, readers),
// a history reader is not among its consumers, a queue without history
// has no history object, and bad history policy values are refused.
func TestQueueHistoryObject(t *testing.T) {
	tb := startBroker(t)
	r := tb.guest("PUT", "/api/policies/%2F/bad", map[string]any{"pattern": ".*", "definition": map[string]any{"history-max-age": "7 days"}})
	want(t, r, 400)
	if reason := r.obj(t)["reason"].(string); reason != "Validation failed\n\n<<\"7 days\">> is not a valid history max age\n" {
		t.Fatalf("reason %q", reason)
	}
	r = tb.guest("PUT", "/api/policies/%2F/bad", map[string]any{"pattern": ".*", "definition": map[string]any{"history-max-length-bytes": -1}})
	want(t, r, 400)
	if reason := r.obj(t)["reason"].(string); reason != "Validation failed\n\n-1 is not a valid history maximum length in bytes\n" {
		t.Fatalf("reason %q", reason)
	}
	want(t, tb.guest("PUT", "/api/policies/%2F/hist", map[string]any{"pattern": "^h\\.", "definition": map[string]any{"history-max-age": "1D"}, "apply-to": "queues"}), 201)
	want(t, tb.guest("PUT", "/api/queues/%2F/h.a", map[string]any{"durable": true}), 201)
	want(t, tb.guest("PUT", "/api/queues/%2F/plain", map[string]any{"durable": true}), 201)

	q := tb.guest("GET", "/api/queues/%2F/h.a", nil).obj(t)
	h, ok := q["history"].(map[string]any)
	if !ok || num(t, h["messages"]) != 0 || h["first_offset"] != nil || h["last_offset"] != nil || num(t, h["max_age_seconds"]) != 86400 || h["max_length_bytes"] != nil {
		t.Fatalf("empty history %v", q["history"])
	}
	if _, ok := tb.guest("GET", "/api/queues/%2F/plain", nil).obj(t)["history"]; ok {
		t.Fatal("a queue without history has a history object")
	}

	conn, ch := dialGuest(t, tb)
	before := time.Now().UnixMilli()
	publishN(t, ch, "", "h.a", 5, true)
	cch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := cch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := cch.Consume("h.a", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		d := <-ds
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	cch.Close()
	hch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := hch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := hch.Consume("h.a", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		q = tb.guest("GET", "/api/queues/%2F/h.a", nil).obj(t)
		h = q["history"].(map[string]any)
		if num(t, q["messages"]) == 0 && num(t, h["readers"]) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %v", q)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if num(t, h["messages"]) != 5 || num(t, h["first_offset"]) != 0 || num(t, h["last_offset"]) != 4 ||
		num(t, h["first_timestamp"]) < before-1000 || num(t, h["bytes"]) == 0 || num(t, h["segments"]) != 1 {
		t.Fatalf("history %v", h)
	}
	if num(t, q["consumers"]) != 0 {
		t.Fatalf("a history reader counted among consumers: %v", q["consumers"])
	}
}
