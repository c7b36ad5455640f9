package prom_test

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/mgmt/mgmttest"
)

// Ensure the queue history gauges (warren_queue_history_*) say what a
// queue's history holds and who reads it: per queue on
// /metrics/per-object, only for queues that keep history, and summed on
// /metrics.
func TestQueueHistoryGauges(t *testing.T) {
	tb := mgmttest.Start(t)
	conn, err := amqp091.Dial(amqpURL(tb))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("hist", true, false, false, false, amqp091.Table{"x-history-max-age": "1D", "x-history-max-length-bytes": int64(1 << 30)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("plain", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 10))
	for _, q := range []string{"hist", "hist", "hist", "hist", "hist", "plain"} {
		if err := ch.Publish("", q, false, false, amqp091.Publishing{Body: []byte("history"), DeliveryMode: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for range 6 {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatal("nacked")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no confirm")
		}
	}
	// Consume and ack all five: they leave the queue, not its history.
	cch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := cch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := cch.Consume("hist", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		d := <-ds
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	if err := cch.Close(); err != nil {
		t.Fatal(err)
	}
	// A history reader.
	hch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := hch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := hch.Consume("hist", "replay", false, false, false, false, amqp091.Table{"x-stream-offset": "first"}); err != nil {
		t.Fatal(err)
	}

	hist := []string{"vhost", "/", "queue", "hist"}
	var po scrape
	waitFor(t, func() bool {
		po = scrapeURL(t, tb.MetricsURL+"/metrics/per-object")
		r, _ := po.lookup("warren_queue_history_readers", hist...)
		m, _ := po.lookup("rabbitmq_queue_messages", hist...)
		return r == 1 && m == 0
	})
	if got := po.value(t, "warren_queue_history_messages", hist...); got != 5 {
		t.Errorf("warren_queue_history_messages = %v, want 5", got)
	}
	if got := po.value(t, "warren_queue_history_segments", hist...); got != 1 {
		t.Errorf("warren_queue_history_segments = %v, want 1", got)
	}
	// Each record is its message (7 bytes of body, routing key,
	// properties) and chunk headers: more than the bodies, far less
	// than a kilobyte each.
	if got := po.value(t, "warren_queue_history_bytes", hist...); got < 5*7 || got > 5*1024 {
		t.Errorf("warren_queue_history_bytes = %v", got)
	}
	for _, name := range []string{"warren_queue_history_messages", "warren_queue_history_bytes", "warren_queue_history_segments", "warren_queue_history_readers"} {
		if typ := po.typ(name); typ != dto.MetricType_GAUGE {
			t.Errorf("%s type %v, want gauge", name, typ)
		}
		if _, ok := po.lookup(name, "queue", "plain"); ok {
			t.Errorf("%s has a sample for a queue without history", name)
		}
		if n := len(po[name].Metric); n != 1 {
			t.Errorf("%s has %d samples, want 1", name, n)
		}
	}
	agg := scrapeURL(t, tb.MetricsURL+"/metrics")
	if got := agg.value(t, "warren_queue_history_messages"); got != 5 {
		t.Errorf("/metrics warren_queue_history_messages = %v, want 5", got)
	}
	if got := agg.value(t, "warren_queue_history_readers"); got != 1 {
		t.Errorf("/metrics warren_queue_history_readers = %v, want 1", got)
	}

	// The reader goes: the gauge falls back to 0, the history stays.
	if err := hch.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		po = scrapeURL(t, tb.MetricsURL+"/metrics/per-object")
		r, ok := po.lookup("warren_queue_history_readers", hist...)
		return ok && r == 0
	})
	if got := po.value(t, "warren_queue_history_messages", hist...); got != 5 {
		t.Errorf("after the reader left, warren_queue_history_messages = %v, want 5", got)
	}
}
