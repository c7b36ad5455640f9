package queues

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func quorumArgs(kv ...any) map[string]any {
	m := map[string]any{"x-queue-type": "quorum"}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// Ensure quorum declares are refused as RabbitMQ refuses them, with its
// texts, and that a quorum queue is durable, keeps its type on redeclare
// and across a restart, with its messages.
func TestQuorumDeclare(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	decl := func(name string, durable, exclusive, autoDelete bool, args map[string]any) error {
		_, _, _, err := b.DeclareQueue(DeclareOptions{Owner: t, Def: QueueDef{VHost: "/", Name: name,
			Durable: durable, Exclusive: exclusive, AutoDelete: autoDelete, Args: args}})
		return err
	}
	wantQErr(t, decl("q", false, false, false, quorumArgs()), CodePreconditionFailed,
		"PRECONDITION_FAILED - invalid property 'non-durable' for queue 'q' in vhost '/'")
	wantQErr(t, decl("q", true, true, false, quorumArgs()), CodePreconditionFailed,
		"PRECONDITION_FAILED - invalid property 'exclusive-owner' for queue 'q' in vhost '/'")
	wantQErr(t, decl("q", false, true, false, quorumArgs()), CodePreconditionFailed,
		"PRECONDITION_FAILED - invalid property 'exclusive-owner' for queue 'q' in vhost '/'")
	wantQErr(t, decl("q", true, false, true, quorumArgs()), CodePreconditionFailed,
		"PRECONDITION_FAILED - invalid property 'auto-delete' for queue 'q' in vhost '/'")
	wantQErr(t, decl("", true, false, false, quorumArgs()), CodePreconditionFailed,
		"PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_quorum_queue")
	for _, k := range []string{"x-max-priority", "x-queue-version", "x-initial-cluster-size"} {
		wantQErr(t, decl("q", true, false, false, quorumArgs(k, int32(2))), CodePreconditionFailed,
			"PRECONDITION_FAILED - invalid arg '"+k+"' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue")
	}
	wantQErr(t, decl("q", true, false, false, quorumArgs("x-queue-mode", "lazy")), CodePreconditionFailed,
		"PRECONDITION_FAILED - invalid arg 'x-queue-mode' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue")
	wantQErr(t, decl("q", true, false, false, quorumArgs("x-dead-letter-strategy", "maybe")), CodePreconditionFailed,
		"PRECONDITION_FAILED - invalid arg 'x-dead-letter-strategy' for queue 'q' in vhost '/': invalid_dead_letter_strategy")
	wantQErr(t, decl("q", true, false, false, quorumArgs("x-consumer-timeout", int32(-1))), CodePreconditionFailed,
		"PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'q' in vhost '/': {value_negative,-1}")
	if q := b.queueReg().get("/", "q"); q != nil {
		t.Fatal("a refused declare left a queue")
	}

	// Quorum-only arguments are accepted.
	qa := quorumArgs("x-delivery-limit", int32(5), "x-dead-letter-strategy", "at-most-once",
		"x-quorum-initial-group-size", int32(3), "x-consumer-timeout", int64(60000), "x-max-length", int32(100))
	if err := decl("q", true, false, false, qa); err != nil {
		t.Fatal(err)
	}
	q, _ := b.Queue("/", "q")
	if !q.Quorum() || q.Def().Type != QueueQuorum || !q.Def().Durable {
		t.Fatalf("def %+v", q.Def())
	}
	// Redeclare: equivalent, then type and argument mismatches.
	if err := decl("q", true, false, false, qa); err != nil {
		t.Fatalf("equivalent redeclare: %v", err)
	}
	wantQErr(t, decl("q", true, false, false, nil), CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-strategy' for queue 'q' in vhost '/': received none but current is the value 'at-most-once' of type 'longstr'")
	if err := decl("p", true, false, false, quorumArgs()); err != nil {
		t.Fatal(err)
	}
	wantQErr(t, decl("p", true, false, false, nil), CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'p' in vhost '/': received 'classic' but current is 'quorum'")
	wantQErr(t, decl("p", true, false, false, map[string]any{"x-queue-type": "classic"}), CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'p' in vhost '/': received 'classic' but current is 'quorum'")
	wantQErr(t, decl("p", false, false, false, quorumArgs()), CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'p' in vhost '/': received 'false' but current is 'true'")
	qa2 := quorumArgs("x-delivery-limit", int32(6), "x-dead-letter-strategy", "at-most-once",
		"x-quorum-initial-group-size", int32(3), "x-consumer-timeout", int64(60000), "x-max-length", int32(100))
	wantQErr(t, decl("q", true, false, false, qa2), CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'q' in vhost '/': received '6' but current is '5'")
	if err := decl("c", true, false, false, map[string]any{"x-queue-type": "classic"}); err != nil {
		t.Fatal(err)
	}
	wantQErr(t, decl("c", true, false, false, quorumArgs()), CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'c' in vhost '/': received 'quorum' but current is 'classic'")

	mustPublish(t, q, true, "m1", "m2")
	mustPublish(t, q, false, "m3") // a quorum queue keeps transient messages too
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openBroker(t, dir)
	defer b.Close()
	q, err := b.Queue("/", "q")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Quorum() {
		t.Fatalf("recovered as %q", q.Def().Type)
	}
	wantCounts(t, q, 3, 0)
	if got := drain(t, q); !slices.Equal(got, []string{"m1", "m2", "m3"}) {
		t.Fatalf("recovered %v", got)
	}
	if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "q", Durable: true, Args: qa}}); err != nil {
		t.Fatalf("redeclare after restart: %v", err)
	}
}

// getCounted does a basic.get (ack required) and returns the delivery's
// id, count and the properties the front end sends (DeliveryProps).
func getCounted(t *testing.T, q *Queue) (id uint64, count uint32, props []byte, ok bool) {
	t.Helper()
	got, err := q.Get(nil, false, func(d *Delivery) {
		id, count = d.ID, d.DeliveryCount
		props = append([]byte(nil), DeliveryProps(nil, d)...)
	})
	if err != nil {
		t.Fatal(err)
	}
	return id, count, props, got
}

// Ensure redeliveries of a quorum queue carry x-delivery-count (long), the
// number of earlier returns, among the message's own headers, sorted; and
// that a classic queue's do not.
func TestQuorumDeliveryCountHeader(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	q := declareWith(t, b, "q", true, quorumArgs())
	hdrs := encTable("a", "1", "z", "2")
	if err := publishP(t, q, "m", true, msgProps{priority: -1, headers: hdrs}); err != nil {
		t.Fatal(err)
	}
	for want := range uint32(4) {
		id, n, props, ok := getCounted(t, q)
		if !ok || n != want {
			t.Fatalf("delivery %d: count %d ok %v", want, n, ok)
		}
		h := headersOf(t, props)
		if h["a"] != "1" || h["z"] != "2" {
			t.Fatalf("headers %v", h)
		}
		if want == 0 {
			if _, has := h["x-delivery-count"]; has {
				t.Fatalf("first delivery has x-delivery-count: %v", h)
			}
		} else {
			if h["x-delivery-count"] != int64(want) {
				t.Fatalf("delivery %d: x-delivery-count %T %v", want, h["x-delivery-count"], h["x-delivery-count"])
			}
			headerKeysSorted(t, props)
		}
		q.Requeue(id)
	}

	c := declareWith(t, b, "c", true, nil)
	mustPublish(t, c, true, "m")
	id, _, _, _ := getCounted(t, c)
	c.Requeue(id)
	_, n, props, _ := getCounted(t, c)
	if n != 1 || headersOf(t, props) != nil {
		t.Fatalf("classic redelivery: count %d headers %v", n, headersOf(t, props))
	}

	// A header a publisher set is replaced.
	q2 := declareWith(t, b, "q2", true, quorumArgs())
	if err := publishP(t, q2, "m", true, msgProps{priority: -1, headers: encTable("x-delivery-count", "bogus")}); err != nil {
		t.Fatal(err)
	}
	id, _, _, _ = getCounted(t, q2)
	q2.Requeue(id)
	_, _, props, _ = getCounted(t, q2)
	if h := headersOf(t, props); h["x-delivery-count"] != int64(1) || len(h) != 1 {
		t.Fatalf("headers %v", h)
	}
}

// returnN gets and requeues the only message of q n times.
func returnN(t *testing.T, q *Queue, n int) {
	t.Helper()
	for i := range n {
		id, _, _, ok := getCounted(t, q)
		if !ok {
			t.Fatalf("return %d: queue empty", i+1)
		}
		q.Requeue(id)
	}
}

// Ensure a message returned more than the delivery limit times is
// dead-lettered with reason delivery_limit, or dropped without a
// dead-letter exchange; that a negative limit is unlimited, the default
// 20, and a policy's delivery-limit applies.
func TestQuorumDeliveryLimit(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	dead := declareWith(t, b, "dead", true, nil)
	fanoutTo(t, b, "dlx", "dead")
	src := declareWith(t, b, "src", true, quorumArgs("x-delivery-limit", int32(2), "x-dead-letter-exchange", "dlx"))
	before := time.Now()
	mustPublish(t, src, true, "m")
	returnN(t, src, 2)
	wantCounts(t, src, 1, 0)
	returnN(t, src, 1)
	waitReady(t, dead, 1)
	wantCounts(t, src, 0, 0)
	d, _ := getOne(t, dead, true)
	if d.body != "m" || d.exchange != "dlx" || d.routingKey != "rk" {
		t.Fatalf("dead-lettered %+v", d)
	}
	checkXDeath(t, d.props, wantDeathEntry{count: 1, reason: "delivery_limit", queue: "src", exchange: "ex",
		keys: []string{"rk"}, notBefore: before, notAfter: time.Now()})
	checkDeathHeaders(t, d.props, [3]string{"src", "delivery_limit", "ex"}, [3]string{"src", "delivery_limit", "ex"})

	// Without a dead-letter exchange: dropped.
	drop := declareWith(t, b, "drop", true, quorumArgs("x-delivery-limit", int64(0)))
	mustPublish(t, drop, true, "m")
	returnN(t, drop, 1)
	wantCounts(t, drop, 0, 0)

	// Unlimited, and the default of 20.
	unl := declareWith(t, b, "unl", true, quorumArgs("x-delivery-limit", int32(-1)))
	dflt := declareWith(t, b, "dflt", true, quorumArgs())
	mustPublish(t, unl, true, "m")
	mustPublish(t, dflt, true, "m")
	returnN(t, unl, 30)
	wantCounts(t, unl, 1, 0)
	returnN(t, dflt, 20)
	wantCounts(t, dflt, 1, 0)
	returnN(t, dflt, 1)
	wantCounts(t, dflt, 0, 0)

	// A policy's delivery-limit: with an argument, the lower one.
	setPolicy(t, b, "dl", "^pol", "quorum_queues", 0, map[string]any{"delivery-limit": int64(1)})
	pol := declareWith(t, b, "pol", true, quorumArgs())
	pol5 := declareWith(t, b, "pol5", true, quorumArgs("x-delivery-limit", int32(5)))
	mustPublish(t, pol, true, "m")
	mustPublish(t, pol5, true, "m")
	returnN(t, pol, 1)
	wantCounts(t, pol, 1, 0)
	returnN(t, pol, 1)
	wantCounts(t, pol, 0, 0)
	returnN(t, pol5, 1)
	wantCounts(t, pol5, 1, 0)
	returnN(t, pol5, 1)
	wantCounts(t, pol5, 0, 0)
}

// Ensure x-overflow reject-publish-dlx on a quorum queue refuses without
// dead-lettering (RabbitMQ's quorum queues treat it as reject-publish).
func TestQuorumRejectPublishDLX(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	dead := declareWith(t, b, "dead", true, nil)
	fanoutTo(t, b, "dlx", "dead")
	q := declareWith(t, b, "q", true, quorumArgs("x-max-length", int32(1), "x-overflow", "reject-publish-dlx",
		"x-dead-letter-exchange", "dlx"))
	mustPublish(t, q, true, "m1")
	if err := publishP(t, q, "m2", true, noProps()); !errors.Is(err, ErrRejectPublish) {
		t.Fatalf("over the limit: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	wantCounts(t, dead, 0, 0)
	wantCounts(t, q, 1, 0)
}

// Ensure a classic declare carrying a quorum or stream argument is
// refused with RabbitMQ's text, and that an unknown argument is ignored.
func TestClassicRefusesOtherTypesArgs(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	for _, k := range []string{"x-delivery-limit", "x-max-age", "x-consumer-timeout"} {
		_, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "c", Durable: true, Args: map[string]any{k: int32(5)}}})
		e := AsError(err)
		want := "PRECONDITION_FAILED - invalid arg '" + k + "' for queue 'c' in vhost '/' of queue type rabbit_classic_queue"
		if e == nil || e.Code != CodePreconditionFailed || e.Text != want {
			t.Fatalf("%s: got %v, want %q", k, err, want)
		}
	}
	if _, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: "c", Durable: true, Args: map[string]any{"x-whatever": int32(5)}}}); err != nil {
		t.Fatalf("unknown argument: %v", err)
	}
}
