package amqp1

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/queues"
)

// Ensure go-amqp logs in with PLAIN and with ANONYMOUS (guest, from
// loopback), a wrong password is refused with SASL code auth, and an
// open connection is listed as RabbitMQ lists it.
func TestSASL(t *testing.T) {
	tb := startBroker(t, Config{})
	c, _ := tb.dial(t, nil)
	tb.dial(t, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	// What RabbitMQ's AMQP 1.0 clients read to turn features on.
	if p := c.Properties(); p["product"] != "Warren" || p["version"] != "4.1.0-warren.0.1.0" {
		t.Errorf("open properties %v", p)
	}

	_, err := goamqp.Dial(ctxT(t), "amqp://"+tb.addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("guest", "wrong")})
	if err == nil || !strings.Contains(err.Error(), "code 0x1") {
		t.Fatalf("wrong password: %v, want SASL outcome code 1 (auth)", err)
	}

	var found bool
	for _, c := range tb.broker.Conns() {
		in := c.Info()
		if in.Protocol == queues.ProtocolAMQP10 && in.User == "guest" && in.VHost == "/" {
			found = true
		}
		if p, _ := c.Counters(); in.Protocol == queues.ProtocolAMQP10 && p != queues.ProtoAMQP10 {
			t.Errorf("counters protocol %v", p)
		}
	}
	if !found {
		t.Fatal("no AMQP 1-0 connection listed")
	}
}

// Ensure a missing vhost in open's hostname ends the connection before
// it opens, as RabbitMQ does (silently).
func TestOpenMissingVHost(t *testing.T) {
	tb := startBroker(t, Config{})
	_, err := goamqp.Dial(ctxT(t), "amqp://"+tb.addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("guest", "guest"), HostName: "vhost:nope"})
	if err == nil {
		t.Fatal("open of a missing vhost succeeded")
	}
}

// Ensure AMQP 1.0 headers other than SASL's are answered with the SASL
// header and closed: RabbitMQ requires SASL, and TLS is the listener's.
func TestHeaderRefused(t *testing.T) {
	tb := startBroker(t, Config{})
	for _, id := range []frame.ProtocolID{frame.ProtocolAMQP, frame.ProtocolTLS} {
		rc := tb.raw(t)
		rc.write(frame.AppendProtocolHeader(nil, id))
		h, err := rc.r.ReadProtocolHeader()
		if err != nil || h != frame.ProtocolHeaderOf(frame.ProtocolSASL) {
			t.Fatalf("header %d: answered %v, %v", id, h, err)
		}
		if _, err := rc.r.ReadFrame(); !errors.Is(err, io.EOF) {
			t.Fatalf("header %d: after the answer: %v, want EOF", id, err)
		}
	}
}

// Ensure a client that announces an idle timeout gets heartbeats (go-amqp
// closes a connection silent for its timeout), and one silent past
// Warren's closes with amqp:resource-limit-exceeded.
func TestIdleTimeout(t *testing.T) {
	tb := startBroker(t, Config{Heartbeat: 1})
	// go-amqp announces half its timeout: 1000 ms, RabbitMQ's minimum.
	_, s := tb.dial(t, &goamqp.ConnOptions{IdleTimeout: 2 * time.Second})
	time.Sleep(2500 * time.Millisecond)
	snd, err := s.NewSender(ctxT(t), "/queues/none", nil)
	if err == nil {
		snd.Close(ctxT(t))
	}
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotFound {
		t.Fatalf("after idling: %v, want the connection alive (attach refused, not found)", err)
	}

	rc := tb.raw(t)
	rc.open(&frame.Open{ContainerID: "raw", MaxFrameSize: 65536})
	if e := rc.closeError(); e.Condition != frame.CondResourceLimitExceeded {
		t.Fatalf("silent client closed with %v", e)
	}
}

