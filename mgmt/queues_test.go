package mgmt

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

func dialGuest(t *testing.T, tb *testBroker) (*amqp091.Connection, *amqp091.Channel) {
	t.Helper()
	conn, err := amqp091.Dial(tb.amqpURL("guest", "guest", "/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return conn, ch
}

func publishN(t *testing.T, ch *amqp091.Channel, exchange, key string, n int, persistent bool) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	mode := amqp091.Transient
	if persistent {
		mode = amqp091.Persistent
	}
	for i := range n {
		c, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, false, false,
			amqp091.Publishing{Body: fmt.Appendf(nil, "m%d", i), DeliveryMode: mode, ContentType: "text/plain",
				Headers: amqp091.Table{"n": int32(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.WaitContext(context.Background()); err != nil || !ok {
			t.Fatalf("confirm %d: %v %v", i, ok, err)
		}
	}
}

func TestQueueCountsRatesAndMessages(t *testing.T) {
	tb := startBroker(t)
	var mu sync.Mutex
	clock := time.Unix(1_700_000_000, 0)
	tb.api.rates.setClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })
	_, ch := dialGuest(t, tb)
	if _, err := ch.QueueDeclare("work", true, false, false, false, amqp091.Table{"x-max-length": int32(100)}); err != nil {
		t.Fatal(err)
	}
	tb.api.rates.tick()
	publishN(t, ch, "", "work", 10, true)

	// A consumer with prefetch 3 holds three unacked messages.
	_, cch := dialGuest(t, tb)
	if err := cch.Qos(3, 0, false); err != nil {
		t.Fatal(err)
	}
	dels, err := cch.Consume("work", "ctag-1", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case <-dels:
		case <-time.After(wait):
			t.Fatal("no delivery")
		}
	}
	var q map[string]any
	deadline := time.Now().Add(wait)
	for {
		q = tb.guest("GET", "/api/queues/%2F/work", nil).obj(t)
		if num(t, q["messages_unacknowledged"]) == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if q["name"] != "work" || q["vhost"] != "/" || q["type"] != "classic" || q["durable"] != true || q["exclusive"] != false ||
		num(t, q["messages"]) != 10 || num(t, q["messages_ready"]) != 7 || num(t, q["messages_unacknowledged"]) != 3 ||
		num(t, q["consumers"]) != 1 || num(t, q["message_bytes"]) != 20 || num(t, q["message_bytes_unacknowledged"]) != 6 ||
		num(t, q["arguments"].(map[string]any)["x-max-length"]) != 100 || q["node"] != "warren@test" {
		t.Fatalf("queue %v", q)
	}
	mu.Lock()
	clock = clock.Add(2 * time.Second)
	mu.Unlock()
	tb.api.rates.tick()
	q = tb.guest("GET", "/api/queues/%2F/work", nil).obj(t)
	ms := q["message_stats"].(map[string]any)
	if num(t, ms["publish"]) != 10 || num(t, ms["deliver"]) != 3 || num(t, ms["deliver_get"]) != 3 || num(t, ms["ack"]) != 0 {
		t.Fatalf("message_stats %v", ms)
	}
	if r := ms["publish_details"].(map[string]any)["rate"]; fmt.Sprint(r) != "5" {
		t.Fatalf("publish rate %v, want 5 (10 in 2 s)", r)
	}
	if r := q["messages_details"].(map[string]any)["rate"]; fmt.Sprint(r) != "5" {
		t.Fatalf("messages rate %v", r)
	}

	// Get messages: requeued, so the counts stay; the payload and
	// properties come back.
	got := tb.guest("POST", "/api/queues/%2F/work/get", map[string]any{"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto"}).list(t)
	if len(got) != 2 || got[0]["payload"] != "m3" || got[1]["payload"] != "m4" || got[0]["payload_encoding"] != "string" ||
		got[0]["routing_key"] != "work" || got[0]["exchange"] != "" || num(t, got[0]["message_count"]) != 6 || got[0]["redelivered"] != false {
		t.Fatalf("get %v", got)
	}
	props := got[0]["properties"].(map[string]any)
	if num(t, props["delivery_mode"]) != 2 || props["content_type"] != "text/plain" || num(t, props["headers"].(map[string]any)["n"]) != 3 {
		t.Fatalf("properties %v", props)
	}
	if q := tb.guest("GET", "/api/queues/%2F/work", nil).obj(t); num(t, q["messages_ready"]) != 7 {
		t.Fatalf("after a requeueing get: %v", q["messages_ready"])
	}
	got = tb.guest("POST", "/api/queues/%2F/work/get", map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "base64", "truncate": 1}).list(t)
	if len(got) != 1 || got[0]["payload"] != "bQ==" || got[0]["payload_encoding"] != "base64" || num(t, got[0]["payload_bytes"]) != 2 || got[0]["redelivered"] != true {
		t.Fatalf("base64 get %v", got)
	}
	if q := tb.guest("GET", "/api/queues/%2F/work", nil).obj(t); num(t, q["messages_ready"]) != 6 {
		t.Fatalf("after an acking get: %v", q["messages_ready"])
	}
	want(t, tb.guest("POST", "/api/queues/%2F/work/get", map[string]any{"count": 1, "ackmode": "bogus"}), 400)
	want(t, tb.guest("POST", "/api/queues/%2F/nope/get", map[string]any{"count": 1, "ackmode": "ack_requeue_true"}), 404)

	// Purge drops the ready messages; the unacked stay.
	want(t, tb.guest("DELETE", "/api/queues/%2F/work/contents", nil), 204)
	q = tb.guest("GET", "/api/queues/%2F/work", nil).obj(t)
	if num(t, q["messages_ready"]) != 0 || num(t, q["messages_unacknowledged"]) != 3 {
		t.Fatalf("after purge %v", q)
	}
	want(t, tb.guest("DELETE", "/api/queues/%2F/work?if-unused=true", nil), 400)
	want(t, tb.guest("DELETE", "/api/queues/%2F/work", nil), 204)
	want(t, tb.guest("GET", "/api/queues/%2F/work", nil), 404)
	want(t, tb.guest("DELETE", "/api/queues/%2F/work", nil), 404)
}

func TestDeclareQueuesAndListThem(t *testing.T) {
	tb := startBroker(t)
	want(t, tb.guest("PUT", "/api/queues/%2F/q-b", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 5}}), 201)
	want(t, tb.guest("PUT", "/api/queues/%2F/q-b", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 5}}), 204)
	r := tb.guest("PUT", "/api/queues/%2F/q-b", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 6}})
	want(t, r, 400)
	if reason := r.obj(t)["reason"].(string); reason != "inequivalent arg 'x-delivery-limit' for queue 'q-b' in vhost '/': received '6' but current is '5'" {
		t.Fatalf("inequivalence reason: %s", reason)
	}
	want(t, tb.guest("PUT", "/api/queues/%2F/q-a", map[string]any{"durable": false, "auto_delete": false}), 201)
	want(t, tb.guest("PUT", "/api/queues/%2F/s-c", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "stream", "x-max-length-bytes": 1 << 20}}), 201)
	want(t, tb.guest("PUT", "/api/queues/%2F/amq.nope", nil), 401) // 403 ACCESS_REFUSED, as RabbitMQ's API shows it
	want(t, tb.guest("PUT", "/api/queues/nope/q", nil), 404)

	all := tb.guest("GET", "/api/queues", nil).list(t)
	if got := names(all); !slices.Equal(got, []string{"q-a", "q-b", "s-c"}) {
		t.Fatalf("queues %v", got)
	}
	types := []string{}
	for _, q := range all {
		types = append(types, q["type"].(string))
	}
	if !slices.Equal(types, []string{"classic", "quorum", "stream"}) {
		t.Fatalf("types %v", types)
	}
	_, ch := dialGuest(t, tb)
	publishN(t, ch, "", "s-c", 4, false)
	s := tb.guest("GET", "/api/queues/%2F/s-c", nil).obj(t)
	facts := s["stream"].(map[string]any)
	if num(t, s["messages"]) != 4 || num(t, facts["first_offset"]) != 0 || num(t, facts["last_offset"]) != 3 ||
		num(t, facts["next_offset"]) != 4 || num(t, facts["segments"]) != 1 || num(t, facts["size_bytes"]) == 0 ||
		num(t, s["arguments"].(map[string]any)["x-max-length-bytes"]) != 1<<20 {
		t.Fatalf("stream %v", s)
	}
	want(t, tb.guest("DELETE", "/api/queues/%2F/s-c/contents", nil), 400)
	sorted := tb.guest("GET", "/api/queues/%2F?sort=messages&sort_reverse=true&columns=name,messages", nil).list(t)
	if sorted[0]["name"] != "s-c" || len(sorted[0]) != 2 {
		t.Fatalf("sorted %v", sorted)
	}
	// An operator may purge and delete another connection's exclusive
	// queue; getting its messages is refused (405 RESOURCE_LOCKED as 400).
	if _, err := ch.QueueDeclare("mine", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	publishN(t, ch, "", "mine", 2, false)
	want(t, tb.guest("POST", "/api/queues/%2F/mine/get", map[string]any{"count": 1, "ackmode": "ack_requeue_true"}), 400)
	want(t, tb.guest("DELETE", "/api/queues/%2F/mine/contents", nil), 204)
	if q := tb.guest("GET", "/api/queues/%2F/mine", nil).obj(t); q["exclusive"] != true || num(t, q["messages"]) != 0 {
		t.Fatalf("exclusive queue %v", q)
	}
	want(t, tb.guest("DELETE", "/api/queues/%2F/mine", nil), 204)
	want(t, tb.guest("DELETE", "/api/queues/%2F/s-c", nil), 204)
	if _, err := ch.QueueDeclarePassive("s-c", true, false, false, false, nil); err == nil {
		t.Fatal("stream survived its deletion")
	}
}

