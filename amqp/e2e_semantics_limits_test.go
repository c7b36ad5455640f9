package amqp

import (
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// TestSemanticsMaxLength: x-max-length with drop-head keeps the newest
// and dead-letters the dropped heads with reason maxlen; x-max-length-
// bytes counts body bytes of ready messages only.
func TestSemanticsMaxLength(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	declareArgs(t, ch, "dead", false, nil)
	declareArgs(t, ch, "ml", false, amqp091.Table{"x-max-length": int32(2), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"})
	before := time.Now()
	mustConfirm(t, ch, "", "ml", amqp091.Publishing{}, "m1", "m2", "m3", "m4")
	if n := messages(t, ch, "ml"); n != 2 {
		t.Fatalf("%d messages, want 2", n)
	}
	waitMessages(t, ch, "dead", 2)
	d, _, err := ch.Get("dead", true)
	must(t, err)
	if string(d.Body) != "m1" {
		t.Fatalf("first dropped %q", d.Body)
	}
	checkDeaths(t, d, before, time.Now(), xDeath{count: 1, reason: "maxlen", queue: "ml", exchange: "", keys: []string{"ml"}})
	if got := getBodies(t, ch, "dead"); !slices.Equal(got, []string{"m2"}) {
		t.Fatalf("dead %v", got)
	}
	if got := getBodies(t, ch, "ml"); !slices.Equal(got, []string{"m3", "m4"}) {
		t.Fatalf("kept %v", got)
	}

	declareArgs(t, ch, "mb", false, amqp091.Table{"x-max-length-bytes": int32(10)})
	mustConfirm(t, ch, "", "mb", amqp091.Publishing{}, "aaaa", "bbbb", "cccc")
	if got := getBodies(t, ch, "mb"); !slices.Equal(got, []string{"bbbb", "cccc"}) {
		t.Fatalf("kept %v", got)
	}
	// Unacked messages do not count.
	mustConfirm(t, ch, "", "mb", amqp091.Publishing{}, "1234567890")
	_, cch := tb.channel(t)
	ds, err := cch.Consume("mb", "c", false, false, false, false, nil)
	must(t, err)
	recv(t, ds)
	must(t, cch.Cancel("c", false))
	mustConfirm(t, ch, "", "mb", amqp091.Publishing{}, "0987654321")
	if n := messages(t, ch, "mb"); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
}

// TestSemanticsRejectPublish: x-overflow reject-publish nacks the publish
// beyond the limit (the channel stays open); a message routed to several
// queues is nacked if any refused, the others keep it; reject-publish-dlx
// also dead-letters it with reason maxlen.
func TestSemanticsRejectPublish(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	declareArgs(t, ch, "rp", false, amqp091.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	declareArgs(t, ch, "other", false, nil)
	must(t, ch.ExchangeDeclare("fan", "fanout", false, false, false, false, nil))
	must(t, ch.QueueBind("rp", "", "fan", false, nil))
	must(t, ch.QueueBind("other", "", "fan", false, nil))
	if !confirmed(t, ch, "fan", "", amqp091.Publishing{Body: []byte("first")}) {
		t.Fatal("first publish nacked")
	}
	if confirmed(t, ch, "fan", "", amqp091.Publishing{Body: []byte("second")}) {
		t.Fatal("publish beyond the limit acked")
	}
	if confirmed(t, ch, "", "rp", amqp091.Publishing{Body: []byte("third")}) {
		t.Fatal("publish beyond the limit acked")
	}
	if got := getBodies(t, ch, "other"); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("other %v", got)
	}
	if got := getBodies(t, ch, "rp"); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("rp %v", got)
	}
	if !confirmed(t, ch, "", "rp", amqp091.Publishing{Body: []byte("room again")}) {
		t.Fatal("publish with room nacked")
	}

	declareArgs(t, ch, "dead", false, nil)
	declareArgs(t, ch, "rpd", false, amqp091.Table{"x-max-length": int32(1), "x-overflow": "reject-publish-dlx",
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"})
	before := time.Now()
	if !confirmed(t, ch, "", "rpd", amqp091.Publishing{Body: []byte("kept")}) {
		t.Fatal("nacked")
	}
	if confirmed(t, ch, "", "rpd", amqp091.Publishing{Body: []byte("refused")}) {
		t.Fatal("publish beyond the limit acked")
	}
	waitMessages(t, ch, "dead", 1)
	d, _, err := ch.Get("dead", true)
	must(t, err)
	if string(d.Body) != "refused" {
		t.Fatalf("dead-lettered %q", d.Body)
	}
	checkDeaths(t, d, before, time.Now(), xDeath{count: 1, reason: "maxlen", queue: "rpd", exchange: "", keys: []string{"rpd"}})

	// In a transaction a refusal fails the commit.
	_, tch := tb.channel(t)
	must(t, tch.Tx())
	must(t, tch.Publish("", "rp", false, false, amqp091.Publishing{Body: []byte("tx")}))
	amqpErr(t, tch.TxCommit(), 406, "PRECONDITION_FAILED - partial tx completion")
}
