package mgmt

import (
	"net/url"
	"slices"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	samqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// eventually polls cond until it holds, failing after wait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dialNamed opens an AMQP connection as user to vhost "/" that calls
// itself name.
func dialNamed(t *testing.T, tb *testBroker, user, pass, name string) *amqp091.Connection {
	t.Helper()
	c, err := amqp091.DialConfig(tb.amqpURL(user, pass, "/"), amqp091.Config{Properties: amqp091.Table{"connection_name": name}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// byProvidedName returns the listed object whose client called itself
// name.
func byProvidedName(t *testing.T, items []map[string]any, name string) map[string]any {
	t.Helper()
	for _, it := range items {
		if it["user_provided_name"] == name {
			return it
		}
	}
	t.Fatalf("no connection named %q in %v", name, names(items))
	return nil
}

// closeCode waits for a connection's close and returns its code and text.
func closeCode(t *testing.T, ch chan *amqp091.Error) (int, string) {
	t.Helper()
	select {
	case e := <-ch:
		if e == nil {
			t.Fatal("closed without an error")
		}
		return e.Code, e.Reason
	case <-time.After(wait):
		t.Fatal("no close")
	}
	return 0, ""
}

// Ensure the AMQP connection, channel and consumer endpoints show an open
// connection with RabbitMQ's fields, and DELETE closes it with 320 and
// the X-Reason header's text (RabbitMQ's default without one).
func TestConnectionsChannelsConsumers(t *testing.T) {
	tb := startBroker(t)
	c := dialNamed(t, tb, "guest", "guest", "api-test")
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(3, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("c-q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("c-q", "c-tag", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	conns := tb.guest("GET", "/api/connections", nil).list(t)
	if len(conns) != 1 {
		t.Fatalf("connections %v", conns)
	}
	co := conns[0]
	name, _ := co["name"].(string)
	if co["protocol"] != "AMQP 0-9-1" || co["user"] != "guest" || co["vhost"] != "/" || co["node"] != "warren@test" ||
		co["user_provided_name"] != "api-test" || co["client_properties"].(map[string]any)["connection_name"] != "api-test" ||
		num(t, co["channels"]) != 1 || co["state"] != "running" || co["auth_mechanism"] != "PLAIN" || num(t, co["recv_oct"]) == 0 {
		t.Fatalf("connection %v", co)
	}
	if got := tb.guest("GET", "/api/vhosts/%2F/connections", nil).list(t); !slices.Equal(names(got), []string{name}) {
		t.Fatalf("vhost connections %v", names(got))
	}
	path := "/api/connections/" + url.PathEscape(name)
	if o := tb.guest("GET", path, nil).obj(t); o["name"] != name || o["peer_host"] != "127.0.0.1" {
		t.Fatalf("connection %v", o)
	}
	want(t, tb.guest("GET", "/api/connections/nope", nil), 404)

	chs := tb.guest("GET", path+"/channels", nil).list(t)
	chName := name + " (1)"
	if len(chs) != 1 || chs[0]["name"] != chName || num(t, chs[0]["number"]) != 1 || num(t, chs[0]["consumer_count"]) != 1 ||
		num(t, chs[0]["prefetch_count"]) != 3 || chs[0]["connection_details"].(map[string]any)["name"] != name {
		t.Fatalf("connection's channels %v", chs)
	}
	for _, p := range []string{"/api/channels", "/api/vhosts/%2F/channels"} {
		if got := tb.guest("GET", p, nil).list(t); !slices.Equal(names(got), []string{chName}) {
			t.Fatalf("%s: %v", p, names(got))
		}
	}
	co = tb.guest("GET", "/api/channels/"+url.PathEscape(chName), nil).obj(t)
	details := co["consumer_details"].([]any)
	if len(details) != 1 || details[0].(map[string]any)["consumer_tag"] != "c-tag" {
		t.Fatalf("channel %v", co)
	}
	want(t, tb.guest("GET", "/api/channels/"+url.PathEscape(name+" (9)"), nil), 404)
	for _, p := range []string{"/api/consumers", "/api/consumers/%2F"} {
		cs := tb.guest("GET", p, nil).list(t)
		if len(cs) != 1 {
			t.Fatalf("%s: %v", p, cs)
		}
		q := cs[0]["queue"].(map[string]any)
		cd := cs[0]["channel_details"].(map[string]any)
		if cs[0]["consumer_tag"] != "c-tag" || q["name"] != "c-q" || q["vhost"] != "/" || num(t, cs[0]["prefetch_count"]) != 3 ||
			cs[0]["ack_required"] != true || cs[0]["activity_status"] != "up" || cd["connection_name"] != name || cd["name"] != chName || cd["user"] != "guest" {
			t.Fatalf("%s: %v", p, cs[0])
		}
	}
	ot := tb.guest("GET", "/api/overview", nil).obj(t)["object_totals"].(map[string]any)
	if num(t, ot["connections"]) != 1 || num(t, ot["channels"]) != 1 {
		t.Fatalf("object_totals %v", ot)
	}

	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	want(t, tb.guest("DELETE", path, nil, "X-Reason", "maintenance"), 204)
	if code, text := closeCode(t, closed); code != 320 || text != "CONNECTION_FORCED - maintenance" {
		t.Fatalf("close %d %q", code, text)
	}
	eventually(t, "the connection to leave the list", func() bool {
		return len(tb.guest("GET", "/api/connections", nil).list(t)) == 0
	})
	want(t, tb.guest("DELETE", path, nil), 404)

	c2 := dialNamed(t, tb, "guest", "guest", "second")
	closed = c2.NotifyClose(make(chan *amqp091.Error, 1))
	name = byProvidedName(t, tb.guest("GET", "/api/connections", nil).list(t), "second")["name"].(string)
	want(t, tb.guest("DELETE", "/api/connections/"+url.PathEscape(name), nil), 204)
	if code, text := closeCode(t, closed); code != 320 || text != "CONNECTION_FORCED - Closed via management plugin" {
		t.Fatalf("close %d %q", code, text)
	}
}

// Ensure RabbitMQ's visibility rules: a management user sees and may
// close only its own connections (and their channels and consumers); a
// monitoring user sees all but may not close others'; an administrator
// may close any.
func TestConnectionsVisibility(t *testing.T) {
	tb := startBroker(t)
	for _, u := range []struct{ name, tags string }{{"mgr", "management"}, {"mon", "monitoring"}} {
		want(t, tb.guest("PUT", "/api/users/"+u.name, map[string]any{"password": "pw", "tags": u.tags}), 201)
		want(t, tb.guest("PUT", "/api/permissions/%2F/"+u.name, map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201)
	}
	guestConn := dialNamed(t, tb, "guest", "guest", "guest-conn")
	mgrConn := dialNamed(t, tb, "mgr", "pw", "mgr-conn")
	for _, c := range []*amqp091.Connection{guestConn, mgrConn} {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.Consume(q.Name, "", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	all := tb.guest("GET", "/api/connections", nil).list(t)
	guestName := byProvidedName(t, all, "guest-conn")["name"].(string)
	mgrName := byProvidedName(t, all, "mgr-conn")["name"].(string)

	count := func(user, path string) int {
		t.Helper()
		r := tb.call("GET", path, user, "pw", nil)
		want(t, r, 200)
		return len(r.list(t))
	}
	for _, p := range []string{"/api/connections", "/api/vhosts/%2F/connections", "/api/channels", "/api/vhosts/%2F/channels", "/api/consumers", "/api/consumers/%2F"} {
		if n := count("mgr", p); n != 1 {
			t.Errorf("mgr sees %d in %s, want its own 1", n, p)
		}
		if n := count("mon", p); n != 2 {
			t.Errorf("mon sees %d in %s, want 2", n, p)
		}
	}
	if got := tb.call("GET", "/api/connections", "mgr", "pw", nil).list(t); got[0]["name"] != mgrName {
		t.Fatalf("mgr sees %v", names(got))
	}
	guestPath, mgrPath := "/api/connections/"+url.PathEscape(guestName), "/api/connections/"+url.PathEscape(mgrName)
	want(t, tb.call("GET", guestPath, "mgr", "pw", nil), 401, "not_authorised", "User not authorised to access object")
	want(t, tb.call("GET", guestPath+"/channels", "mgr", "pw", nil), 401)
	want(t, tb.call("GET", "/api/channels/"+url.PathEscape(guestName+" (1)"), "mgr", "pw", nil), 401)
	want(t, tb.call("GET", mgrPath, "mgr", "pw", nil), 200)
	want(t, tb.call("GET", guestPath, "mon", "pw", nil), 200)

	want(t, tb.call("DELETE", guestPath, "mgr", "pw", nil), 401)
	want(t, tb.call("DELETE", guestPath, "mon", "pw", nil), 401)
	mgrClosed := mgrConn.NotifyClose(make(chan *amqp091.Error, 1))
	want(t, tb.call("DELETE", mgrPath, "mgr", "pw", nil), 204)
	if code, _ := closeCode(t, mgrClosed); code != 320 {
		t.Fatalf("mgr's connection closed with %d", code)
	}
	guestClosed := guestConn.NotifyClose(make(chan *amqp091.Error, 1))
	want(t, tb.guest("DELETE", guestPath, nil), 204)
	if code, _ := closeCode(t, guestClosed); code != 320 {
		t.Fatalf("guest's connection closed with %d", code)
	}
}

// Ensure deleting a vhost or a user through the API closes their
// connections, with RabbitMQ's texts.
func TestConnectionsClosedByDeletes(t *testing.T) {
	tb := startBroker(t)
	want(t, tb.guest("PUT", "/api/vhosts/doomed", nil), 201) // the creator gets permissions there
	want(t, tb.guest("PUT", "/api/users/alice", map[string]any{"password": "pw", "tags": ""}), 201)
	want(t, tb.guest("PUT", "/api/permissions/%2F/alice", map[string]string{"configure": ".*", "write": ".*", "read": ".*"}), 201)
	inVHost, err := amqp091.Dial(tb.amqpURL("guest", "guest", "doomed"))
	if err != nil {
		t.Fatal(err)
	}
	defer inVHost.Close()
	alice, err := amqp091.Dial(tb.amqpURL("alice", "pw", "/"))
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	vhostClosed := inVHost.NotifyClose(make(chan *amqp091.Error, 1))
	aliceClosed := alice.NotifyClose(make(chan *amqp091.Error, 1))

	want(t, tb.guest("DELETE", "/api/vhosts/doomed", nil), 204)
	if code, text := closeCode(t, vhostClosed); code != 320 || text != "CONNECTION_FORCED - vhost 'doomed' is deleted" {
		t.Fatalf("vhost deletion: %d %q", code, text)
	}
	want(t, tb.guest("DELETE", "/api/users/alice", nil), 204)
	if code, text := closeCode(t, aliceClosed); code != 320 || text != "CONNECTION_FORCED - user 'alice' is deleted" {
		t.Fatalf("user deletion: %d %q", code, text)
	}
}

// Ensure rabbitmq_stream_management's endpoints list stream connections,
// their publishers (reference and counts) and consumers (offset and lag),
// that /api/connections and /api/consumers include them as RabbitMQ's
// do, and that DELETE drops a stream connection.
func TestStreamConnectionsPublishersConsumers(t *testing.T) {
	tb := startBroker(t)
	env := streamEnv(t, tb)
	if err := env.DeclareStream("sx", nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer("sx", stream.NewProducerOptions().SetProducerName("ref").SetClientProvidedName("api-producer"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	confirms := p.NotifyPublishConfirmation()
	var msgs []message.StreamMessage
	for i := 0; i < 5; i++ {
		msgs = append(msgs, samqp.NewMessage([]byte("m")))
	}
	if err := p.BatchSend(msgs); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 5; {
		select {
		case cs := <-confirms:
			got += len(cs)
		case <-time.After(wait):
			t.Fatalf("%d of 5 confirms", got)
		}
	}
	received := make(chan struct{}, 5)
	c, err := env.NewConsumer("sx", func(stream.ConsumerContext, *samqp.Message) { received <- struct{}{} },
		stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()).SetClientProvidedName("api-consumer"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 5; i++ {
		select {
		case <-received:
		case <-time.After(wait):
			t.Fatalf("%d of 5 messages", i)
		}
	}

	sconns := tb.guest("GET", "/api/stream/connections", nil).list(t)
	pc, cc := byProvidedName(t, sconns, "api-producer"), byProvidedName(t, sconns, "api-consumer")
	if pc["protocol"] != "stream" || pc["user"] != "guest" || pc["vhost"] != "/" || num(t, cc["subscriptions"]) != 1 {
		t.Fatalf("stream connections %v", sconns)
	}
	if got := tb.guest("GET", "/api/stream/connections/%2F", nil).list(t); len(got) != len(sconns) {
		t.Fatalf("vhost's stream connections %v", names(got))
	}
	byProvidedName(t, tb.guest("GET", "/api/connections", nil).list(t), "api-producer")
	pPath := "/api/stream/connections/%2F/" + url.PathEscape(pc["name"].(string))
	cPath := "/api/stream/connections/%2F/" + url.PathEscape(cc["name"].(string))
	if o := tb.guest("GET", pPath, nil).obj(t); o["name"] != pc["name"] {
		t.Fatalf("stream connection %v", o)
	}

	checkPub := func(what string, pubs []map[string]any) {
		t.Helper()
		if len(pubs) != 1 {
			t.Fatalf("%s: %v", what, pubs)
		}
		pub := pubs[0]
		if pub["reference"] != "ref" || num(t, pub["published"]) != 5 || num(t, pub["confirmed"]) != 5 || num(t, pub["errored"]) != 0 ||
			pub["queue"].(map[string]any)["name"] != "sx" || pub["connection_details"].(map[string]any)["name"] != pc["name"] {
			t.Fatalf("%s: %v", what, pub)
		}
	}
	checkPub("connection's publishers", tb.guest("GET", pPath+"/publishers", nil).list(t))
	for _, path := range []string{"/api/stream/publishers", "/api/stream/publishers/%2F", "/api/stream/publishers/%2F/sx"} {
		checkPub(path, tb.guest("GET", path, nil).list(t))
	}
	want(t, tb.guest("GET", "/api/stream/publishers/%2F/nope", nil), 404)

	checkCons := func(what string, cons []map[string]any) {
		t.Helper()
		if len(cons) != 1 {
			t.Fatalf("%s: %v", what, cons)
		}
		co := cons[0]
		if num(t, co["offset"]) != 4 || num(t, co["offset_lag"]) != 0 || num(t, co["consumed"]) != 5 || co["active"] != true ||
			co["activity_status"] != "up" || co["queue"].(map[string]any)["name"] != "sx" {
			t.Fatalf("%s: %v", what, co)
		}
	}
	eventually(t, "the consumer's count", func() bool {
		cons := tb.guest("GET", cPath+"/consumers", nil).list(t)
		return len(cons) == 1 && num(t, cons[0]["consumed"]) == 5
	})
	checkCons("connection's consumers", tb.guest("GET", cPath+"/consumers", nil).list(t))
	for _, path := range []string{"/api/stream/consumers", "/api/stream/consumers/%2F"} {
		checkCons(path, tb.guest("GET", path, nil).list(t))
	}
	amqpCons := tb.guest("GET", "/api/consumers", nil).list(t)
	if len(amqpCons) != 1 || amqpCons[0]["consumer_tag"] != "stream.subid-0" {
		t.Fatalf("/api/consumers %v", amqpCons)
	}
	// The overview counts the subscription among the consumers.
	if ot := tb.guest("GET", "/api/overview", nil).obj(t)["object_totals"].(map[string]any); num(t, ot["consumers"]) != 1 {
		t.Fatalf("object_totals %v", ot)
	}

	// An AMQP connection is not a stream connection.
	dialNamed(t, tb, "guest", "guest", "amqp-conn")
	an := byProvidedName(t, tb.guest("GET", "/api/connections", nil).list(t), "amqp-conn")["name"].(string)
	want(t, tb.guest("GET", "/api/stream/connections/%2F/"+url.PathEscape(an), nil), 404)
	want(t, tb.guest("DELETE", "/api/stream/connections/%2F/"+url.PathEscape(an), nil), 404)

	closed := p.NotifyClose()
	want(t, tb.guest("DELETE", pPath, nil), 204)
	select {
	case e := <-closed:
		if e.Reason != stream.SocketClosed {
			t.Fatalf("close event %+v", e)
		}
	case <-time.After(wait):
		t.Fatal("the producer was not closed")
	}
	eventually(t, "the stream connection to leave the list", func() bool {
		return tb.guest("GET", pPath, nil).code == 404
	})
}
