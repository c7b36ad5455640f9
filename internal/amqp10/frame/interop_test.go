package frame

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/testutil"
)

// The interop tests run github.com/Azure/go-amqp, a real AMQP 1.0
// client, against a scripted server that speaks only through this
// codec: go-amqp accepting the server's frames shows the encodings are
// right, the server decoding go-amqp's shows the decoders are. The
// frames go-amqp sends are kept in testdata/goamqp-*.txt (regenerate
// with -rewrite), which TestGoAMQPCapture decodes offline
// and the fuzz targets use as seeds.

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/goamqp-*.txt from a live go-amqp run")

// captureGlob matches the files of captured frames, one per test.
const captureGlob = "testdata/goamqp-*.txt"

func TestMain(m *testing.M) {
	code := m.Run()
	if leaks := testutil.LeakedGoroutines("github.com/Azure/go-amqp", "internal/amqp10/frame."); leaks != "" {
		fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaks)
		code = 1
	}
	os.Exit(code)
}

// captured is a frame go-amqp sent, named by its performative.
type captured struct {
	name string
	raw  []byte
}

// script is the server's side of one connection: it reads go-amqp's
// frames, checks them, and answers with frames this codec encodes.
type script struct {
	conn net.Conn
	r    *Reader
	out  []byte
	seen []captured
}

// header reads go-amqp's protocol header and answers with the same.
func (s *script) header(want ProtocolID) error {
	h, err := s.r.ReadProtocolHeader()
	if err != nil {
		return err
	}
	if !h.Is10() || h.ID() != want {
		return fmt.Errorf("protocol header %v, want id %d", h, want)
	}
	_, err = s.conn.Write(AppendProtocolHeader(nil, want))
	return err
}

// send writes p on channel.
func (s *script) send(channel uint16, p Performative) error {
	var err error
	if s.out, err = AppendFrame(s.out[:0], channel, p); err != nil {
		return err
	}
	_, err = s.conn.Write(s.out)
	return err
}

func (s *script) sendTransfer(channel uint16, t *Transfer, payload []byte) error {
	var err error
	if s.out, err = AppendTransferFrame(s.out[:0], channel, t, payload); err != nil {
		return err
	}
	_, err = s.conn.Write(s.out)
	return err
}

// expect reads frames until one carries a performative of p's type,
// which it decodes into p; session flows it is not waiting for (go-amqp
// sends them as its windows move) and empty frames are skipped. It
// returns the frame's channel and the transfer payload.
func (s *script) expect(p Performative) (uint16, []byte, error) {
	for {
		f, err := s.r.ReadFrame()
		if err != nil {
			return 0, nil, err
		}
		if f.Empty() {
			continue
		}
		got, payload, err := Decode(f.Type, f.Body)
		if err != nil {
			return 0, nil, fmt.Errorf("decoding % x: %w", f.Body, err)
		}
		// Keep the frame as it came (without an extended header).
		frameBytes, _ := BeginFrame(nil, f.Type, f.Channel)
		frameBytes = EndFrame(append(frameBytes, f.Body...), 0)
		s.seen = append(s.seen, captured{name: nameOf(got), raw: frameBytes})
		if got.Descriptor() == p.Descriptor() {
			reflect.ValueOf(p).Elem().Set(reflect.ValueOf(got).Elem())
			return f.Channel, payload, nil
		}
		if _, ok := got.(*Flow); ok {
			continue
		}
		return 0, nil, fmt.Errorf("got %s %+v, want %s", nameOf(got), got, nameOf(p))
	}
}

// nameOf is the spec's name of a performative.
func nameOf(p Performative) string {
	n := strings.ToLower(reflect.TypeOf(p).Elem().Name())
	if strings.HasPrefix(n, "sasl") {
		return "sasl-" + n[4:]
	}
	return n
}

