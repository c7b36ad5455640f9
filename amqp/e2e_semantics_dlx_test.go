package amqp

import (
	"reflect"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// xDeath is an expected x-death table; time is checked to the second
// against a window.
type xDeath struct {
	count    int64
	reason   string
	queue    string
	exchange string
	keys     []string
	origExp  string // "" absent
}

// checkDeaths decodes the x-death header of d and compares every entry
// with its exact types: count long, reason/queue/exchange longstr, time
// timestamp, routing-keys array of longstr, original-expiration longstr
// only when the message had an expiration.
func checkDeaths(t *testing.T, d amqp091.Delivery, from, to time.Time, want ...xDeath) {
	t.Helper()
	arr, ok := d.Headers["x-death"].([]any)
	if !ok {
		t.Fatalf("x-death is %T: headers %v", d.Headers["x-death"], d.Headers)
	}
	if len(arr) != len(want) {
		t.Fatalf("x-death has %d entries, want %d: %v", len(arr), len(want), arr)
	}
	for i, w := range want {
		e, ok := arr[i].(amqp091.Table)
		if !ok {
			t.Fatalf("x-death[%d] is %T", i, arr[i])
		}
		keys := []string{"count", "exchange", "queue", "reason", "routing-keys", "time"}
		if w.origExp != "" {
			keys = append(keys, "original-expiration")
		}
		var got []string
		for k := range e {
			got = append(got, k)
		}
		slices.Sort(got)
		slices.Sort(keys)
		if !slices.Equal(got, keys) {
			t.Fatalf("x-death[%d] keys %v, want %v", i, got, keys)
		}
		var rks []any
		for _, k := range w.keys {
			rks = append(rks, k)
		}
		wantT := amqp091.Table{"count": w.count, "reason": w.reason, "queue": w.queue, "exchange": w.exchange, "routing-keys": rks}
		if w.origExp != "" {
			wantT["original-expiration"] = w.origExp
		}
		ts, ok := e["time"].(time.Time)
		if !ok {
			t.Fatalf("x-death[%d] time is %T", i, e["time"])
		}
		if ts.Unix() < from.Unix() || ts.Unix() > to.Unix() {
			t.Fatalf("x-death[%d] time %v not within [%v, %v]", i, ts, from, to)
		}
		cmp := amqp091.Table{}
		for k, v := range e {
			if k != "time" {
				cmp[k] = v
			}
		}
		if !reflect.DeepEqual(cmp, wantT) {
			t.Fatalf("x-death[%d]\n got %#v\nwant %#v", i, cmp, wantT)
		}
	}
}

// checkFirstLast checks the x-first-death-* and x-last-death-* headers.
func checkFirstLast(t *testing.T, d amqp091.Delivery, first, last [3]string) {
	t.Helper()
	h := d.Headers
	got := [6]any{h["x-first-death-queue"], h["x-first-death-reason"], h["x-first-death-exchange"],
		h["x-last-death-queue"], h["x-last-death-reason"], h["x-last-death-exchange"]}
	want := [6]any{first[0], first[1], first[2], last[0], last[1], last[2]}
	if got != want {
		t.Fatalf("death headers %v, want %v", got, want)
	}
}

// TestSemanticsDeadLetterRejected: basic.reject and basic.nack without
// requeue dead-letter through the queue's dead-letter exchange with
// reason rejected; the x-death entry carries the original exchange and
// routing keys (CC included, BCC not), other headers stay, the message
// arrives with the dead-letter exchange and its routing key.
func TestSemanticsDeadLetterRejected(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	must(t, ch.ExchangeDeclare("dlx", "fanout", false, false, false, false, nil))
	must(t, ch.ExchangeDeclare("work", "direct", false, false, false, false, nil))
	declareArgs(t, ch, "dead", false, nil)
	must(t, ch.QueueBind("dead", "", "dlx", false, nil))
	declareArgs(t, ch, "src", false, amqp091.Table{"x-dead-letter-exchange": "dlx"})
	must(t, ch.QueueBind("src", "k1", "work", false, nil))
	before := time.Now()
	mustConfirm(t, ch, "work", "k1", amqp091.Publishing{
		Headers: amqp091.Table{"CC": []any{"k2"}, "BCC": []any{"k3"}, "app": "v"},
	}, "r1", "r2")
	_, cch := tb.channel(t)
	ds, err := cch.Consume("src", "c", false, false, false, false, nil)
	must(t, err)
	got := recvN(t, ds, 2)
	must(t, got[0].Reject(false))
	must(t, got[1].Nack(false, false))
	dead, err := cch.Consume("dead", "d", true, false, false, false, nil)
	must(t, err)
	for _, body := range []string{"r1", "r2"} {
		d := recv(t, dead)
		if string(d.Body) != body || d.Exchange != "dlx" || d.RoutingKey != "k1" {
			t.Fatalf("dead-lettered %q via %q %q", d.Body, d.Exchange, d.RoutingKey)
		}
		checkDeaths(t, d, before, time.Now(), xDeath{count: 1, reason: "rejected", queue: "src", exchange: "work", keys: []string{"k1", "k2"}})
		checkFirstLast(t, d, [3]string{"src", "rejected", "work"}, [3]string{"src", "rejected", "work"})
		if d.Headers["app"] != "v" || !reflect.DeepEqual(d.Headers["CC"], []any{"k2"}) || d.Headers["BCC"] != nil {
			t.Fatalf("headers %v", d.Headers)
		}
	}
	if n := messages(t, ch, "src"); n != 0 {
		t.Fatalf("%d left in src", n)
	}
}

// TestSemanticsDeadLetterExpired: an expired message is dead-lettered
// with reason expired and the dead-letter routing key; its expiration
// property is removed and reported as original-expiration.
func TestSemanticsDeadLetterExpired(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	declareArgs(t, ch, "dead", false, nil)
	declareArgs(t, ch, "src", false, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"})
	before := time.Now()
	mustConfirm(t, ch, "", "src", amqp091.Publishing{Expiration: "40", MessageId: "id1"}, "e")
	waitMessages(t, ch, "dead", 1)
	d, _, err := ch.Get("dead", true)
	must(t, err)
	if d.Exchange != "" || d.RoutingKey != "dead" || d.Expiration != "" || d.MessageId != "id1" {
		t.Fatalf("dead-lettered via %q %q expiration %q id %q", d.Exchange, d.RoutingKey, d.Expiration, d.MessageId)
	}
	checkDeaths(t, d, before, time.Now(), xDeath{count: 1, reason: "expired", queue: "src", exchange: "", keys: []string{"src"}, origExp: "40"})
	checkFirstLast(t, d, [3]string{"src", "expired", ""}, [3]string{"src", "expired", ""})
	if n := messages(t, ch, "src"); n != 0 {
		t.Fatalf("%d left in src", n)
	}
}

// TestSemanticsDeadLetterMerging: repeated dead-lettering merges the
// history per (queue, reason). A (TTL) -> B; B rejects -> A; A expires
// again -> B: [A/expired count 2, B/rejected count 1]. Without a
// rejection the cycle A -> B -> A drops the message, as does a queue
// dead-lettering expired messages to itself.
func TestSemanticsDeadLetterMerging(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	declareArgs(t, ch, "A", false, amqp091.Table{"x-message-ttl": int32(30), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "B"})
	declareArgs(t, ch, "B", false, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "A"})
	before := time.Now()
	mustConfirm(t, ch, "", "A", amqp091.Publishing{}, "m")
	_, cch := tb.channel(t)
	ds, err := cch.Consume("B", "c", false, false, false, false, nil)
	must(t, err)
	d := recv(t, ds)
	checkDeaths(t, d, before, time.Now(), xDeath{count: 1, reason: "expired", queue: "A", exchange: "", keys: []string{"A"}})
	must(t, d.Reject(false))
	d = recv(t, ds)
	checkDeaths(t, d, before, time.Now(),
		xDeath{count: 2, reason: "expired", queue: "A", exchange: "", keys: []string{"A"}},
		xDeath{count: 1, reason: "rejected", queue: "B", exchange: "", keys: []string{"B"}})
	checkFirstLast(t, d, [3]string{"A", "expired", ""}, [3]string{"A", "expired", ""})
	must(t, d.Reject(false))
	d = recv(t, ds)
	checkDeaths(t, d, before, time.Now(),
		xDeath{count: 3, reason: "expired", queue: "A", exchange: "", keys: []string{"A"}},
		xDeath{count: 2, reason: "rejected", queue: "B", exchange: "", keys: []string{"B"}})
	must(t, d.Ack(false))

	// No rejection: A -> B -> A is a cycle; the message is dropped.
	declareArgs(t, ch, "C", false, amqp091.Table{"x-message-ttl": int32(20), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "D"})
	declareArgs(t, ch, "D", false, amqp091.Table{"x-message-ttl": int32(20), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "C"})
	declareArgs(t, ch, "S", false, amqp091.Table{"x-message-ttl": int32(20), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "S"})
	mustConfirm(t, ch, "", "C", amqp091.Publishing{}, "cyc")
	mustConfirm(t, ch, "", "S", amqp091.Publishing{}, "self")
	time.Sleep(150 * time.Millisecond)
	for _, q := range []string{"C", "D", "S"} {
		if n := messages(t, ch, q); n != 0 {
			t.Fatalf("%d messages in %s", n, q)
		}
	}
}

// Ensure a channel that rejects a message sees its dead-lettered copy in
// its next basic.get, as it sees its own publishes: the get waits for the
// dead-letter worker. (amqp091-go's TestDeclareArgsRejectToDeadLetterQueue
// spins ten gets after a reject and failed now and then without this.)
func TestSemanticsDeadLetterVisibleToRejectingChannel(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	must(t, ch.ExchangeDeclare("dlx", "fanout", false, false, false, false, nil))
	declareArgs(t, ch, "dead", false, nil)
	must(t, ch.QueueBind("dead", "", "dlx", false, nil))
	declareArgs(t, ch, "src", false, amqp091.Table{"x-dead-letter-exchange": "dlx"})
	for i := range 20 {
		must(t, ch.Publish("", "src", false, false, amqp091.Publishing{Body: []byte{byte(i)}}))
		d, ok, err := ch.Get("src", false)
		if err != nil || !ok {
			t.Fatalf("get %d from src: %v %v", i, ok, err)
		}
		must(t, d.Reject(false))
		dd, ok, err := ch.Get("dead", true)
		if err != nil || !ok {
			t.Fatalf("round %d: the rejected message is not in the dead-letter queue at the next get (%v %v)", i, ok, err)
		}
		if len(dd.Body) != 1 || dd.Body[0] != byte(i) {
			t.Fatalf("round %d: dead-lettered %v", i, dd.Body)
		}
	}
}
