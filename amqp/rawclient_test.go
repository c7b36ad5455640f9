package amqp

import (
	"bufio"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
)

// rawClient speaks the protocol frame by frame, for tests of what the
// client libraries never send.
type rawClient struct {
	t  *testing.T
	nc net.Conn
	w  *bufio.Writer
	fr *wire.FrameReader
}

func rawDial(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(wait))
	return &rawClient{t: t, nc: nc, w: bufio.NewWriter(nc), fr: wire.NewFrameReader(nc, 64<<10)}
}

func (c *rawClient) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawClient) send(ch uint16, m wire.Method) {
	c.t.Helper()
	c.write(wire.AppendMethodFrame(nil, ch, m))
}

// frame reads the next frame that is not a heartbeat.
func (c *rawClient) frame() wire.Frame {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame(1 << 20)
		if err != nil {
			c.t.Fatalf("read frame: %v", err)
		}
		if f.Type != wire.FrameHeartbeat {
			f.Payload = append([]byte(nil), f.Payload...)
			return f
		}
	}
}

// method reads the next method frame.
func (c *rawClient) method() (uint16, wire.Method) {
	c.t.Helper()
	f := c.frame()
	if f.Type != wire.FrameMethod {
		c.t.Fatalf("got frame type %d, want a method", f.Type)
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil {
		c.t.Fatalf("decode: %v", err)
	}
	return f.Channel, m
}

// expectEOF asserts that the server closes the socket.
func (c *rawClient) expectEOF() {
	c.t.Helper()
	for {
		_, err := c.fr.ReadFrame(1 << 20)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatal("server did not close the connection")
		}
		return
	}
}

// open runs the handshake as guest with the given heartbeat and returns
// once connection.open-ok arrived.
func (c *rawClient) open(heartbeat uint16) {
	c.t.Helper()
	c.write(wire.ProtocolHeader[:])
	if _, m := c.method(); m.MethodName() != "connection.start" {
		c.t.Fatalf("got %s", m.MethodName())
	}
	c.send(0, &wire.ConnectionStartOk{ClientProperties: wire.Table{}, Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	_, m := c.method()
	tune, ok := m.(*wire.ConnectionTune)
	if !ok {
		c.t.Fatalf("got %s, want connection.tune", m.MethodName())
	}
	c.send(0, &wire.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax, Heartbeat: heartbeat})
	c.send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	if _, m := c.method(); m.MethodName() != "connection.open-ok" {
		c.t.Fatalf("got %s", m.MethodName())
	}
}

// expectClose reads until a connection.close or channel.close and checks
// its code and text ("" matches any text).
func (c *rawClient) expectClose(wantCh uint16, code uint16, text string) {
	c.t.Helper()
	ch, m := c.method()
	var gotCode uint16
	var gotText string
	switch m := m.(type) {
	case *wire.ConnectionClose:
		gotCode, gotText = m.ReplyCode, m.ReplyText
	case *wire.ChannelClose:
		gotCode, gotText = m.ReplyCode, m.ReplyText
	default:
		c.t.Fatalf("got %s, want a close", m.MethodName())
	}
	if ch != wantCh || gotCode != code || (text != "" && gotText != text) {
		c.t.Fatalf("got close on channel %d: %d %q, want channel %d: %d %q", ch, gotCode, gotText, wantCh, code, text)
	}
}
