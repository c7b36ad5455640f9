package streamproto

import (
	"errors"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/queues"
)

// End-to-end tests of connection-level behaviour with the real Go stream
// client: heartbeats, authentication and permissions, broker restarts and
// stream deletion under attached clients.

// e2eAttached returns the broker's connections that have a publisher or a
// subscription on stream.
func (tb *testBroker) e2eAttached(name string) map[*conn]bool {
	out := map[*conn]bool{}
	for _, nc := range tb.srv.conns.Conns() {
		c := nc.(*conn)
		c.mu.Lock()
		for _, p := range c.mu.publishers {
			out[c] = out[c] || p.stream == name
		}
		for _, s := range c.mu.subs {
			out[c] = out[c] || s.stream == name
		}
		c.mu.Unlock()
		if !out[c] {
			delete(out, c)
		}
	}
	return out
}

// e2eConnect opens an environment as user and returns NewEnvironment's error,
// closing the environment if there is one.
func e2eConnect(tb *testBroker, user, password string) error {
	o := stream.NewEnvironmentOptions().SetHost(tb.host).SetPort(tb.port).SetUser(user).SetPassword(password).
		SetAddressResolver(stream.AddressResolver{Host: tb.host, Port: tb.port})
	env, err := stream.NewEnvironment(o)
	if env != nil {
		env.Close()
	}
	return err
}

// e2eAsUser is a newEnv option connecting as user.
func e2eAsUser(user, password string) func(*stream.EnvironmentOptions) {
	return func(o *stream.EnvironmentOptions) { o.SetUser(user).SetPassword(password) }
}

// Ensure heartbeats keep an idle connection open: with a 1 s heartbeat
// (the broker offers 1 s, the client asks for 3 s and takes the smaller)
// a producer and a consumer stay idle for longer than either side's
// timeout, then publish and consume on the same connections.
func TestE2EHeartbeatKeepsIdleConnectionAlive(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{heartbeat: 1})
	env := newEnv(t, tb, func(o *stream.EnvironmentOptions) { o.SetRequestedHeartbeat(3 * time.Second) })
	e2eDeclare(t, env, "hb", nil)
	p := e2eNewProducer(t, env, "hb", nil)
	pClosed := p.NotifyClose()
	c, sk := e2eSubscribe(t, env, "hb", e2eFrom(stream.OffsetSpecification{}.Next()))
	cClosed := c.NotifyClose()
	p.send(t, seq("before", 0, 3), nil)
	sk.wait(t, 3)

	before := tb.e2eAttached("hb")
	if len(before) != 2 {
		t.Fatalf("%d connections attached to the stream, want 2 (producer and consumer)", len(before))
	}
	for c := range before {
		if hb := time.Duration(c.heartbeat.Load()); hb != time.Second {
			t.Fatalf("negotiated heartbeat %v, want 1s", hb)
		}
	}

	// Without heartbeats the broker drops a connection after 2×1 s + 1 s
	// of silence, and the client closes after two missed 1 s ticks.
	time.Sleep(4 * time.Second)

	select {
	case ev := <-pClosed:
		t.Fatalf("producer closed while idle: %+v", ev)
	case ev := <-cClosed:
		t.Fatalf("consumer closed while idle: %+v", ev)
	default:
	}
	after := tb.e2eAttached("hb")
	for c := range before {
		if !after[c] {
			t.Fatalf("connection %v was dropped while idle", c.nc.RemoteAddr())
		}
	}
	p.send(t, seq("after", 0, 3), nil)
	bodies, _ := sk.wait(t, 6)
	e2eWantBodies(t, "after idling", bodies, append(seq("before", 0, 3), seq("after", 0, 3)...))
}

