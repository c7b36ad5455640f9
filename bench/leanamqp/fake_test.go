package leanamqp

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
)

// fakeServer is the server end of one connection, scripted by a test.
type fakeServer struct {
	nc net.Conn
	fr *wire.FrameReader
}

// readMethod reads frames until a method arrives, skipping heartbeats.
func (s *fakeServer) readMethod() (uint16, wire.Method, error) {
	for {
		f, err := s.fr.ReadFrame(math.MaxUint32)
		if err != nil {
			return 0, nil, err
		}
		if f.Type == wire.FrameHeartbeat {
			continue
		}
		if f.Type != wire.FrameMethod {
			return 0, nil, fmt.Errorf("frame type %d", f.Type)
		}
		m, err := wire.DecodeMethod(f.Payload)
		return f.Channel, m, err
	}
}

func (s *fakeServer) send(b []byte) error {
	_, err := s.nc.Write(b)
	return err
}

// handshake plays the server's side of Dial and returns the start-ok.
func (s *fakeServer) handshake(frameMax uint32, heartbeat uint16) (*wire.ConnectionStartOk, error) {
	if _, err := s.fr.ReadProtocolHeader(); err != nil {
		return nil, err
	}
	out := wire.AppendMethodFrame(nil, 0, &wire.ConnectionStart{VersionMinor: 9, Mechanisms: "AMQPLAIN PLAIN", Locales: "en_US"})
	if err := s.send(out); err != nil {
		return nil, err
	}
	_, m, err := s.readMethod()
	if err != nil {
		return nil, err
	}
	so, ok := m.(*wire.ConnectionStartOk)
	if !ok {
		return nil, fmt.Errorf("got %s, want start-ok", m.MethodName())
	}
	if err := s.send(wire.AppendMethodFrame(nil, 0, &wire.ConnectionTune{ChannelMax: 2047, FrameMax: frameMax, Heartbeat: heartbeat})); err != nil {
		return nil, err
	}
	for _, want := range []string{"connection.tune-ok", "connection.open"} {
		if _, m, err = s.readMethod(); err != nil || m.MethodName() != want {
			return nil, fmt.Errorf("got %v (%v), want %s", m, err, want)
		}
	}
	if err := s.send(wire.AppendMethodFrame(nil, 0, &wire.ConnectionOpenOk{})); err != nil {
		return nil, err
	}
	if ch, m, err := s.readMethod(); err != nil || ch != 1 || m.MethodName() != "channel.open" {
		return nil, fmt.Errorf("got %v on %d (%v), want channel.open", m, ch, err)
	}
	return so, s.send(wire.AppendMethodFrame(nil, 1, &wire.ChannelOpenOk{}))
}

