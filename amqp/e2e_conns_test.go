package amqp

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/queues"
)

// The broker's list of connections (queues.Conn) as the management API
// reads it, and its forced closes, seen from amqp091-go.

// onlyConn returns the one connection the broker lists.
func onlyConn(t *testing.T, tb *testBroker) queues.Conn {
	t.Helper()
	cs := tb.broker.Conns()
	if len(cs) != 1 {
		t.Fatalf("broker lists %d connections, want 1", len(cs))
	}
	return cs[0]
}

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

// Ensure an open connection is listed with what RabbitMQ's
// /api/connections shows (name, user, vhost, addresses, client
// properties, negotiated limits, socket counters) and its channels and
// consumers with /api/channels' and /api/consumers' fields, and that it
// leaves the list when it closes.
func TestConnInfo(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	before := time.Now().UnixMilli()
	c, err := amqp091.DialConfig(tb.url(), amqp091.Config{
		Heartbeat:  10 * time.Second,
		Locale:     "en_US",
		Properties: amqp091.Table{"connection_name": "info-test", "product": "info-product"},
	})
	must(t, err)
	defer c.Close()
	info := onlyConn(t, tb).Info()

	local := c.LocalAddr().(*net.TCPAddr)
	_, srvPort, _ := net.SplitHostPort(tb.addr)
	wantName := "127.0.0.1:" + strconv.Itoa(local.Port) + " -> " + tb.addr
	if info.Name != wantName || info.Protocol != "AMQP 0-9-1" || info.Type != "network" {
		t.Errorf("name %q protocol %q type %q, want %q, AMQP 0-9-1, network", info.Name, info.Protocol, info.Type, wantName)
	}
	if info.User != "guest" || info.VHost != "/" || info.AuthMechanism != "PLAIN" {
		t.Errorf("user %q vhost %q mechanism %q", info.User, info.VHost, info.AuthMechanism)
	}
	if info.PeerHost != "127.0.0.1" || info.PeerPort != local.Port || info.Host != "127.0.0.1" || strconv.Itoa(info.Port) != srvPort {
		t.Errorf("peer %s:%d host %s:%d", info.PeerHost, info.PeerPort, info.Host, info.Port)
	}
	if info.ConnectedAt < before || info.ConnectedAt > time.Now().UnixMilli() {
		t.Errorf("connected_at %d not within the test", info.ConnectedAt)
	}
	caps, _ := info.ClientProperties["capabilities"].(map[string]any)
	if info.ClientProperties["product"] != "info-product" || caps["publisher_confirms"] != true || info.UserProvidedName != "info-test" {
		t.Errorf("client properties %v, user-provided name %q", info.ClientProperties, info.UserProvidedName)
	}
	if info.FrameMax != DefaultFrameMax || info.ChannelMax != DefaultChannelMax || info.Heartbeat != 10 {
		t.Errorf("frame_max %d channel_max %d timeout %d", info.FrameMax, info.ChannelMax, info.Heartbeat)
	}
	if info.State != "running" || info.SSL || info.Channels != 0 || len(info.AMQPChannels) != 0 {
		t.Errorf("state %q ssl %v channels %d %v", info.State, info.SSL, info.Channels, info.AMQPChannels)
	}
	if info.RecvOct == 0 || info.RecvCnt == 0 || info.SendOct == 0 || info.SendCnt == 0 {
		t.Errorf("socket counters recv %d/%d send %d/%d after the handshake", info.RecvOct, info.RecvCnt, info.SendOct, info.SendCnt)
	}

	// Channel 1 consumes with a prefetch and holds three unacked
	// deliveries; channel 2 confirms, with a global prefetch; channel 3
	// is transactional.
	ch1, err := c.Channel()
	must(t, err)
	must(t, ch1.Qos(7, 0, false))
	_, err = ch1.QueueDeclare("info-q", false, false, false, false, nil)
	must(t, err)
	ds, err := ch1.Consume("info-q", "info-tag", false, false, false, false, amqp091.Table{"x-priority": int32(3)})
	must(t, err)
	ch2, err := c.Channel()
	must(t, err)
	must(t, ch2.Confirm(false))
	must(t, ch2.Qos(11, 0, true))
	ch3, err := c.Channel()
	must(t, err)
	must(t, ch3.Tx())
	for _, b := range []string{"a", "b", "c"} {
		must(t, ch2.PublishWithContext(context.Background(), "", "info-q", false, false, amqp091.Publishing{Body: []byte(b)}))
	}
	recvN(t, ds, 3)

	recvBefore := info.RecvOct
	info = onlyConn(t, tb).Info()
	if info.Channels != 3 || len(info.AMQPChannels) != 3 {
		t.Fatalf("channels %d, details %d, want 3", info.Channels, len(info.AMQPChannels))
	}
	if info.RecvOct <= recvBefore {
		t.Errorf("recv_oct %d, was %d before the publishes", info.RecvOct, recvBefore)
	}
	c1, c2, c3 := info.AMQPChannels[0], info.AMQPChannels[1], info.AMQPChannels[2]
	if c1.Number != 1 || c1.Name != wantName+" (1)" || c1.User != "guest" || c1.VHost != "/" || c1.State != "running" {
		t.Errorf("channel 1: %+v", c1)
	}
	if c1.PrefetchCount != 7 || c1.ConsumerCount != 1 || c1.MessagesUnacknowledged != 3 || c1.Confirm || c1.Transactional {
		t.Errorf("channel 1: prefetch %d consumers %d unacked %d confirm %v tx %v, want 7 1 3 false false",
			c1.PrefetchCount, c1.ConsumerCount, c1.MessagesUnacknowledged, c1.Confirm, c1.Transactional)
	}
	if len(c1.Consumers) != 1 {
		t.Fatalf("channel 1 consumers: %+v", c1.Consumers)
	}
	cs := c1.Consumers[0]
	if cs.ConsumerTag != "info-tag" || cs.Queue != (queues.QueueRef{Name: "info-q", VHost: "/"}) || !cs.AckRequired || cs.Exclusive ||
		cs.PrefetchCount != 7 || cs.Arguments["x-priority"] != int32(3) || !cs.Active || cs.ActivityStatus != "up" {
		t.Errorf("consumer: %+v", cs)
	}
	if c2.Number != 2 || !c2.Confirm || c2.GlobalPrefetchCount != 11 || c2.PrefetchCount != 0 || c2.ConsumerCount != 0 {
		t.Errorf("channel 2: %+v", c2)
	}
	if c3.Number != 3 || !c3.Transactional || c3.Confirm {
		t.Errorf("channel 3: %+v", c3)
	}

	must(t, ch3.Close())
	if info = onlyConn(t, tb).Info(); info.Channels != 2 {
		t.Errorf("after closing channel 3: %d channels", info.Channels)
	}
	must(t, c.Close())
	eventually(t, "the closed connection to leave the list", func() bool { return len(tb.broker.Conns()) == 0 })
}