// Ensure hostile bytes get the right answer and leave the broker
// serving: garbage after the SASL header closes before open, a frame
// shorter than its header after open closes with framing-error, a body
// that does not decode with decode-error, a frame on a channel above
// channel-max with framing-error.
func TestHostileFrames(t *testing.T) {
	tb := startBroker(t, Config{})

	rc := tb.raw(t)
	rc.write(frame.AppendProtocolHeader(nil, frame.ProtocolSASL))
	rc.write([]byte("\x00\x00\x00\x10garbage garbage garbage"))
	if _, err := rc.r.ReadProtocolHeader(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.next(); err != nil { // mechanisms
		t.Fatal(err)
	}
	if p, err := rc.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after garbage: %#v, %v; want EOF", p, err)
	}

	cases := []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"short frame", []byte{0, 0, 0, 4, 2, 0, 0, 0}, string(frame.CondFramingError)},
		{"bad body", []byte{0, 0, 0, 12, 2, 0, 0, 0, 0x00, 0x53, 0x99, 0x45}, string(frame.CondDecodeError)},
		{"channel above max", append([]byte{0, 0, 0, 12, 2, 0, 0x7f, 0x00}, 0x00, 0x53, 0x17, 0x45), string(frame.CondFramingError)},
		{"huge frame", []byte{0x7f, 0, 0, 0, 2, 0, 0, 0}, string(frame.CondFramingError)},
	}
	for _, tc := range cases {
		rc := tb.raw(t)
		rc.open(&frame.Open{ContainerID: "raw", MaxFrameSize: 65536})
		rc.write(tc.bytes)
		if e := rc.closeError(); string(e.Condition) != tc.want {
			t.Errorf("%s: closed with %v, want %s", tc.name, e, tc.want)
		}
	}

	_, s := tb.dial(t, nil)
	if _, err := s.NewReceiver(ctxT(t), "/queues/none", nil); err == nil {
		t.Fatal("attach to a missing queue succeeded")
	}
}

// Ensure a client that stops after the SASL header is dropped once the
// handshake timeout passes, and one that sends a transfer on a handle it
// never attached gets its session ended with
// amqp:session:unattached-handle while the connection stays.
func TestHandshakeTimeoutAndUnattached(t *testing.T) {
	tb := startBroker(t, Config{HandshakeTimeout: 100 * time.Millisecond})
	rc := tb.raw(t)
	rc.write(frame.AppendProtocolHeader(nil, frame.ProtocolSASL))
	if _, err := rc.r.ReadProtocolHeader(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.next(); err != nil { // mechanisms
		t.Fatal(err)
	}
	if p, err := rc.next(); !errors.Is(err, io.EOF) {
		t.Fatalf("silent after the header: %#v, %v; want EOF", p, err)
	}

	rc = tb.raw(t)
	rc.open(&frame.Open{ContainerID: "raw", MaxFrameSize: 65536})
	rc.send(&frame.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100})
	b, _ := frame.AppendTransferFrame(nil, 0, &frame.Transfer{Handle: 7, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{0}}, []byte{0x00, 0x53, 0x75, 0xa0, 0x00})
	rc.write(b)
	for {
		p, err := rc.next()
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := p.(*frame.End); ok {
			if e.Error == nil || e.Error.Condition != frame.CondUnattachedHandle {
				t.Fatalf("end with %v, want unattached-handle", e.Error)
			}
			break
		}
	}
	rc.send(&frame.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100})
	if p, err := rc.next(); err != nil {
		t.Fatal(err)
	} else if _, ok := p.(*frame.Begin); !ok {
		t.Fatalf("a new session after the end: %#v", p)
	}
}

// Ensure connection_max counts the listener's connections of both AMQP
// versions, as RabbitMQ's ranch listener does, and an AMQP 1.0 open
// beyond it is refused (before open: a silent close, as RabbitMQ's
// reader) until a connection goes.
func TestConnectionMax(t *testing.T) {
	tb := startBroker(t, Config{ConnectionMax: 2})
	tb.channel(t)            // 0-9-1: one
	c1, _ := tb.dial(t, nil) // 1.0: two
	dial := func() error {
		c, err := goamqp.Dial(ctxT(t), "amqp://"+tb.addr, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("guest", "guest")})
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err == nil {
		t.Fatal("a third connection (AMQP 1.0) opened past connection_max 2")
	}
	if _, err := amqp091.Dial("amqp://guest:guest@" + tb.addr + "/"); err == nil {
		t.Fatal("a third connection (0-9-1) opened past connection_max 2")
	} else if !strings.Contains(err.Error(), "node connection limit (2) is reached") {
		t.Fatalf("0-9-1 refusal: %v", err)
	}
	c1.Close()
	deadline := time.Now().Add(5 * time.Second)
	for dial() != nil {
		if time.Now().After(deadline) {
			t.Fatal("no AMQP 1.0 connection opens after one closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