// fake starts a one-connection fake server running script after the
// handshake, dials it and returns the client; script's error fails the
// test.
func fake(t *testing.T, cfg Config, script func(s *fakeServer) error) *Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		nc, err := ln.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		defer nc.Close()
		s := &fakeServer{nc: nc, fr: wire.NewFrameReader(nc, 1<<16)}
		so, err := s.handshake(16384, 0)
		if err != nil {
			t.Errorf("fake handshake: %v", err)
			return
		}
		if so.Mechanism != "PLAIN" || so.Response != "\x00u\x00p" || so.ClientProperties["connection_name"] != "fake" {
			t.Errorf("start-ok %+v", so)
		}
		caps, _ := so.ClientProperties["capabilities"].(wire.Table)
		if caps["publisher_confirms"] != true || caps["consumer_cancel_notify"] != true || caps["basic.nack"] != true {
			t.Errorf("capabilities %v", caps)
		}
		if err := script(s); err != nil {
			t.Errorf("fake server: %v", err)
		}
	})
	cfg.Name = "fake"
	cfg.Timeout = 5 * time.Second
	c, err := DialConfig("amqp://u:p@"+ln.Addr().String()+"/vh", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deliveryFrames encodes a basic.deliver with its content, the body cut
// into frames of the given sizes (the rest in a final frame).
func deliveryFrames(tag uint64, body []byte, cuts ...int) []byte {
	out := wire.AppendMethodFrame(nil, 1, &wire.BasicDeliver{ConsumerTag: "ct", DeliveryTag: tag, RoutingKey: "q"})
	out = wire.AppendHeaderFrame(out, 1, wire.ClassBasic, uint64(len(body)), []byte{0x10, 0, 1})
	for _, n := range cuts {
		out = wire.AppendBodyFrames(out, 1, body[:n], 0)
		body = body[n:]
	}
	return wire.AppendBodyFrames(out, 1, body, 0)
}

type recorded struct {
	tag   uint64
	redel bool
	body  string
}

func TestFakeDeliveryAssembly(t *testing.T) {
	var mu sync.Mutex
	var got []recorded
	done := make(chan struct{})
	onDelivery := func(tag uint64, redel bool, body []byte) {
		mu.Lock()
		got = append(got, recorded{tag, redel, string(body)})
		if len(got) == 5 {
			close(done)
		}
		mu.Unlock()
	}
	c := fake(t, Config{OnDelivery: onDelivery}, func(s *fakeServer) error {
		var out []byte
		out = append(out, wire.AppendHeartbeat(nil)...)
		out = append(out, deliveryFrames(1, []byte("hello"))...)
		out = append(out, deliveryFrames(2, nil)...)                        // no body frame
		out = append(out, deliveryFrames(3, []byte("abcdefghij"), 3, 3)...) // three frames
		out = append(out, deliveryFrames(4, bytes.Repeat([]byte("z"), 40000), 16000, 16000)...)
		red := wire.AppendMethodFrame(nil, 1, &wire.BasicDeliver{ConsumerTag: "ct", DeliveryTag: 5, Redelivered: true})
		red = wire.AppendHeaderFrame(red, 1, wire.ClassBasic, 2, []byte{0, 0})
		out = append(out, wire.AppendBodyFrames(red, 1, []byte("ok"), 0)...)
		// Dribble the bytes in small writes to split frames across reads.
		for len(out) > 0 {
			n := min(7, len(out))
			if err := s.send(out[:n]); err != nil {
				return err
			}
			out = out[n:]
		}
		// The heartbeat is answered.
		f, err := s.fr.ReadFrame(math.MaxUint32)
		if err != nil || f.Type != wire.FrameHeartbeat {
			return fmt.Errorf("want a heartbeat back, got %v %v", f, err)
		}
		_, m, err := s.readMethod()
		if err != nil || m.MethodName() != "connection.close" {
			return fmt.Errorf("want connection.close, got %v %v", m, err)
		}
		return s.send(wire.AppendMethodFrame(nil, 0, &wire.ConnectionCloseOk{}))
	})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("deliveries missing")
	}
	want := []recorded{{1, false, "hello"}, {2, false, ""}, {3, false, "abcdefghij"},
		{4, false, strings.Repeat("z", 40000)}, {5, true, "ok"}}
	mu.Lock()
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delivery %d: tag %d redelivered %v body %d bytes; want %d %v %d", i, got[i].tag, got[i].redel, len(got[i].body), want[i].tag, want[i].redel, len(want[i].body))
		}
	}
	mu.Unlock()
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func TestFakeConfirmsAndServerClose(t *testing.T) {
	type conf struct {
		tag           uint64
		multiple, ack bool
	}
	var mu sync.Mutex
	var confs []conf
	c := fake(t, Config{OnConfirm: func(tag uint64, multiple, ack bool) {
		mu.Lock()
		confs = append(confs, conf{tag, multiple, ack})
		mu.Unlock()
	}}, func(s *fakeServer) error {
		if ch, m, err := s.readMethod(); err != nil || ch != 1 || m.MethodName() != "confirm.select" {
			return fmt.Errorf("want confirm.select, got %v %v", m, err)
		}
		if err := s.send(wire.AppendMethodFrame(nil, 1, &wire.ConfirmSelectOk{})); err != nil {
			return err
		}
		for i := range 3 {
			if _, m, err := s.readMethod(); err != nil || m.MethodName() != "basic.publish" {
				return fmt.Errorf("publish %d: got %v %v", i, m, err)
			}
			for range 2 { // header and one body frame
				if _, err := s.fr.ReadFrame(math.MaxUint32); err != nil {
					return err
				}
			}
		}
		var out []byte
		out = wire.AppendMethodFrame(out, 1, &wire.BasicAck{DeliveryTag: 2, Multiple: true})
		out = wire.AppendMethodFrame(out, 1, &wire.BasicNack{DeliveryTag: 3})
		out = wire.AppendMethodFrame(out, 0, &wire.ConnectionClose{ReplyCode: 320, ReplyText: "CONNECTION_FORCED - bye"})
		if err := s.send(out); err != nil {
			return err
		}
		if _, m, err := s.readMethod(); err != nil || m.MethodName() != "connection.close-ok" {
			return fmt.Errorf("want close-ok, got %v %v", m, err)
		}
		return nil
	})
	if err := c.ConfirmSelect(); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishBatch("", "q", false, []byte("m"), 3, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("no close")
	}
	var se *ServerError
	if !errors.As(c.Err(), &se) || se.Channel || se.Code != 320 || se.Text != "CONNECTION_FORCED - bye" {
		t.Fatalf("err %v", c.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	want := []conf{{2, true, true}, {3, false, false}}
	if fmt.Sprint(confs) != fmt.Sprint(want) {
		t.Errorf("confirms %v, want %v", confs, want)
	}
}

// Malformed input fails the connection with ErrProtocol or a framing
// error, never a panic.
func TestFakeMalformed(t *testing.T) {
	deliver := wire.AppendMethodFrame(nil, 1, &wire.BasicDeliver{DeliveryTag: 1})
	header := func(size uint64) []byte { return wire.AppendHeaderFrame(nil, 1, wire.ClassBasic, size, []byte{0, 0}) }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	cases := map[string][]byte{
		"bad frame end":          {wire.FrameMethod, 0, 1, 0, 0, 0, 0, 0x00},
		"unknown frame type":     {9, 0, 1, 0, 0, 0, 0, wire.FrameEnd},
		"oversized frame":        {wire.FrameBody, 0, 1, 0x7f, 0, 0, 0, wire.FrameEnd},
		"body too long":          cat(deliver, header(2), wire.AppendBodyFrames(nil, 1, []byte("abc"), 0)),
		"method in body":         cat(deliver, header(5), wire.AppendBodyFrames(nil, 1, []byte("ab"), 0), deliver),
		"body before header":     cat(deliver, wire.AppendBodyFrames(nil, 1, []byte("ab"), 0)),
		"header without deliver": header(1),
		"short header":           cat(deliver, []byte{wire.FrameHeader, 0, 1, 0, 0, 0, 2, 0, 60, wire.FrameEnd}),
		"header class":           cat(deliver, wire.AppendHeaderFrame(nil, 1, wire.ClassQueue, 0, []byte{0, 0})),
		"huge body":              cat(deliver, header(1<<40)),
		"other channel":          wire.AppendMethodFrame(nil, 2, &wire.BasicAck{DeliveryTag: 1}),
		"truncated deliver":      {wire.FrameMethod, 0, 1, 0, 0, 0, 5, 0, 60, 0, 60, 3, wire.FrameEnd},
		"unknown method":         {wire.FrameMethod, 0, 1, 0, 0, 0, 4, 0, 99, 0, 1, wire.FrameEnd},
		"unsolicited reply":      wire.AppendMethodFrame(wire.AppendMethodFrame(nil, 1, &wire.BasicQosOk{}), 1, &wire.BasicQosOk{}),
		"heartbeat on chan 1":    {wire.FrameHeartbeat, 0, 1, 0, 0, 0, 0, wire.FrameEnd},
		"header on channel 0":    {wire.FrameHeader, 0, 0, 0, 0, 0, 0, wire.FrameEnd},
		"eof mid frame":          {wire.FrameMethod, 0, 1, 0, 0},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake(t, Config{MaxBodySize: 1 << 20}, func(s *fakeServer) error {
				if err := s.send(in); err != nil {
					return err
				}
				if name == "eof mid frame" {
					return s.nc.Close()
				}
				time.Sleep(50 * time.Millisecond)
				return nil
			})
			select {
			case <-c.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("still open")
			}
			var fe *wire.FramingError
			if err := c.Err(); !errors.Is(err, ErrProtocol) && !errors.As(err, &fe) && !strings.Contains(err.Error(), "EOF") {
				t.Errorf("err %v", err)
			}
			if err := c.Qos(1); err == nil {
				t.Error("qos on a failed connection succeeded")
			}
		})
	}
}

func TestParseURL(t *testing.T) {
	for in, want := range map[string]URL{
		"amqp://h":                 {Addr: "h:5672", User: "guest", Password: "guest", Vhost: "/"},
		"amqp://a:b@h:1234/":       {Addr: "h:1234", User: "a", Password: "b", Vhost: "/"},
		"amqp://a:b@h:1234/vh":     {Addr: "h:1234", User: "a", Password: "b", Vhost: "vh"},
		"amqp://a@[::1]:1/%2Fx%2F": {Addr: "[::1]:1", User: "a", Password: "guest", Vhost: "/x/"},
		"amqps://h":                {Addr: "h:5671", User: "guest", Password: "guest", Vhost: "/", TLS: true},
	} {
		got, err := ParseURL(in)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"http://h/", "amqp://h:x/", "amqp://h:70000/", "::"} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("ParseURL(%q) accepted", bad)
		}
	}
}