// Ensure a consumer of a single-active-consumer queue is listed active
// ("single_active") and the next one waiting, as RabbitMQ shows them.
func TestConnInfoSingleActiveConsumer(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	_, ch := tb.channel(t)
	_, err := ch.QueueDeclare("sac-q", false, false, false, false, amqp091.Table{"x-single-active-consumer": true})
	must(t, err)
	_, err = ch.Consume("sac-q", "first", false, false, false, false, nil)
	must(t, err)
	_, err = ch.Consume("sac-q", "second", false, false, false, false, nil)
	must(t, err)
	cons := onlyConn(t, tb).Info().AMQPChannels[0].Consumers
	if len(cons) != 2 || cons[0].ConsumerTag != "first" || cons[1].ConsumerTag != "second" {
		t.Fatalf("consumers %+v", cons)
	}
	if !cons[0].Active || cons[0].ActivityStatus != "single_active" || cons[1].Active || cons[1].ActivityStatus != "waiting" {
		t.Errorf("first %v %q, second %v %q; want true single_active, false waiting",
			cons[0].Active, cons[0].ActivityStatus, cons[1].Active, cons[1].ActivityStatus)
	}
}

// Ensure CloseForced sends connection.close 320 "CONNECTION_FORCED -
// <reason>" (what rabbitmqctl close_connection and the management API's
// DELETE send), requeues the connection's unacked deliveries, deletes its
// exclusive queues and drops it from the list.
func TestConnCloseForced(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := tb.channel(t)
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	_, err := ch.QueueDeclare("forced-q", false, false, false, false, nil)
	must(t, err)
	_, err = ch.QueueDeclare("forced-excl", false, false, true, false, nil)
	must(t, err)
	ds, err := ch.Consume("forced-q", "", false, false, false, false, nil)
	must(t, err)
	for _, b := range []string{"a", "b"} {
		must(t, ch.PublishWithContext(context.Background(), "", "forced-q", false, false, amqp091.Publishing{Body: []byte(b)}))
	}
	recvN(t, ds, 2)

	onlyConn(t, tb).CloseForced("Closed via management plugin")
	e := closeReason(t, closed)
	if e.Code != 320 || e.Reason != "CONNECTION_FORCED - Closed via management plugin" || !e.Server {
		t.Fatalf("close: %d %q server=%v, want 320 \"CONNECTION_FORCED - Closed via management plugin\" from the server", e.Code, e.Reason, e.Server)
	}
	eventually(t, "the connection to leave the list", func() bool { return len(tb.broker.Conns()) == 0 })

	_, other := tb.channel(t)
	q, err := other.QueueDeclarePassive("forced-q", false, false, false, false, nil)
	must(t, err)
	if q.Messages != 2 {
		t.Errorf("forced-q holds %d ready messages, want the 2 unacked requeued", q.Messages)
	}
	if _, err := tb.broker.Queue("/", "forced-excl"); err == nil {
		t.Error("the exclusive queue outlived its connection")
	}
}