// serve accepts one connection on l and runs fn on it; the returned
// function waits for fn and returns the frames it saw and its error.
func serve(t *testing.T, l net.Listener, fn func(s *script) error) func() ([]captured, error) {
	done := make(chan error, 1)
	var s script
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		s = script{conn: c, r: NewReader(bufio.NewReader(c), 1<<20)}
		done <- fn(&s)
	}()
	return func() ([]captured, error) {
		err := <-done
		return s.seen, err
	}
}

// handshake runs the SASL exchange with mechanism (and response, when
// given) and opens the connection.
func (s *script) handshake(mechanism string, response string) error {
	if err := s.header(ProtocolSASL); err != nil {
		return err
	}
	if err := s.send(0, &SASLMechanisms{Mechanisms: syms("PLAIN", "ANONYMOUS")}); err != nil {
		return err
	}
	var init SASLInit
	if _, _, err := s.expect(&init); err != nil {
		return err
	}
	if string(init.Mechanism) != mechanism || (response != "" && string(init.InitialResponse) != response) {
		return fmt.Errorf("sasl-init %+v, want %s %q", init, mechanism, response)
	}
	if err := s.send(0, &SASLOutcome{Code: SASLOK}); err != nil {
		return err
	}
	if err := s.header(ProtocolAMQP); err != nil {
		return err
	}
	var open Open
	if _, _, err := s.expect(&open); err != nil {
		return err
	}
	if open.ContainerID != "interop-client" || open.Hostname != "vhost:/" || open.MaxFrameSize != 65536 {
		return fmt.Errorf("open %+v", open)
	}
	return s.send(0, &Open{ContainerID: "warren", MaxFrameSize: 65536, ChannelMax: 15,
		OfferedCapabilities: syms("ANONYMOUS-RELAY"),
		Properties:          amqp10.Map{{Key: amqp10.Symbol("product"), Value: "Warren"}}})
}

// closeConn answers go-amqp's close.
func (s *script) closeConn() error {
	var c Close
	if _, _, err := s.expect(&c); err != nil {
		return err
	}
	return s.send(0, &Close{})
}