// Ensure authentication and permissions are enforced: a bad password or an
// unknown user cannot connect, a user without access to the vhost cannot
// open it, and a user only gets the configure, write and read access its
// permissions give.
func TestE2EAuthenticationAndPermissions(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	admin := newEnv(t, tb)
	e2eDeclare(t, admin, "open", nil)
	e2eDeclare(t, admin, "secret", nil)
	e2eNewProducer(t, admin, "secret", nil).send(t, seq("s", 0, 3), nil)

	e2eWantErr(t, "bad password", e2eConnect(tb, "guest", "wrong"), stream.AuthenticationFailure)
	e2eWantErr(t, "unknown user", e2eConnect(tb, "mallory", "guest"), stream.AuthenticationFailure)
	if err := tb.broker.AddUser("nobody", "pw"); err != nil {
		t.Fatal(err)
	}
	e2eWantErr(t, "user without vhost access", e2eConnect(tb, "nobody", "pw"), stream.VirtualHostAccessFailure)

	users := map[string]queues.Permissions{
		"bob":    {Configure: "^$", Write: "^open$", Read: "^open$"},
		"writer": {Configure: "^$", Write: "^secret$", Read: "^$"},
		"reader": {Configure: "^$", Write: "^$", Read: "^secret$"},
	}
	for u, perms := range users {
		if err := tb.broker.AddUser(u, "pw"); err != nil {
			t.Fatal(err)
		}
		if err := tb.broker.SetPermissions(u, "/", perms); err != nil {
			t.Fatal(err)
		}
	}

	// bob works on "open" only.
	bob := newEnv(t, tb, e2eAsUser("bob", "pw"))
	e2eWantErr(t, "bob declares", bob.DeclareStream("bobs", nil), stream.CodeAccessRefused)
	e2eWantErr(t, "bob deletes secret", bob.DeleteStream("secret"), stream.CodeAccessRefused)
	if ok, err := admin.StreamExists("secret"); err != nil || !ok {
		t.Fatalf("secret exists = %v, %v after a refused delete", ok, err)
	}
	_, err := bob.NewProducer("secret", nil)
	e2eWantErr(t, "bob produces to secret", err, stream.CodeAccessRefused)
	_, err = bob.NewConsumer("secret", newE2ESink().handle, nil)
	e2eWantErr(t, "bob consumes secret", err, stream.CodeAccessRefused)
	_, err = bob.StreamStats("secret")
	e2eWantErr(t, "bob's stream stats of secret", err, stream.CodeAccessRefused)
	_, err = bob.QueryOffset("c", "secret")
	e2eWantErr(t, "bob queries an offset on secret", err, stream.CodeAccessRefused)
	e2eNewProducer(t, bob, "open", nil).send(t, seq("o", 0, 3), nil)
	_, sk := e2eSubscribe(t, bob, "open", e2eFrom(stream.OffsetSpecification{}.First()))
	bodies, _ := sk.wait(t, 3)
	e2eWantBodies(t, "bob on open", bodies, seq("o", 0, 3))

	// writer may publish to secret but not subscribe (Subscribe is refused
	// after Metadata succeeds).
	writer := newEnv(t, tb, e2eAsUser("writer", "pw"))
	e2eNewProducer(t, writer, "secret", nil).send(t, seq("s", 3, 5), nil)
	_, err = writer.NewConsumer("secret", newE2ESink().handle, e2eFrom(stream.OffsetSpecification{}.First()))
	e2eWantErr(t, "writer consumes secret", err, stream.CodeAccessRefused)

	// reader may subscribe to secret but not declare a publisher.
	reader := newEnv(t, tb, e2eAsUser("reader", "pw"))
	_, err = reader.NewProducer("secret", nil)
	e2eWantErr(t, "reader produces to secret", err, stream.CodeAccessRefused)
	_, sk = e2eSubscribe(t, reader, "secret", e2eFrom(stream.OffsetSpecification{}.First()))
	bodies, _ = sk.wait(t, 5)
	e2eWantBodies(t, "reader on secret", bodies, seq("s", 0, 5))
}

// Ensure a restarted broker keeps what it confirmed: the messages, stored
// offsets and producer sequences (so deduplication continues across the
// restart), and its catalog (deleted streams stay deleted).
func TestE2EBrokerRestartKeepsState(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "s", nil)
	named := stream.NewProducerOptions().SetProducerName("p")
	want := seq("m", 1, 31)
	e2eNewProducer(t, env, "s", named).send(t, want, e2eIDs(1, 31))
	c, sk := e2eSubscribe(t, env, "s", e2eFrom(stream.OffsetSpecification{}.First()).SetConsumerName("c"))
	sk.wait(t, 30)
	if err := c.StoreCustomOffset(17); err != nil {
		t.Fatalf("StoreCustomOffset: %v", err)
	}
	if got, err := c.QueryOffset(); err != nil || got != 17 {
		t.Fatalf("QueryOffset = %d, %v; want 17", got, err)
	}
	// A deleted stream stays deleted; one deleted and declared again keeps
	// only its new data.
	e2eDeclare(t, env, "gone", nil)
	e2eDeclare(t, env, "again", nil)
	old := e2eNewProducer(t, env, "again", nil)
	old.send(t, seq("old", 0, 4), nil)
	// Closed first: a producer closed by the deletion's MetadataUpdate
	// closes its connection in the background, and the client may hand
	// that connection to the next producer (a client race).
	if err := old.Close(); err != nil {
		t.Fatalf("producer Close: %v", err)
	}
	for _, name := range []string{"gone", "again"} {
		if err := env.DeleteStream(name); err != nil {
			t.Fatalf("DeleteStream(%s): %v", name, err)
		}
	}
	e2eDeclare(t, env, "again", nil)
	e2eNewProducer(t, env, "again", nil).send(t, seq("new", 0, 2), nil)
	env.Close()
	tb.stop()

	tb2 := startBroker(t, brokerOpts{dir: tb.dir})
	env2 := newEnv(t, tb2)
	_, sk = e2eSubscribe(t, env2, "s", e2eFrom(stream.OffsetSpecification{}.First()))
	bodies, offsets := sk.wait(t, 30)
	e2eWantBodies(t, "after restart", bodies, want)
	e2eWantOffsets(t, "after restart", offsets, 0)
	if got, err := env2.QueryOffset("c", "s"); err != nil || got != 17 {
		t.Fatalf("QueryOffset after restart = %d, %v; want 17", got, err)
	}
	if got, err := env2.QuerySequence("p", "s"); err != nil || got != 30 {
		t.Fatalf("QuerySequence after restart = %d, %v; want 30", got, err)
	}

	if ok, err := env2.StreamExists("gone"); err != nil || ok {
		t.Fatalf("deleted stream exists after restart = %v, %v", ok, err)
	}
	_, again := e2eSubscribe(t, env2, "again", e2eFrom(stream.OffsetSpecification{}.First()))
	bodies, offsets = again.wait(t, 2)
	e2eWantBodies(t, "redeclared stream after restart", bodies, seq("new", 0, 2))
	e2eWantOffsets(t, "redeclared stream after restart", offsets, 0)

	// The producer's sequence survived: ids up to 30 are duplicates.
	p := e2eNewProducer(t, env2, "s", named)
	if last, err := p.GetLastPublishingId(); err != nil || last != 30 {
		t.Fatalf("GetLastPublishingId after restart = %d, %v; want 30", last, err)
	}
	p.send(t, seq("n", 26, 36), e2eIDs(26, 36))
	// The consumer resumes after its stored offset and gets exactly the rest.
	_, sk = e2eSubscribe(t, env2, "s", e2eFrom(stream.OffsetSpecification{}.Offset(17+1)).SetConsumerName("c"))
	bodies, _ = sk.wait(t, 17)
	e2eWantBodies(t, "resumed after restart", bodies, append(want[18:], seq("n", 31, 36)...))
	if got, err := env2.QuerySequence("p", "s"); err != nil || got != 35 {
		t.Fatalf("QuerySequence = %d, %v; want 35", got, err)
	}
}

