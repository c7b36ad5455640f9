package streamproto

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/queues"
)

// The broker's list of connections (queues.Conn) as the management API
// reads it, and its forced closes, seen from the Go stream client.

// connNamed returns the listed connection whose client called itself
// name (the connection_name peer property).
func connNamed(t *testing.T, tb *testBroker, name string) queues.Conn {
	t.Helper()
	var found []queues.Conn
	for _, c := range tb.broker.Conns() {
		if c.Info().UserProvidedName == name {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d connections named %q, want 1", len(found), name)
	}
	return found[0]
}

// connsIn counts the listed connections in vhost.
func connsIn(tb *testBroker, vhost string) int {
	n := 0
	for _, c := range tb.broker.Conns() {
		if c.Info().VHost == vhost {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds, failing after e2eWait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closeEvent waits for the close event of a producer or consumer.
func closeEvent(t *testing.T, ch stream.ChannelClose) stream.Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(e2eWait):
		t.Fatal("no close event")
	}
	return stream.Event{}
}

// Ensure an open stream connection is listed with what RabbitMQ's
// /api/stream/connections shows, its publisher with its reference and
// counts, and its subscription with the offset it reached and its lag
// behind the committed end.
func TestConnInfoStream(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	before := time.Now().UnixMilli()
	env := newEnv(t, tb)
	if err := env.DeclareStream("info-s", nil); err != nil {
		t.Fatalf("DeclareStream: %v", err)
	}
	p := e2eNewProducer(t, env, "info-s", stream.NewProducerOptions().SetProducerName("ref-1").SetClientProvidedName("info-producer"))
	p.send(t, seq("m", 0, 10), nil)

	pc := connNamed(t, tb, "info-producer")
	info := pc.Info()
	if info.Protocol != "stream" || info.Type != "network" || info.User != "guest" || info.VHost != "/" || info.AuthMechanism != "PLAIN" {
		t.Errorf("protocol %q type %q user %q vhost %q mechanism %q", info.Protocol, info.Type, info.User, info.VHost, info.AuthMechanism)
	}
	wantName := net.JoinHostPort(info.PeerHost, strconv.Itoa(info.PeerPort)) + " -> " + tb.addr
	if info.Name != wantName || info.PeerHost != "127.0.0.1" || info.Host != "127.0.0.1" || info.Port != tb.port {
		t.Errorf("name %q (want %q), peer %s:%d, host %s:%d", info.Name, wantName, info.PeerHost, info.PeerPort, info.Host, info.Port)
	}
	if info.ConnectedAt < before || info.ConnectedAt > time.Now().UnixMilli() {
		t.Errorf("connected_at %d not within the test", info.ConnectedAt)
	}
	if info.ClientProperties["product"] != "RabbitMQ Stream" || info.ClientProperties["connection_name"] != "info-producer" {
		t.Errorf("client properties %v", info.ClientProperties)
	}
	if info.FrameMax == 0 || info.Heartbeat == 0 || info.ChannelMax != 0 || info.Channels != 0 || info.State != "running" || info.SSL {
		t.Errorf("frame_max %d timeout %d channel_max %d channels %d state %q ssl %v",
			info.FrameMax, info.Heartbeat, info.ChannelMax, info.Channels, info.State, info.SSL)
	}
	if info.RecvOct == 0 || info.RecvCnt == 0 || info.SendOct == 0 || info.SendCnt == 0 {
		t.Errorf("socket counters recv %d/%d send %d/%d", info.RecvOct, info.RecvCnt, info.SendOct, info.SendCnt)
	}
	if len(info.StreamPublishers) != 1 || len(info.StreamConsumers) != 0 {
		t.Fatalf("publishers %+v consumers %+v", info.StreamPublishers, info.StreamConsumers)
	}
	want := queues.StreamPublisherInfo{PublisherID: 0, Queue: queues.QueueRef{Name: "info-s", VHost: "/"}, Reference: "ref-1", Published: 10, Confirmed: 10}
	if got := info.StreamPublishers[0]; got != want {
		t.Errorf("publisher %+v, want %+v", got, want)
	}

	// A consumer with one chunk of credit reads the first batch (one
	// chunk) and stops: it lags by the second batch until it gives credit.
	c, sink := e2eSubscribe(t, env, "info-s", stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()).
		SetClientProvidedName("info-consumer").SetCreditStrategy(stream.ManualCreditStrategy).SetInitialCredits(1))
	sink.wait(t, 10)
	p.send(t, seq("m", 10, 15), nil)
	cc := connNamed(t, tb, "info-consumer")
	cons := cc.Info().StreamConsumers
	if len(cons) != 1 {
		t.Fatalf("consumers %+v", cons)
	}
	got := cons[0]
	if got.SubscriptionID != 0 || got.Queue != (queues.QueueRef{Name: "info-s", VHost: "/"}) || got.Offset != 9 || got.OffsetLag != 5 ||
		got.Consumed != 10 || got.Credits != 0 || !got.Active || got.ActivityStatus != "up" {
		t.Errorf("consumer after the first chunk: %+v; want offset 9 lag 5 consumed 10 credits 0 active up", got)
	}
	if err := c.Credit(1); err != nil {
		t.Fatal(err)
	}
	sink.wait(t, 15)
	eventually(t, "the second chunk to be counted", func() bool { return cc.Info().StreamConsumers[0].Consumed == 15 })
	if got := cc.Info().StreamConsumers[0]; got.Offset != 14 || got.OffsetLag != 0 {
		t.Errorf("consumer after the second chunk: offset %d lag %d, want 14 0", got.Offset, got.OffsetLag)
	}
	if got := pc.Info().StreamPublishers[0]; got.Published != 15 || got.Confirmed != 15 || got.Errored != 0 {
		t.Errorf("publisher after 15: %+v", got)
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the producer to be gone", func() bool { return len(pc.Info().StreamPublishers) == 0 })
}

// Ensure single active consumers are listed with their properties, the
// active one "single_active" and the other "waiting", as RabbitMQ shows
// them.
func TestConnInfoStreamSingleActiveConsumer(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	if err := env.DeclareStream("sac-s", nil); err != nil {
		t.Fatalf("DeclareStream: %v", err)
	}
	sac := func(name string) *stream.ConsumerOptions {
		return stream.NewConsumerOptions().SetConsumerName("grp").SetClientProvidedName(name).
			SetSingleActiveConsumer(stream.NewSingleActiveConsumer(func(string, bool) stream.OffsetSpecification {
				return stream.OffsetSpecification{}.First()
			}))
	}
	e2eSubscribe(t, env, "sac-s", sac("sac-1"))
	first := connNamed(t, tb, "sac-1")
	eventually(t, "the first consumer to be active", func() bool {
		cs := first.Info().StreamConsumers
		return len(cs) == 1 && cs[0].Active
	})
	e2eSubscribe(t, env, "sac-s", sac("sac-2"))
	a, w := first.Info().StreamConsumers[0], connNamed(t, tb, "sac-2").Info().StreamConsumers[0]
	if a.ActivityStatus != "single_active" || a.Properties["single-active-consumer"] != "true" || a.Properties["name"] != "grp" {
		t.Errorf("active consumer %+v", a)
	}
	if w.Active || w.ActivityStatus != "waiting" || w.OffsetLag != 0 {
		t.Errorf("waiting consumer %+v", w)
	}
}

// Ensure CloseForced drops a stream connection as RabbitMQ's stream
// reader does on the management API's DELETE (the socket closes; no
// Close command), and it leaves the list.
func TestConnCloseForcedStream(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	if err := env.DeclareStream("forced-s", nil); err != nil {
		t.Fatalf("DeclareStream: %v", err)
	}
	p := e2eNewProducer(t, env, "forced-s", stream.NewProducerOptions().SetClientProvidedName("forced-producer"))
	closed := p.NotifyClose()
	p.send(t, seq("m", 0, 3), nil)
	connNamed(t, tb, "forced-producer").CloseForced("Closed via management plugin")
	if e := closeEvent(t, closed); e.Reason != stream.SocketClosed {
		t.Fatalf("close event %+v, want reason %q", e, stream.SocketClosed)
	}
	eventually(t, "the connection to leave the list", func() bool {
		for _, c := range tb.broker.Conns() {
			if c.Info().UserProvidedName == "forced-producer" {
				return false
			}
		}
		return true
	})
	// The environment's other connection is untouched.
	if err := env.DeclareStream("after-forced", nil); err != nil {
		t.Fatalf("DeclareStream after the forced close: %v", err)
	}
}

// Ensure deleting a vhost closes the stream connections in it and no
// others.
func TestConnDeleteVHostClosesStream(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	if err := tb.broker.AddVHost("doomed"); err != nil {
		t.Fatal(err)
	}
	if err := tb.broker.SetPermissions("guest", "doomed", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	in := newEnv(t, tb, func(o *stream.EnvironmentOptions) { o.SetVHost("doomed") })
	if err := in.DeclareStream("s", nil); err != nil {
		t.Fatalf("DeclareStream: %v", err)
	}
	p := e2eNewProducer(t, in, "s", stream.NewProducerOptions().SetClientProvidedName("doomed-producer"))
	closed := p.NotifyClose()
	out := newEnv(t, tb)
	if err := out.DeclareStream("o", nil); err != nil {
		t.Fatalf("DeclareStream: %v", err)
	}
	op := e2eNewProducer(t, out, "o", stream.NewProducerOptions().SetClientProvidedName("out-producer"))
	outClosed := op.NotifyClose()

	if err := tb.broker.DeleteVHost("doomed"); err != nil {
		t.Fatalf("DeleteVHost: %v", err)
	}
	// The socket closes; the stream's deletion may be told first.
	if e := closeEvent(t, closed); e.Reason != stream.SocketClosed && e.Reason != stream.MetaDataUpdate {
		t.Fatalf("close event %+v", e)
	}
	eventually(t, "no connection left in doomed", func() bool { return connsIn(tb, "doomed") == 0 })
	op.send(t, seq("m", 0, 3), nil)
	select {
	case e := <-outClosed:
		t.Fatalf("the producer on / closed: %+v", e)
	default:
	}
	connNamed(t, tb, "out-producer")
}

// Ensure deleting a user closes the user's stream connections and no
// others.
func TestConnDeleteUserClosesStream(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	if err := tb.broker.AddUser("alice", "secret"); err != nil {
		t.Fatal(err)
	}
	if err := tb.broker.SetPermissions("alice", "/", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
		t.Fatal(err)
	}
	alice := newEnv(t, tb, func(o *stream.EnvironmentOptions) { o.SetUser("alice").SetPassword("secret") })
	if err := alice.DeclareStream("s", nil); err != nil {
		t.Fatalf("DeclareStream: %v", err)
	}
	p := e2eNewProducer(t, alice, "s", stream.NewProducerOptions().SetClientProvidedName("alice-producer"))
	closed := p.NotifyClose()
	guest := newEnv(t, tb)
	gp := e2eNewProducer(t, guest, "s", stream.NewProducerOptions().SetClientProvidedName("guest-producer"))
	guestClosed := gp.NotifyClose()

	if err := tb.broker.DeleteUser("alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if e := closeEvent(t, closed); e.Reason != stream.SocketClosed {
		t.Fatalf("close event %+v, want reason %q", e, stream.SocketClosed)
	}
	eventually(t, "alice's connections to leave the list", func() bool {
		for _, c := range tb.broker.Conns() {
			if c.Info().User == "alice" {
				return false
			}
		}
		return true
	})
	gp.send(t, seq("m", 0, 3), nil)
	select {
	case e := <-guestClosed:
		t.Fatalf("guest's producer closed: %+v", e)
	default:
	}
}

// Ensure Info may run while the connection works: publishers and
// subscriptions come and go while messages flow (run with -race).
func TestConnInfoStreamConcurrent(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	env := newEnv(t, tb)
	if err := env.DeclareStream("busy-s", nil); err != nil {
		t.Fatalf("DeclareStream: %v", err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, c := range tb.broker.Conns() {
				c.Info()
			}
		}
	}()
	for i := 0; i < 5; i++ {
		p := e2eNewProducer(t, env, "busy-s", nil)
		p.send(t, seq("m", 0, 50), nil)
		c, sink := e2eSubscribe(t, env, "busy-s", e2eFrom(stream.OffsetSpecification{}.First()))
		sink.wait(t, 50*(i+1))
		c.Close()
		p.Close()
	}
	close(stop)
	<-done
}