// Ensure go-amqp and the codec understand each other through a whole
// connection: SASL PLAIN, open, begin, a sender link (attach, flow,
// transfer, disposition), a receiver link with filters (attach, flow,
// transfer, disposition), detach, end, close.
func TestGoAMQPInterop(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	body := []byte("hello from warren")
	wait := serve(t, l, func(s *script) error {
		if err := s.handshake("PLAIN", "\x00user\x00pass"); err != nil {
			return err
		}
		var begin Begin
		ch, _, err := s.expect(&begin)
		if err != nil {
			return err
		}
		if begin.HasRemoteChannel || begin.IncomingWindow == 0 {
			return fmt.Errorf("begin %+v", begin)
		}
		if err := s.send(ch, &Begin{RemoteChannel: ch, HasRemoteChannel: true, NextOutgoingID: 0,
			IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 255}); err != nil {
			return err
		}

		// The client's sender: we are the receiving end.
		var att Attach
		if _, _, err := s.expect(&att); err != nil {
			return err
		}
		if att.Name != "sender-link" || att.Role != RoleSender || att.Target == nil || att.Target.Address != "/queues/q1" || !att.HasInitialDeliveryCount {
			return fmt.Errorf("sender attach %+v target %+v", att, att.Target)
		}
		if err := s.send(ch, &Attach{Name: att.Name, Handle: att.Handle, Role: RoleReceiver,
			SndSettleMode: att.SndSettleMode, RcvSettleMode: RcvFirst, Source: att.Source, Target: att.Target,
			MaxMessageSize: 1 << 20}); err != nil {
			return err
		}
		if err := s.send(ch, &Flow{NextIncomingID: begin.NextOutgoingID, HasNextIncomingID: true, IncomingWindow: 5000,
			NextOutgoingID: 0, OutgoingWindow: 5000, Handle: att.Handle, HasHandle: true,
			DeliveryCount: att.InitialDeliveryCount, HasDeliveryCount: true, LinkCredit: 10, HasLinkCredit: true}); err != nil {
			return err
		}
		var tr Transfer
		_, payload, err := s.expect(&tr)
		if err != nil {
			return err
		}
		var m amqp10.Message
		if err := m.UnmarshalBinary(payload); err != nil {
			return fmt.Errorf("transfer payload: %v", err)
		}
		if tr.Handle != att.Handle || !tr.HasDeliveryID || len(tr.DeliveryTag) == 0 || tr.More ||
			m.Body.Kind != amqp10.BodyData || string(m.Body.Data[0]) != "hello from go-amqp" {
			return fmt.Errorf("transfer %+v message %+v", tr, m)
		}
		if err := s.send(ch, &Disposition{Role: RoleReceiver, First: tr.DeliveryID, Last: tr.DeliveryID, Settled: true, State: Accepted{}}); err != nil {
			return err
		}

		// The client's receiver: we are the sending end.
		var ratt Attach
		if _, _, err := s.expect(&ratt); err != nil {
			return err
		}
		src := ratt.Source
		if ratt.Role != RoleReceiver || src == nil || src.Address != "/queues/q2" || len(src.Filter) != 2 {
			return fmt.Errorf("receiver attach %+v source %+v", ratt, src)
		}
		sel, _ := src.Filter.Symbol("apache.org:selector-filter:string")
		if d, ok := sel.(amqp10.Described); !ok || d.Descriptor != uint64(0x0000468C00000004) || d.Value != "color = 'red'" {
			return fmt.Errorf("selector filter %#v", sel)
		}
		off, _ := src.Filter.Symbol("rabbitmq:stream-offset-spec")
		if d, ok := off.(amqp10.Described); !ok || d.Descriptor != amqp10.Symbol("rabbitmq:stream-offset-spec") || d.Value != "first" {
			return fmt.Errorf("offset filter %#v", off)
		}
		if err := s.send(ch, &Attach{Name: ratt.Name, Handle: ratt.Handle, Role: RoleSender,
			SndSettleMode: SndUnsettled, RcvSettleMode: RcvFirst, Source: src, Target: ratt.Target,
			InitialDeliveryCount: 0, HasInitialDeliveryCount: true}); err != nil {
			return err
		}
		var flow Flow
		for !flow.HasHandle {
			if _, _, err := s.expect(&flow); err != nil {
				return err
			}
		}
		if flow.Handle != ratt.Handle || flow.LinkCredit != 5 {
			return fmt.Errorf("receiver flow %+v", flow)
		}
		msg, err := (&amqp10.Message{
			Properties: &amqp10.Properties{Set: amqp10.PropMessageID, MessageID: "m1"},
			Body:       amqp10.Body{Kind: amqp10.BodyData, Data: [][]byte{body}},
		}).MarshalBinary()
		if err != nil {
			return err
		}
		if err := s.sendTransfer(ch, &Transfer{Handle: ratt.Handle, DeliveryID: 0, HasDeliveryID: true,
			DeliveryTag: []byte{0xd, 0xe}, MessageFormat: 0, HasMessageFormat: true}, msg); err != nil {
			return err
		}
		var disp Disposition
		if _, _, err := s.expect(&disp); err != nil {
			return err
		}
		if disp.Role != RoleReceiver || disp.First != 0 || disp.Last != 0 || !disp.Settled || disp.State != (Accepted{}) {
			return fmt.Errorf("disposition %+v", disp)
		}

		// Detach both links, end the session, close.
		for range 2 {
			var det Detach
			if _, _, err := s.expect(&det); err != nil {
				return err
			}
			if !det.Closed {
				return fmt.Errorf("detach %+v", det)
			}
			if err := s.send(ch, &Detach{Handle: det.Handle, Closed: true}); err != nil {
				return err
			}
		}
		var end End
		if _, _, err := s.expect(&end); err != nil {
			return err
		}
		if err := s.send(ch, &End{}); err != nil {
			return err
		}
		return s.closeConn()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := amqp.Dial(ctx, "amqp://"+l.Addr().String(), &amqp.ConnOptions{
		ContainerID: "interop-client", HostName: "vhost:/", MaxFrameSize: 65536,
		SASLType: amqp.SASLTypePlain("user", "pass"),
	})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	if got := conn.Properties()["product"]; got != "Warren" {
		t.Errorf("server properties: product %v", got)
	}
	session, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	sender, err := session.NewSender(ctx, "/queues/q1", &amqp.SenderOptions{Name: "sender-link"})
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	if sender.MaxMessageSize() != 1<<20 {
		t.Errorf("sender max message size %d", sender.MaxMessageSize())
	}
	if err := sender.Send(ctx, amqp.NewMessage([]byte("hello from go-amqp")), nil); err != nil {
		t.Fatalf("Send: %v", err)
	}
	receiver, err := session.NewReceiver(ctx, "/queues/q2", &amqp.ReceiverOptions{
		Name: "receiver-link", Credit: 5,
		Filters: []amqp.LinkFilter{
			amqp.NewSelectorFilter("color = 'red'"),
			amqp.NewLinkFilter("rabbitmq:stream-offset-spec", 0, "first"),
		},
	})
	if err != nil {
		t.Fatalf("NewReceiver: %v", err)
	}
	if v := receiver.LinkSourceFilterValue("rabbitmq:stream-offset-spec"); v != "first" {
		t.Errorf("echoed filter %v", v)
	}
	m, err := receiver.Receive(ctx, nil)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if !bytes.Equal(m.GetData(), body) || m.Properties == nil || m.Properties.MessageID != "m1" {
		t.Fatalf("received %q %+v", m.GetData(), m.Properties)
	}
	if err := receiver.AcceptMessage(ctx, m); err != nil {
		t.Fatalf("AcceptMessage: %v", err)
	}
	if err := receiver.Close(ctx); err != nil {
		t.Fatalf("receiver Close: %v", err)
	}
	if err := sender.Close(ctx); err != nil {
		t.Fatalf("sender Close: %v", err)
	}
	if err := session.Close(ctx); err != nil {
		t.Fatalf("session Close: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("conn Close: %v", err)
	}
	seen, err := wait()
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	var names []string
	for _, c := range seen {
		names = append(names, c.name)
	}
	t.Logf("go-amqp sent: %s", strings.Join(names, " "))
	if *rewrite {
		writeCapture(t, "testdata/goamqp-plain.txt", seen)
	}
}

// Ensure SASL ANONYMOUS works and that go-amqp takes the errors the
// codec encodes as the errors they are: a refused link (attach without a
// target, then detach with an error) and a close with an error.
func TestGoAMQPAnonymousAndErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	wait := serve(t, l, func(s *script) error {
		if err := s.handshake("ANONYMOUS", ""); err != nil {
			return err
		}
		var begin Begin
		ch, _, err := s.expect(&begin)
		if err != nil {
			return err
		}
		if err := s.send(ch, &Begin{RemoteChannel: ch, HasRemoteChannel: true, IncomingWindow: 10, OutgoingWindow: 10, HandleMax: DefaultHandleMax}); err != nil {
			return err
		}
		var att Attach
		if _, _, err := s.expect(&att); err != nil {
			return err
		}
		if err := s.send(ch, &Attach{Name: att.Name, Handle: att.Handle, Role: RoleReceiver, SndSettleMode: SndMixed}); err != nil {
			return err
		}
		if err := s.send(ch, &Detach{Handle: att.Handle, Closed: true,
			Error: &Error{Condition: CondNotFound, Description: "no queue 'missing' in vhost '/'"}}); err != nil {
			return err
		}
		var det Detach
		if _, _, err := s.expect(&det); err != nil {
			return err
		}
		if err := s.send(0, &Close{Error: &Error{Condition: CondConnectionForced, Description: "shutting down",
			Info: amqp10.Map{{Key: amqp10.Symbol("node"), Value: "warren@localhost"}}}}); err != nil {
			return err
		}
		var c Close
		_, _, err = s.expect(&c)
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := amqp.Dial(ctx, "amqp://"+l.Addr().String(), &amqp.ConnOptions{
		ContainerID: "interop-client", HostName: "vhost:/", MaxFrameSize: 65536, SASLType: amqp.SASLTypeAnonymous(),
	})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer conn.Close()
	session, err := conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	_, err = session.NewSender(ctx, "/queues/missing", nil)
	var refused *amqp.Error
	if !errors.As(err, &refused) || refused.Condition != amqp.ErrCondNotFound || refused.Description != "no queue 'missing' in vhost '/'" {
		t.Fatalf("NewSender: %v, want the server's not-found", err)
	}
	select {
	case <-conn.Done():
	case <-ctx.Done():
		t.Fatal("the server's close did not end the connection")
	}
	var connErr *amqp.ConnError
	if err := conn.Err(); !errors.As(err, &connErr) || connErr.RemoteErr == nil ||
		connErr.RemoteErr.Condition != amqp.ErrCondConnectionForced || connErr.RemoteErr.Info["node"] != "warren@localhost" {
		t.Fatalf("conn.Err() = %v, want the server's connection-forced", err)
	}
	seen, err := wait()
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	if *rewrite {
		writeCapture(t, "testdata/goamqp-anonymous.txt", seen)
	}
}

// writeCapture writes the frames go-amqp sent to file, one a line.
func writeCapture(t *testing.T, file string, seen []captured) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Frames github.com/Azure/go-amqp v1.7.0 sent in %s (go test -run %[1]s -args -rewrite).\n", t.Name())
	for _, c := range seen {
		fmt.Fprintf(&b, "%s %s\n", c.name, hex.EncodeToString(c.raw))
	}
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readCapture reads the captured frames.
func readCapture(tb testing.TB) []captured {
	files, err := filepath.Glob(captureGlob)
	if err != nil || len(files) == 0 {
		tb.Fatalf("no %s: %v", captureGlob, err)
	}
	var out []captured
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if line == "" || line[0] == '#' {
				continue
			}
			name, h, ok := strings.Cut(line, " ")
			raw, err := hex.DecodeString(h)
			if !ok || err != nil {
				tb.Fatalf("%s: bad line %q", file, line)
			}
			out = append(out, captured{name: name, raw: raw})
		}
	}
	return out
}

// Ensure every frame go-amqp sent decodes to its performative, and
// that the codec's re-encoding decodes to the same and is no longer.
func TestGoAMQPCapture(t *testing.T) {
	frames := readCapture(t)
	if len(frames) < 12 {
		t.Fatalf("%d frames captured", len(frames))
	}
	for i, c := range frames {
		r := NewReader(bytes.NewReader(c.raw), DefaultMaxFrameSize)
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d (%s): %v", i, c.name, err)
		}
		p, payload, err := Decode(f.Type, f.Body)
		if err != nil {
			t.Fatalf("frame %d (%s): %v", i, c.name, err)
		}
		if nameOf(p) != c.name {
			t.Fatalf("frame %d: decoded %s, want %s", i, nameOf(p), c.name)
		}
		enc, err := p.AppendTo(nil)
		if err != nil {
			t.Fatalf("frame %d (%s): re-encoding: %v", i, c.name, err)
		}
		p2, _, err := Decode(f.Type, enc)
		if err != nil || !reflect.DeepEqual(p, p2) {
			t.Fatalf("frame %d (%s): re-encoding decodes to %+v (%v), want %+v", i, c.name, p2, err, p)
		}
		if orig := len(f.Body) - len(payload); len(enc) > orig {
			t.Errorf("frame %d (%s): re-encoded in %d bytes, go-amqp took %d\n% x\n% x", i, c.name, len(enc), orig, enc, f.Body[:orig])
		}
	}
}