// Ensure deleting a stream under an attached producer and consumer tells
// both (MetadataUpdate: the client closes them with reason
// MetaDataUpdate), drops them on the broker and removes the stream.
func TestE2EDeleteStreamWhileAttached(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	e2eDeclare(t, env, "s", nil)
	e2eDeclare(t, env, "other", nil)
	p := e2eNewProducer(t, env, "s", nil)
	pClosed := p.NotifyClose()
	c, sk := e2eSubscribe(t, env, "s", e2eFrom(stream.OffsetSpecification{}.First()))
	cClosed := c.NotifyClose()
	// A consumer on another stream is not affected.
	oc, osk := e2eSubscribe(t, env, "other", e2eFrom(stream.OffsetSpecification{}.First()))
	ocClosed := oc.NotifyClose()
	p.send(t, seq("m", 0, 3), nil)
	sk.wait(t, 3)
	if n := len(tb.e2eAttached("s")); n != 2 {
		t.Fatalf("%d connections attached to s, want 2", n)
	}

	if err := newEnv(t, tb).DeleteStream("s"); err != nil {
		t.Fatalf("DeleteStream: %v", err)
	}
	for what, ch := range map[string]stream.ChannelClose{"producer": pClosed, "consumer": cClosed} {
		select {
		case ev := <-ch:
			if ev.Reason != stream.MetaDataUpdate || ev.StreamName != "s" {
				t.Fatalf("%s closed with %+v, want reason %q on s", what, ev, stream.MetaDataUpdate)
			}
		case <-time.After(e2eWait):
			t.Fatalf("%s not closed after the stream was deleted", what)
		}
	}
	if n := len(tb.e2eAttached("s")); n != 0 {
		t.Fatalf("%d connections still attached to the deleted stream", n)
	}
	if ok, err := env.StreamExists("s"); err != nil || ok {
		t.Fatalf("StreamExists after delete = %v, %v; want false", ok, err)
	}
	if _, err := tb.broker.Stream("/", "s"); !errors.Is(err, queues.ErrNotFound) {
		t.Fatalf("broker Stream after delete: %v, want ErrNotFound", err)
	}
	if bodies, _ := sk.snapshot(); len(bodies) != 3 {
		t.Fatalf("deleted stream's consumer got %d messages, want 3", len(bodies))
	}

	// The other stream's consumer still works. The new producer is on
	// another environment: the client closes the deleted stream's
	// producer connection in the background and could otherwise hand it
	// to this producer (a client race).
	e2eNewProducer(t, newEnv(t, tb), "other", nil).send(t, seq("o", 0, 2), nil)
	bodies, _ := osk.wait(t, 2)
	e2eWantBodies(t, "other stream", bodies, seq("o", 0, 2))
	select {
	case ev := <-ocClosed:
		t.Fatalf("consumer of another stream closed: %+v", ev)
	default:
	}
}
