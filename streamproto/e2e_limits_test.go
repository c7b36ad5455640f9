package streamproto

import (
	"errors"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto/wire"
)

// Tests of the limits as RabbitMQ's stream reader enforces them (issue
// 18): Open refused with VIRTUAL_HOST_ACCESS_FAILURE over a connection
// limit, Create with PRECONDITION_FAILED over max-queues, the handshake
// bounded per step and refusals answered after the silent-close delay.

func setLimits(t *testing.T, b *queues.Broker, vhost string, vl map[string]int64, user string, ul map[string]int64) {
	t.Helper()
	if vl != nil {
		v, err := b.GetVHost(vhost)
		if err != nil {
			t.Fatal(err)
		}
		v.Limits = vl
		if _, err := b.PutVHost(v); err != nil {
			t.Fatal(err)
		}
	}
	if ul != nil {
		u, err := b.GetUser(user)
		if err != nil {
			t.Fatal(err)
		}
		u.Limits = ul
		if err := b.PutUser(u); err != nil {
			t.Fatal(err)
		}
	}
}

// openCode runs the handshake up to Open "/" and returns Open's code.
func openCode(t *testing.T, tb *testBroker) (*rawConn, wire.Code) {
	t.Helper()
	c := rawDial(t, tb.addr)
	c.peerProperties()
	c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
	if code := c.authenticate("PLAIN", plain("guest", "guest")); code != wire.CodeOK {
		t.Fatalf("SaslAuthenticate: code 0x%02x", uint16(code))
	}
	c.tune(0)
	code, _ := c.call(wire.KeyOpen, rawBuf(nil).str("/"))
	return c, code
}

// Ensure a vhost's and a user's max-connections refuse the Open over
// them with VIRTUAL_HOST_ACCESS_FAILURE and close the connection, and
// that the Go client's environment reports it.
func TestLimitStreamMaxConnections(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	setLimits(t, tb.broker, "/", map[string]int64{queues.LimitMaxConnections: 1}, "", nil)
	first := rawOpen(t, tb, 0)
	c, code := openCode(t, tb)
	if code != wire.CodeVirtualHostAccessFailure {
		t.Fatalf("Open over the vhost limit: code 0x%02x", uint16(code))
	}
	c.expectClosed()
	o := stream.NewEnvironmentOptions().SetHost(tb.host).SetPort(tb.port).SetUser("guest").SetPassword("guest").SetMaxProducersPerClient(1)
	if _, err := stream.NewEnvironment(o); !errors.Is(err, stream.VirtualHostAccessFailure) {
		t.Fatalf("NewEnvironment over the limit: %v", err)
	}
	first.nc.Close()

	setLimits(t, tb.broker, "/", map[string]int64{}, "guest", map[string]int64{queues.LimitMaxConnections: 1})
	deadline := time.Now().Add(rawTimeout)
	for len(tb.broker.Conns()) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	rawOpen(t, tb, 0)
	if _, code := openCode(t, tb); code != wire.CodeVirtualHostAccessFailure {
		t.Fatalf("Open over the user limit: code 0x%02x", uint16(code))
	}
}

// Ensure a vhost's max-queues refuses Create (PRECONDITION_FAILED) and
// a super stream whose partitions would exceed it, creating none of
// them, and counts AMQP queues and streams alike.
func TestLimitStreamMaxQueues(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	setLimits(t, tb.broker, "/", map[string]int64{queues.LimitMaxQueues: 2}, "", nil)
	env := newEnv(t, tb)
	if err := env.DeclareStream("s1", nil); err != nil {
		t.Fatal(err)
	}
	if err := env.DeclareStream("s2", nil); err != nil {
		t.Fatal(err)
	}
	if err := env.DeclareStream("s3", nil); !errors.Is(err, stream.PreconditionFailed) {
		t.Fatalf("third stream: %v", err)
	}
	if err := env.DeleteStream("s2"); err != nil {
		t.Fatal(err)
	}
	err := env.DeclareSuperStream("super", stream.NewPartitionsOptions(2))
	if err == nil {
		t.Fatal("a super stream of 2 partitions over a limit of 2 with 1 stream was created")
	}
	if _, err := tb.broker.Stream("/", "super-0"); err == nil {
		t.Fatal("a partition was created")
	}
	c := rawOpen(t, tb, 0)
	c.create("s3", wire.CodeOK)
	c.create("s4", wire.CodePreconditionFailed)
}

// Ensure each handshake step is bounded by the handshake timeout, and
// that frames within a step do not extend it: a client that connects
// and sends nothing, sends half a frame, or trickles heartbeats without
// authenticating is dropped.
func TestLimitStreamHandshakeTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tb := startBroker(t, brokerOpts{handshake: timeout})
	cases := map[string]func(c *rawConn){
		"nothing":    func(c *rawConn) {},
		"half frame": func(c *rawConn) { c.write([]byte{0, 0, 0, 20, 0, 0x11}) },
		"heartbeats": func(c *rawConn) {
			for i := 0; i < 5; i++ {
				c.write(rawFrame(wire.KeyHeartbeat, 1, nil))
				time.Sleep(timeout / 4)
			}
		},
		"authenticated, no open": func(c *rawConn) {
			c.peerProperties()
			c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
			c.authenticate("PLAIN", plain("guest", "guest"))
		},
	}
	for name, step := range cases {
		t.Run(name, func(t *testing.T) {
			c := rawDial(t, tb.addr)
			start := time.Now()
			step(c)
			for {
				_, err := c.readAnyFrame(rawTimeout)
				if err == nil {
					continue // the Tune after authentication
				}
				if isTimeout(err) {
					t.Fatal("not closed")
				}
				break
			}
			if d := time.Since(start); d > timeout*3 {
				t.Fatalf("closed after %v, want about %v", d, timeout)
			}
		})
	}
}

// Ensure a refused authentication and a refused Open are answered only
// after the silent-close delay, then the connection closed, as RabbitMQ's
// silent_close does (3 s by default).
func TestLimitStreamSilentClose(t *testing.T) {
	const delay = 300 * time.Millisecond
	tb := startBroker(t, brokerOpts{silentClose: delay})
	c := rawDial(t, tb.addr)
	c.peerProperties()
	c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
	start := time.Now()
	if code := c.authenticate("PLAIN", plain("guest", "wrong")); code != wire.CodeAuthenticationFailure {
		t.Fatalf("code 0x%02x", uint16(code))
	}
	if d := time.Since(start); d < delay-50*time.Millisecond {
		t.Fatalf("refused after %v, want the %v delay", d, delay)
	}
	c.expectClosed()

	c = rawDial(t, tb.addr)
	c.peerProperties()
	c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
	c.authenticate("PLAIN", plain("guest", "guest"))
	c.tune(0)
	start = time.Now()
	if code, _ := c.call(wire.KeyOpen, rawBuf(nil).str("no-such-vhost")); code != wire.CodeVirtualHostAccessFailure {
		t.Fatalf("code 0x%02x", uint16(code))
	}
	if d := time.Since(start); d < delay-50*time.Millisecond {
		t.Fatalf("refused after %v, want the %v delay", d, delay)
	}
	c.expectClosed()
	rawOpen(t, tb, 0) // healthy
}