// Ensure deleting a vhost closes the connections in it with RabbitMQ's
// 320 "CONNECTION_FORCED - vhost 'v' is deleted", and no others.
func TestConnDeleteVHostCloses(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	must(t, tb.broker.AddVHost("doomed"))
	must(t, tb.broker.SetPermissions("guest", "doomed", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}))
	in, err := amqp091.Dial("amqp://guest:guest@" + tb.addr + "/doomed")
	must(t, err)
	defer in.Close()
	inClosed := in.NotifyClose(make(chan *amqp091.Error, 1))
	out := tb.dial(t)
	outClosed := out.NotifyClose(make(chan *amqp091.Error, 1))

	must(t, tb.broker.DeleteVHost("doomed"))
	amqpErr(t, closeReason(t, inClosed), 320, "CONNECTION_FORCED - vhost 'doomed' is deleted")
	select {
	case e := <-outClosed:
		t.Fatalf("the connection to / closed: %v", e)
	default:
	}
	if _, err := out.Channel(); err != nil {
		t.Fatalf("the connection to / is unusable: %v", err)
	}
}

// Ensure deleting a user closes the user's connections with RabbitMQ's
// 320 "CONNECTION_FORCED - user 'u' is deleted", and no others.
func TestConnDeleteUserCloses(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	must(t, tb.broker.AddUser("alice", "secret"))
	must(t, tb.broker.SetPermissions("alice", "/", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}))
	alice, err := amqp091.Dial("amqp://alice:secret@" + tb.addr + "/")
	must(t, err)
	defer alice.Close()
	aliceClosed := alice.NotifyClose(make(chan *amqp091.Error, 1))
	guest := tb.dial(t)
	guestClosed := guest.NotifyClose(make(chan *amqp091.Error, 1))

	must(t, tb.broker.DeleteUser("alice"))
	amqpErr(t, closeReason(t, aliceClosed), 320, "CONNECTION_FORCED - user 'alice' is deleted")
	select {
	case e := <-guestClosed:
		t.Fatalf("guest's connection closed: %v", e)
	default:
	}
	if _, err := guest.Channel(); err != nil {
		t.Fatalf("guest's connection is unusable: %v", err)
	}
}

// Ensure CloseForced reaches a connection whose reader is busy with a
// stream of publishes (its deadline is moved on every few frames) and
// whose client sees the close while still publishing.
func TestConnCloseForcedWhilePublishing(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := tb.channel(t)
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	_, err := ch.QueueDeclare("busy-q", false, false, false, false, nil)
	must(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if err := ch.PublishWithContext(context.Background(), "", "busy-q", false, false, amqp091.Publishing{Body: make([]byte, 512)}); err != nil {
				return // the connection is closed
			}
		}
	}()
	eventually(t, "publishes to arrive", func() bool {
		q, err := tb.broker.Queue("/", "busy-q")
		return err == nil && q.Stats().Ready > 100
	})
	onlyConn(t, tb).CloseForced("busy")
	amqpErr(t, closeReason(t, closed), 320, "CONNECTION_FORCED - busy")
	<-done
	eventually(t, "the connection to leave the list", func() bool { return len(tb.broker.Conns()) == 0 })
}

// Ensure Info may run while the connection works: channels open and
// close, consumers come and go, messages are published, delivered and
// acked (run with -race).
func TestConnInfoConcurrent(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c := tb.dial(t)
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
			for _, conn := range tb.broker.Conns() {
				conn.Info()
			}
		}
	}()
	for i := 0; i < 20; i++ {
		ch, err := c.Channel()
		must(t, err)
		must(t, ch.Qos(5, 0, i%2 == 0))
		if i%3 == 0 {
			must(t, ch.Confirm(false))
		}
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		must(t, err)
		ds, err := ch.Consume(q.Name, "", false, false, false, false, nil)
		must(t, err)
		for j := 0; j < 10; j++ {
			must(t, ch.PublishWithContext(context.Background(), "", q.Name, false, false, amqp091.Publishing{Body: []byte("x")}))
		}
		for j := 0; j < 10; j++ {
			must(t, recv(t, ds).Ack(false))
		}
		must(t, ch.Close())
	}
	close(stop)
	<-done
}