func TestExchangesBindingsAndPublish(t *testing.T) {
	tb := startBroker(t)
	want(t, tb.guest("PUT", "/api/exchanges/%2F/orders", map[string]any{"type": "topic", "durable": true}), 201)
	want(t, tb.guest("PUT", "/api/exchanges/%2F/orders", map[string]any{"type": "topic", "durable": true}), 204)
	want(t, tb.guest("PUT", "/api/exchanges/%2F/orders", map[string]any{"type": "direct", "durable": true}), 400)
	want(t, tb.guest("PUT", "/api/exchanges/%2F/bad", map[string]any{"type": "nope"}), 400)
	want(t, tb.guest("PUT", "/api/exchanges/%2F/bad", map[string]any{}), 400, "bad_request", "[{key_missing,type}]")
	want(t, tb.guest("PUT", "/api/exchanges/%2F/hx", map[string]any{"type": "headers"}), 201)
	want(t, tb.guest("PUT", "/api/queues/%2F/eu", nil), 201)

	r := tb.guest("POST", "/api/bindings/%2F/e/orders/q/eu", map[string]any{"routing_key": "eu.#"})
	want(t, r, 201)
	if loc := r.header.Get("Location"); loc != "eu.%23" {
		t.Fatalf("Location %q", loc)
	}
	want(t, tb.guest("POST", "/api/bindings/%2F/e/hx/q/eu", map[string]any{"routing_key": "", "arguments": map[string]any{"x-match": "all", "region": "eu"}}), 201)
	want(t, tb.guest("POST", "/api/bindings/%2F/e/orders/e/hx", map[string]any{"routing_key": "x.*"}), 201)
	want(t, tb.guest("POST", "/api/bindings/%2F/e/orders/q/nope", map[string]any{"routing_key": "k"}), 404)

	bs := tb.guest("GET", "/api/queues/%2F/eu/bindings", nil).list(t)
	if len(bs) != 3 || bs[0]["source"] != "" || bs[0]["routing_key"] != "eu" || bs[1]["source"] != "hx" || bs[2]["routing_key"] != "eu.#" {
		t.Fatalf("queue bindings %v", bs)
	}
	headersKey := bs[1]["properties_key"].(string)
	one := tb.guest("GET", "/api/bindings/%2F/e/hx/q/eu/"+url.PathEscape(headersKey), nil).obj(t)
	if one["arguments"].(map[string]any)["region"] != "eu" || one["destination_type"] != "queue" {
		t.Fatalf("binding by properties key %v", one)
	}
	if src := tb.guest("GET", "/api/exchanges/%2F/orders/bindings/source", nil).list(t); len(src) != 2 {
		t.Fatalf("source bindings %v", src)
	}
	if dst := tb.guest("GET", "/api/exchanges/%2F/hx/bindings/destination", nil).list(t); len(dst) != 1 || dst[0]["source"] != "orders" {
		t.Fatalf("destination bindings %v", dst)
	}

	// Publish through the API; an AMQP consumer receives it.
	_, ch := dialGuest(t, tb)
	dels, err := ch.Consume("eu", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := tb.guest("POST", "/api/exchanges/%2F/orders/publish", map[string]any{
		"routing_key": "eu.fr", "payload": "bonjour", "payload_encoding": "string",
		"properties": map[string]any{"delivery_mode": 2, "headers": map[string]any{"k": "v", "n": 7}, "message_id": "id-1"},
	}).obj(t)
	if res["routed"] != true {
		t.Fatalf("publish %v", res)
	}
	select {
	case d := <-dels:
		if string(d.Body) != "bonjour" || d.RoutingKey != "eu.fr" || d.Exchange != "orders" || d.DeliveryMode != 2 ||
			d.MessageId != "id-1" || d.Headers["k"] != "v" || d.Headers["n"] != int64(7) {
			t.Fatalf("delivery %+v", d)
		}
	case <-time.After(wait):
		t.Fatal("published message not delivered")
	}
	if res := tb.guest("POST", "/api/exchanges/%2F/orders/publish", map[string]any{"routing_key": "us.ny", "payload": "x", "properties": map[string]any{}}).obj(t); res["routed"] != false {
		t.Fatalf("unroutable publish %v", res)
	}
	// The default exchange by its API name, base64 payload.
	if res := tb.guest("POST", "/api/exchanges/%2F/amq.default/publish", map[string]any{"routing_key": "eu", "payload": "aGk=", "payload_encoding": "base64", "properties": map[string]any{}}).obj(t); res["routed"] != true {
		t.Fatalf("default exchange publish %v", res)
	}
	select {
	case d := <-dels:
		if string(d.Body) != "hi" {
			t.Fatalf("base64 payload %q", d.Body)
		}
	case <-time.After(wait):
		t.Fatal("default exchange publish not delivered")
	}
	want(t, tb.guest("POST", "/api/exchanges/%2F/orders/publish", map[string]any{"routing_key": "k", "payload": "x", "properties": map[string]any{"delivery_mode": 9}}), 400)
	want(t, tb.guest("POST", "/api/exchanges/%2F/orders/publish", map[string]any{"routing_key": "k", "payload": "x", "properties": map[string]any{"user_id": "mallory"}}), 400)

	want(t, tb.guest("DELETE", "/api/bindings/%2F/e/hx/q/eu/"+url.PathEscape(headersKey), nil), 204)
	want(t, tb.guest("DELETE", "/api/bindings/%2F/e/hx/q/eu/"+url.PathEscape(headersKey), nil), 404)
	want(t, tb.guest("DELETE", "/api/exchanges/%2F/orders?if-unused=true", nil), 400)
	want(t, tb.guest("DELETE", "/api/exchanges/%2F/orders", nil), 204)
	want(t, tb.guest("GET", "/api/exchanges/%2F/orders", nil), 404)
	xs := names(tb.guest("GET", "/api/exchanges/%2F", nil).list(t))
	if !slices.Contains(xs, "") || !slices.Contains(xs, "amq.topic") || slices.Contains(xs, "orders") {
		t.Fatalf("exchanges %v", xs)
	}
}

func TestPolicies(t *testing.T) {
	tb := startBroker(t)
	want(t, tb.guest("PUT", "/api/policies/%2F/limit", map[string]any{"pattern": "^lim\\.", "definition": map[string]any{"max-length": 2, "overflow": "reject-publish"}, "priority": 1, "apply-to": "queues"}), 201)
	want(t, tb.guest("PUT", "/api/policies/%2F/limit", map[string]any{"pattern": "^lim\\.", "definition": map[string]any{"max-length": 2}, "priority": 1, "apply-to": "queues"}), 204)
	r := tb.guest("PUT", "/api/policies/%2F/bad", map[string]any{"pattern": ".*", "definition": map[string]any{"max-length": "two"}})
	want(t, r, 400)
	if reason := r.obj(t)["reason"].(string); reason == "" {
		t.Fatal("no reason for an invalid policy")
	}
	want(t, tb.guest("PUT", "/api/policies/%2F/bad", map[string]any{"definition": map[string]any{}}), 400, "bad_request", "[{key_missing,pattern}]")
	p := tb.guest("GET", "/api/policies/%2F/limit", nil).obj(t)
	if p["pattern"] != "^lim\\." || p["apply-to"] != "queues" || num(t, p["priority"]) != 1 || num(t, p["definition"].(map[string]any)["max-length"]) != 2 {
		t.Fatalf("policy %v", p)
	}
	want(t, tb.guest("PUT", "/api/queues/%2F/lim.a", nil), 201)
	q := tb.guest("GET", "/api/queues/%2F/lim.a", nil).obj(t)
	if q["policy"] != "limit" || num(t, q["effective_policy_definition"].(map[string]any)["max-length"]) != 2 {
		t.Fatalf("queue's policy %v %v", q["policy"], q["effective_policy_definition"])
	}
	if ps := tb.guest("GET", "/api/policies", nil).list(t); len(ps) != 1 {
		t.Fatalf("policies %v", ps)
	}
	want(t, tb.guest("DELETE", "/api/policies/%2F/limit", nil), 204)
	want(t, tb.guest("DELETE", "/api/policies/%2F/limit", nil), 404)
	if q := tb.guest("GET", "/api/queues/%2F/lim.a", nil).obj(t); q["policy"] != "" {
		t.Fatalf("policy still in effect: %v", q["policy"])
	}
}

func TestOverviewHealthAndAliveness(t *testing.T) {
	tb := startBroker(t)
	_, ch := dialGuest(t, tb)
	if _, err := ch.QueueDeclare("o", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishN(t, ch, "", "o", 3, false)
	o := tb.guest("GET", "/api/overview", nil).obj(t)
	qt := o["queue_totals"].(map[string]any)
	ot := o["object_totals"].(map[string]any)
	if num(t, qt["messages"]) != 3 || num(t, ot["queues"]) != 1 || o["product_name"] != "Warren" || o["node"] != "warren@test" ||
		len(o["listeners"].([]any)) != 3 || num(t, o["message_stats"].(map[string]any)["publish"]) != 3 {
		t.Fatalf("overview %v", o)
	}
	want(t, tb.guest("GET", "/api/health/checks/alarms", nil), 200)
	want(t, tb.guest("GET", "/api/health/checks/local-alarms", nil), 200)
	want(t, tb.guest("GET", "/api/health/checks/virtual-hosts", nil), 200)
	_, port := hostPort(tb.api.cfg.Listeners[0].Addr)
	want(t, tb.guest("GET", fmt.Sprintf("/api/health/checks/port-listener/%d", port), nil), 200)
	r := tb.guest("GET", "/api/health/checks/port-listener/1", nil)
	want(t, r, 503)
	if r.obj(t)["status"] != "failed" {
		t.Fatalf("port-listener %s", r.body)
	}
	want(t, tb.guest("GET", "/api/health/checks/protocol-listener/amqp", nil), 200)
	want(t, tb.guest("GET", "/api/health/checks/protocol-listener/mqtt", nil), 503)
	if a := tb.guest("GET", "/api/aliveness-test/%2F", nil).obj(t); a["status"] != "ok" {
		t.Fatalf("aliveness %v", a)
	}
	want(t, tb.guest("GET", "/api/aliveness-test/nope", nil), 404)
	nodes := tb.guest("GET", "/api/nodes", nil).list(t)
	if len(nodes) != 1 || nodes[0]["name"] != "warren@test" || nodes[0]["running"] != true || num(t, nodes[0]["fd_used"]) == 0 {
		t.Fatalf("nodes %v", nodes)
	}
}
