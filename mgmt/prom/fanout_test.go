package prom_test

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/mgmt/mgmttest"
)

// Ensure the fan-out by reference metrics count what was stored once and
// the references written for it, and the body log gauges show the vhost's
// body log.
func TestFanoutMetrics(t *testing.T) {
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
	if err := ch.ExchangeDeclare("fan", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"f1", "f2", "f3"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(q, "", "fan", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 10))
	// Four fan-outs and one message for one queue (a copy, as before).
	for _, ex := range []string{"fan", "fan", "fan", "fan", ""} {
		if err := ch.Publish(ex, "f1", false, false, amqp091.Publishing{Body: make([]byte, 1000), DeliveryMode: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatal("nacked")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no confirm")
		}
	}
	po := scrapeURL(t, tb.MetricsURL+"/metrics")
	if got := po.value(t, "warren_fanout_bodies_total"); got != 4 {
		t.Errorf("warren_fanout_bodies_total = %v, want 4", got)
	}
	if got := po.value(t, "warren_fanout_references_total"); got != 12 {
		t.Errorf("warren_fanout_references_total = %v, want 12", got)
	}
	if got := po.value(t, "warren_body_log_bytes", "vhost", "/"); got < 4*1000 || got > 8*1000 {
		t.Errorf("warren_body_log_bytes = %v for four bodies of 1000 bytes", got)
	}
	if got := po.value(t, "warren_body_log_segments", "vhost", "/"); got != 1 {
		t.Errorf("warren_body_log_segments = %v, want 1", got)
	}
	for name, want := range map[string]dto.MetricType{"warren_fanout_bodies_total": dto.MetricType_COUNTER, "warren_body_log_bytes": dto.MetricType_GAUGE} {
		if typ := po.typ(name); typ != want {
			t.Errorf("%s type %v, want %v", name, typ, want)
		}
	}
}
