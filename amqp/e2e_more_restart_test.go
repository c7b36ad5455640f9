package amqp

import (
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestRestartRedeliversUnacked: a durable queue's persistent messages
// survive a restart; those delivered and unacked when the broker stopped
// come back first with Redelivered set, acked ones never come back,
// never-delivered ones keep Redelivered clear, and the order holds.
// Transient messages, transient and exclusive queues are gone; a durable
// auto-delete queue that never had a consumer stays and still goes with
// its first consumer's cancel.
func TestRestartRedeliversUnacked(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	if _, err := ch.QueueDeclare("dq", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("tq", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("adq", true, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("eq", true, false, true, false, nil); err != nil { // forced transient
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "", "dq", true, strs("m", 5)...)
	publishConfirmed(t, ch, "", "dq", false, "transient")
	publishConfirmed(t, ch, "", "dq", true, strs("n", 5)...)
	publishConfirmed(t, ch, "", "tq", true, "in a transient queue")
	publishConfirmed(t, ch, "", "adq", true, "ad")

	_, cch := tb.channel(t)
	must(t, cch.Qos(5, 0, false))
	ds, err := cch.Consume("dq", "c", false, false, false, false, nil)
	must(t, err)
	got := recvN(t, ds, 5)
	if !slices.Equal(bodies(got), []string{"m0", "m1", "m2", "m3", "m4"}) {
		t.Fatalf("before restart %v", bodies(got))
	}
	must(t, got[1].Ack(true))  // m0, m1
	must(t, got[3].Ack(false)) // m3; m2 and m4 stay unacked
	// The three free slots take the next three; they stay unacked too.
	if more := recvN(t, ds, 3); !slices.Equal(bodies(more), []string{"transient", "n0", "n1"}) {
		t.Fatalf("then %v", bodies(more))
	}
	// A synchronous method orders the acks before the stop.
	q, err := cch.QueueDeclarePassive("dq", true, false, false, false, nil)
	if err != nil || q.Messages != 3 || q.Consumers != 1 { // n2..n4
		t.Fatalf("before restart: %+v %v", q, err)
	}

	tb = tb.restart(t)
	c, ch := confirmChannel(t, tb)
	q, err = ch.QueueDeclare("dq", true, false, false, false, nil)
	if err != nil || q.Messages != 7 || q.Consumers != 0 { // m2, m4, n0..n4; not the transient one
		t.Fatalf("dq after restart: %+v %v", q, err)
	}
	for _, name := range []string{"tq", "eq"} {
		if queueExists(t, c, name) {
			t.Errorf("%s survived the restart", name)
		}
	}
	_, cch = tb.channel(t)
	ds, err = cch.Consume("dq", "c", false, false, false, false, nil)
	must(t, err)
	after := recvN(t, ds, 7)
	none(t, ds)
	want := []string{"m2", "m4", "n0", "n1", "n2", "n3", "n4"}
	if !slices.Equal(bodies(after), want) {
		t.Fatalf("after restart %v, want %v", bodies(after), want)
	}
	for i, d := range after {
		if d.Redelivered != (i < 4) || d.DeliveryTag != uint64(i+1) || d.DeliveryMode != amqp091.Persistent || d.RoutingKey != "dq" {
			t.Errorf("%s: redelivered %v tag %d mode %d key %q", d.Body, d.Redelivered, d.DeliveryTag, d.DeliveryMode, d.RoutingKey)
		}
	}
	must(t, after[6].Ack(true))
	waitCount(t, tb, "dq", 0)

	// The auto-delete queue never had a consumer: it is there with its
	// message, and goes when its first consumer cancels.
	q, err = ch.QueueDeclarePassive("adq", true, true, false, false, nil)
	if err != nil || q.Messages != 1 {
		t.Fatalf("adq after restart: %+v %v", q, err)
	}
	ads, err := cch.Consume("adq", "adc", true, false, false, false, nil)
	must(t, err)
	if m := recv(t, ads); string(m.Body) != "ad" {
		t.Fatalf("adq: %q", m.Body)
	}
	must(t, cch.Cancel("adc", false))
	if queueExists(t, c, "adq") {
		t.Fatal("auto-delete queue kept after its consumer cancelled")
	}

	// Acks after the restart are durable too.
	cch.Close()
	tb = tb.restart(t)
	_, ch = tb.channel(t)
	q, err = ch.QueueDeclarePassive("dq", true, false, false, false, nil)
	if err != nil || q.Messages != 0 {
		t.Fatalf("dq after the second restart: %+v %v", q, err)
	}
}
