package amqp

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// End-to-end tests of the exchange types beyond the four of AMQP 0-9-1:
// x-consistent-hash, x-modulus-hash and x-local-random (queues/route/hash*.go).

// xtPub is one message to publish.
type xtPub struct {
	key string
	p   amqp091.Publishing
}

// xtPublish publishes pubs to exchange on a confirm channel and waits
// for every ack.
func xtPublish(t *testing.T, ch *amqp091.Channel, exchange string, pubs []xtPub) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	dcs := make([]*amqp091.DeferredConfirmation, 0, len(pubs))
	for _, m := range pubs {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, m.key, false, false, m.p)
		if err != nil {
			t.Fatalf("publish %q: %v", m.key, err)
		}
		dcs = append(dcs, dc)
	}
	for i, dc := range dcs {
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("confirm %d: ok=%v err=%v", i, ok, err)
		}
	}
}

// xtKeyed returns n messages with routing keys and bodies prefix0…,
// each as its body.
func xtKeyed(prefix string, n int) []xtPub {
	out := make([]xtPub, n)
	for i := range out {
		k := prefix + strconv.Itoa(i)
		out[i] = xtPub{key: k, p: amqp091.Publishing{Body: []byte(k)}}
	}
	return out
}

// xtDeclare declares a named queue (durable when asked) bound to
// exchange with key.
func xtDeclare(t *testing.T, ch *amqp091.Channel, exchange, queue, key string, durable bool) {
	t.Helper()
	if _, err := ch.QueueDeclare(queue, durable, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(queue, key, exchange, false, nil); err != nil {
		t.Fatalf("bind %s to %s with %q: %v", queue, exchange, key, err)
	}
}

// xtTake consumes every ready message of each queue (autoack) and
// returns body → queue, failing on a body found twice.
func xtTake(t *testing.T, tb *testBroker, ch *amqp091.Channel, queues ...string) (where map[string]string, counts map[string]int) {
	t.Helper()
	where, counts = map[string]string{}, map[string]int{}
	for _, name := range queues {
		q, err := tb.broker.Queue("/", name)
		if err != nil {
			t.Fatal(err)
		}
		ready, _ := q.Counts()
		counts[name] = ready
		if ready == 0 {
			continue
		}
		tag := "xt-" + name
		d, err := ch.Consume(name, tag, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range recvN(t, d, ready) {
			if prev, dup := where[string(m.Body)]; dup {
				t.Fatalf("message %q reached %s and %s", m.Body, prev, name)
			}
			where[string(m.Body)] = name
		}
		if err := ch.Cancel(tag, false); err != nil {
			t.Fatal(err)
		}
	}
	return where, counts
}

// xtChanErr runs f on a new channel of c and checks that it fails, or
// closes the channel, with code and text.
func xtChanErr(t *testing.T, c *amqp091.Connection, code int, text string, f func(ch *amqp091.Channel) error) {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	if err := f(ch); err != nil {
		amqpErr(t, err, code, text)
		return
	}
	amqpErr(t, closeReason(t, closed), code, text)
}

// Ensure x-consistent-hash over the wire: weights 1 and 3 split 4,000
// keys about 1:3, every message reaches one queue, a key always reaches
// the same queue, hash-header routes on a header, and bad declarations
// and weights are 406 with RabbitMQ's texts.
func TestConsistentHashExchange(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := confirmChannel(t, tb)
	if err := ch.ExchangeDeclare("chx", "x-consistent-hash", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	xtDeclare(t, ch, "chx", "xt-light", "1", false)
	xtDeclare(t, ch, "chx", "xt-heavy", "3", false)
	pubs := xtKeyed("k", 4000)
	xtPublish(t, ch, "chx", pubs)
	where, n := xtTake(t, tb, ch, "xt-light", "xt-heavy")
	if len(where) != len(pubs) {
		t.Fatalf("%d of %d messages delivered (%v)", len(where), len(pubs), n)
	}
	if share := float64(n["xt-light"]) / float64(len(pubs)); share < 0.20 || share > 0.30 {
		t.Errorf("weights 1:3 split %v, light share %.3f, want 0.25±0.05", n, share)
	}
	t.Logf("weights 1:3 over 4000 keys: %v", n)
	// The same keys again: the same queues.
	xtPublish(t, ch, "chx", pubs[:500])
	again, _ := xtTake(t, tb, ch, "xt-light", "xt-heavy")
	for k, q := range again {
		if where[k] != q {
			t.Fatalf("key %q went to %s, before to %s", k, q, where[k])
		}
	}
	if len(again) != 500 {
		t.Fatalf("%d of 500 delivered again", len(again))
	}

	// hash-header: messages with one header value meet in one queue,
	// whatever their routing keys; three queues share 30 values.
	if err := ch.ExchangeDeclare("chh", "x-consistent-hash", false, false, false, false, amqp091.Table{"hash-header": "shard"}); err != nil {
		t.Fatal(err)
	}
	hq := []string{"xt-h1", "xt-h2", "xt-h3"}
	for _, q := range hq {
		xtDeclare(t, ch, "chh", q, "1", false)
	}
	var hpubs []xtPub
	for i := range 300 {
		hpubs = append(hpubs, xtPub{key: "rk" + strconv.Itoa(i), p: amqp091.Publishing{
			Headers: amqp091.Table{"shard": fmt.Sprintf("s%d", i%30)},
			Body:    []byte(strconv.Itoa(i)),
		}})
	}
	xtPublish(t, ch, "chh", hpubs)
	hwhere, hn := xtTake(t, tb, ch, hq...)
	if len(hwhere) != 300 {
		t.Fatalf("%d of 300 header messages delivered (%v)", len(hwhere), hn)
	}
	shardQueue := map[int]string{}
	for body, q := range hwhere {
		i, _ := strconv.Atoi(body)
		if prev, ok := shardQueue[i%30]; ok && prev != q {
			t.Fatalf("shard s%d reached %s and %s", i%30, prev, q)
		}
		shardQueue[i%30] = q
	}
	for _, q := range hq {
		if hn[q] == 0 {
			t.Errorf("header routing left %s empty: %v", q, hn)
		}
	}

	// Errors.
	xtChanErr(t, c, 406, `PRECONDITION_FAILED - The binding key must be an integer: <<"abc">>`, func(ch *amqp091.Channel) error {
		return ch.QueueBind("xt-light", "abc", "chx", false, nil)
	})
	xtChanErr(t, c, 406, "PRECONDITION_FAILED - The binding key must be greater than 0", func(ch *amqp091.Channel) error {
		return ch.QueueBind("xt-light", "0", "chx", false, nil)
	})
	xtChanErr(t, c, 406, "PRECONDITION_FAILED - The binding key must not exceed 10000", func(ch *amqp091.Channel) error {
		return ch.QueueBind("xt-light", "10001", "chx", false, nil)
	})
	xtChanErr(t, c, 406, "PRECONDITION_FAILED - hash-header and hash-property are mutually exclusive", func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare("bad", "x-consistent-hash", false, false, false, false,
			amqp091.Table{"hash-header": "h", "hash-property": "message_id"})
	})
	xtChanErr(t, c, 406, "PRECONDITION_FAILED - Unsupported property: user_id", func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare("bad", "x-consistent-hash", false, false, false, false, amqp091.Table{"hash-property": "user_id"})
	})
	xtChanErr(t, c, 406, "PRECONDITION_FAILED - unknown exchange type 'x-random'", func(ch *amqp091.Channel) error {
		return ch.ExchangeDeclare("bad", "x-random", false, false, false, false, nil)
	})
}

// Ensure hash-property routes on message_id, correlation_id and
// timestamp end to end.
func TestConsistentHashExchangeProperty(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	for _, prop := range []string{"message_id", "correlation_id", "timestamp"} {
		x := "chp-" + prop
		if err := ch.ExchangeDeclare(x, "x-consistent-hash", false, false, false, false, amqp091.Table{"hash-property": prop}); err != nil {
			t.Fatal(err)
		}
		qs := []string{x + "-1", x + "-2", x + "-3"}
		for _, q := range qs {
			xtDeclare(t, ch, x, q, "1", false)
		}
		var pubs []xtPub
		for i := range 300 {
			p := amqp091.Publishing{Body: []byte(strconv.Itoa(i))}
			v := i % 30
			switch prop {
			case "message_id":
				p.MessageId = "m" + strconv.Itoa(v)
			case "correlation_id":
				p.CorrelationId = "c" + strconv.Itoa(v)
			case "timestamp":
				p.Timestamp = time.Unix(int64(1_700_000_000+1000*v), 0)
			}
			pubs = append(pubs, xtPub{key: "rk" + strconv.Itoa(i), p: p})
		}
		xtPublish(t, ch, x, pubs)
		where, n := xtTake(t, tb, ch, qs...)
		if len(where) != 300 {
			t.Fatalf("%s: %d of 300 delivered", prop, len(where))
		}
		byValue := map[int]string{}
		for body, q := range where {
			i, _ := strconv.Atoi(body)
			if prev, ok := byValue[i%30]; ok && prev != q {
				t.Fatalf("%s value %d reached %s and %s", prop, i%30, prev, q)
			}
			byValue[i%30] = q
		}
		for _, q := range qs {
			if n[q] == 0 {
				t.Errorf("%s left %s empty: %v", prop, q, n)
			}
		}
	}
}

// Ensure x-modulus-hash over the wire: keys spread evenly over three
// queues, each message to one queue, a key always to the same queue.
func TestModulusHashExchange(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	if err := ch.ExchangeDeclare("mod", "x-modulus-hash", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	qs := []string{"xt-m1", "xt-m2", "xt-m3"}
	for _, q := range qs {
		xtDeclare(t, ch, "mod", q, "ignored", false)
	}
	pubs := xtKeyed("k", 1500)
	xtPublish(t, ch, "mod", pubs)
	where, n := xtTake(t, tb, ch, qs...)
	if len(where) != len(pubs) {
		t.Fatalf("%d of %d delivered (%v)", len(where), len(pubs), n)
	}
	for _, q := range qs {
		if n[q] < 400 || n[q] > 600 {
			t.Errorf("%s got %d of 1500, want about 500", q, n[q])
		}
	}
	xtPublish(t, ch, "mod", pubs[:300])
	again, _ := xtTake(t, tb, ch, qs...)
	for k, q := range again {
		if where[k] != q {
			t.Fatalf("key %q went to %s, before to %s", k, q, where[k])
		}
	}
}

// Ensure x-local-random over the wire: each message reaches exactly one
// of the bound queues, about equally often; bindings need an empty key.
func TestLocalRandomExchange(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := confirmChannel(t, tb)
	if err := ch.ExchangeDeclare("rnd", "x-local-random", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	qs := []string{"xt-r1", "xt-r2", "xt-r3"}
	for _, q := range qs {
		xtDeclare(t, ch, "rnd", q, "", false)
	}
	pubs := make([]xtPub, 1500)
	for i := range pubs {
		pubs[i] = xtPub{key: "same", p: amqp091.Publishing{Body: []byte(strconv.Itoa(i))}}
	}
	xtPublish(t, ch, "rnd", pubs)
	where, n := xtTake(t, tb, ch, qs...)
	if len(where) != len(pubs) {
		t.Fatalf("%d of %d delivered (%v)", len(where), len(pubs), n)
	}
	for _, q := range qs {
		// Binomial(1500, 1/3): σ ≈ 18; ±150 is 8σ.
		if n[q] < 350 || n[q] > 650 {
			t.Errorf("%s got %d of 1500, want about 500", q, n[q])
		}
	}
	t.Logf("x-local-random over 3 queues: %v", n)
	xtChanErr(t, c, 406, "PRECONDITION_FAILED - Non empty binding 'k' key not permitted", func(ch *amqp091.Channel) error {
		return ch.QueueBind("xt-r1", "k", "rnd", false, nil)
	})
	xtChanErr(t, c, 406, "PRECONDITION_FAILED - Destination not found", func(ch *amqp091.Channel) error {
		return ch.ExchangeBind("amq.fanout", "", "rnd", false, nil)
	})
}

// Ensure durable exchanges of the three types come back after a restart
// and keys reach the same queues as before.
func TestHashExchangesSurviveRestart(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := confirmChannel(t, tb)
	types := map[string]string{"dch": "x-consistent-hash", "dmod": "x-modulus-hash", "drnd": "x-local-random"}
	queues := map[string][]string{}
	for x, typ := range types {
		if err := ch.ExchangeDeclare(x, typ, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		for i, w := range []string{"1", "2", "3"} {
			q := fmt.Sprintf("%s-q%d", x, i)
			key := w
			if typ != "x-consistent-hash" {
				key = ""
			}
			xtDeclare(t, ch, x, q, key, true)
			queues[x] = append(queues[x], q)
		}
	}
	pubs := xtKeyed("k", 600)
	before := map[string]map[string]string{}
	for _, x := range []string{"dch", "dmod"} {
		xtPublish(t, ch, x, pubs)
		before[x], _ = xtTake(t, tb, ch, queues[x]...)
	}

	tb = tb.restart(t)
	_, ch = confirmChannel(t, tb)
	for _, x := range []string{"dch", "dmod"} {
		xtPublish(t, ch, x, pubs)
		after, _ := xtTake(t, tb, ch, queues[x]...)
		if !maps.Equal(before[x], after) {
			n := 0
			for k := range after {
				if after[k] != before[x][k] {
					n++
				}
			}
			t.Fatalf("%s: %d of %d keys placed differently after the restart", x, n, len(pubs))
		}
	}
	xtPublish(t, ch, "drnd", pubs[:300])
	where, n := xtTake(t, tb, ch, queues["drnd"]...)
	if len(where) != 300 {
		t.Fatalf("drnd after restart: %d of 300 delivered (%v)", len(where), n)
	}
	for _, q := range queues["drnd"] {
		if n[q] == 0 {
			t.Errorf("drnd after restart left %s empty: %v", q, n)
		}
	}
}
