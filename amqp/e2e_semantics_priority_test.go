package amqp

import (
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestSemanticsPriority: x-max-priority delivers higher priorities first,
// FIFO within one, clamps priorities above the maximum; requeued messages
// go before the fresh ones of their priority.
func TestSemanticsPriority(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	declareArgs(t, ch, "pq", false, amqp091.Table{"x-max-priority": int32(5)})
	for _, m := range []struct {
		body string
		prio uint8
	}{{"p0", 0}, {"p3a", 3}, {"p9", 9}, {"p3b", 3}, {"p5", 5}, {"p1", 1}} {
		mustConfirm(t, ch, "", "pq", amqp091.Publishing{Priority: m.prio}, m.body)
	}
	_, cch := tb.channel(t)
	must(t, cch.Qos(2, 0, false))
	ds, err := cch.Consume("pq", "c", false, false, false, false, nil)
	must(t, err)
	first := recvN(t, ds, 2) // p9 (clamped to 5), p5
	if got := bodies(first); !slices.Equal(got, []string{"p9", "p5"}) {
		t.Fatalf("first %v", got)
	}
	mustConfirm(t, ch, "", "pq", amqp091.Publishing{Priority: 5}, "p5late")
	must(t, first[1].Nack(true, true)) // both back: before p5late
	var got []string
	for len(got) < 7 {
		d := recv(t, ds)
		got = append(got, string(d.Body))
		must(t, d.Ack(false))
	}
	if want := []string{"p9", "p5", "p5late", "p3a", "p3b", "p1", "p0"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestSemanticsRestartTTLAndPriority: after a restart a durable queue's
// messages keep their expiry (counted from their enqueue, not from the
// restart) and a priority queue its order.
func TestSemanticsRestartTTLAndPriority(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	declareArgs(t, ch, "dttl", true, amqp091.Table{"x-message-ttl": int32(500)})
	declareArgs(t, ch, "dprio", true, amqp091.Table{"x-max-priority": int32(10)})
	start := time.Now()
	mustConfirm(t, ch, "", "dttl", amqp091.Publishing{DeliveryMode: amqp091.Persistent}, "t1", "t2")
	for i, p := range []uint8{1, 7, 3, 7, 0, 10} {
		mustConfirm(t, ch, "", "dprio", amqp091.Publishing{DeliveryMode: amqp091.Persistent, Priority: p}, string(rune('a'+i)))
	}
	tb = tb.restart(t)
	_, ch = confirmChannel(t, tb)
	if n := messages(t, ch, "dttl"); n != 2 && time.Since(start) < 450*time.Millisecond {
		t.Fatalf("%d messages after restart", n)
	}
	waitMessages(t, ch, "dttl", 0)
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("expired %v after publishing", el)
	}
	if got := getBodies(t, ch, "dprio"); !slices.Equal(got, []string{"f", "b", "d", "c", "a", "e"}) {
		t.Fatalf("priority order after restart %v", got)
	}
}
