package amqp1

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

func declare(t testing.TB, ch *amqp091.Channel, q string, args amqp091.Table) {
	t.Helper()
	if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
		t.Fatalf("declare %s: %v", q, err)
	}
}

// get reads n messages from q over AMQP 0-9-1.
func get(t testing.TB, ch *amqp091.Channel, q string, n int) []amqp091.Delivery {
	t.Helper()
	var out []amqp091.Delivery
	deadline := time.Now().Add(wait)
	for len(out) < n {
		if time.Now().After(deadline) {
			t.Fatalf("get %s: %d messages, want %d", q, len(out), n)
		}
		d, ok, err := ch.Get(q, true)
		if err != nil {
			t.Fatalf("get %s: %v", q, err)
		}
		if !ok {
			continue // a publish may still be on its way (settled sends are not waited for)
		}
		out = append(out, d)
	}
	return out
}

// Ensure a message sent to each v2 target form reaches its queue, read
// back over AMQP 0-9-1 with its properties and application properties,
// in order, and that each unsettled send is accepted.
func TestPublishTargets(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "q1", nil)
	declare(t, ch, "q 2", nil)
	if err := ch.ExchangeDeclare("x1", "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("q1", "k/1", "x1", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("fan", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("q1", "", "fan", false, nil); err != nil {
		t.Fatal(err)
	}
	_, s := tb.dial(t, nil)

	targets := []string{"/queues/q1", "/exchanges/x1/k%2F1", "/exchanges/fan"}
	for i, addr := range targets {
		snd, err := s.NewSender(ctxT(t), addr, nil)
		if err != nil {
			t.Fatalf("sender %s: %v", addr, err)
		}
		for j := range 3 {
			m := goamqp.NewMessage(fmt.Appendf(nil, "m%d-%d", i, j))
			m.Properties = &goamqp.MessageProperties{MessageID: fmt.Sprintf("id%d", j), ContentType: ptr("text/plain")}
			m.ApplicationProperties = map[string]any{"n": int64(j), "s": "v"}
			r, err := snd.SendWithReceipt(ctxT(t), m, nil)
			if err != nil {
				t.Fatalf("send to %s: %v", addr, err)
			}
			st, err := r.Wait(ctxT(t))
			if _, ok := st.(*goamqp.StateAccepted); !ok || err != nil {
				t.Fatalf("send to %s: state %#v, %v; want accepted", addr, st, err)
			}
		}
		snd.Close(ctxT(t))
	}
	// The null target: each message's "to"; one with a percent-encoded
	// queue name.
	snd, err := s.NewSender(ctxT(t), "", nil)
	if err != nil {
		t.Fatalf("anonymous sender: %v", err)
	}
	for _, to := range []string{"/queues/q1", "/queues/q%202"} {
		m := goamqp.NewMessage([]byte("to " + to))
		m.Properties = &goamqp.MessageProperties{To: ptr(to)}
		if err := snd.Send(ctxT(t), m, nil); err != nil {
			t.Fatalf("send to %s: %v", to, err)
		}
	}
	// A "to" that names nothing is rejected, the link stays.
	m := goamqp.NewMessage([]byte("x"))
	m.Properties = &goamqp.MessageProperties{To: ptr("/exchanges/missing")}
	var ae *goamqp.Error
	if err := snd.Send(ctxT(t), m, nil); !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotFound {
		t.Fatalf("send to a missing exchange: %v, want rejected with not-found", err)
	}

	ds := get(t, ch, "q1", 10)
	for i, d := range ds[:9] {
		want := fmt.Sprintf("m%d-%d", i/3, i%3)
		if string(d.Body) != want {
			t.Fatalf("message %d: body %q, want %q", i, d.Body, want)
		}
		if d.MessageId != fmt.Sprintf("id%d", i%3) || d.ContentType != "text/plain" {
			t.Errorf("message %d: message-id %q content-type %q", i, d.MessageId, d.ContentType)
		}
		if d.Headers["n"] != int64(i%3) || d.Headers["s"] != "v" {
			t.Errorf("message %d: headers %v", i, d.Headers)
		}
	}
	if want := []string{"", "x1", "fan"}; ds[0].Exchange != want[0] || ds[3].Exchange != want[1] || ds[6].Exchange != want[2] {
		t.Errorf("exchanges %q %q %q, want %q", ds[0].Exchange, ds[3].Exchange, ds[6].Exchange, want)
	}
	if ds[3].RoutingKey != "k/1" {
		t.Errorf("routing key %q, want k/1", ds[3].RoutingKey)
	}
	if string(ds[9].Body) != "to /queues/q1" {
		t.Errorf("anonymous: %q", ds[9].Body)
	}
	if d := get(t, ch, "q 2", 1); string(d[0].Body) != "to /queues/q%202" {
		t.Errorf("anonymous, encoded: %q", d[0].Body)
	}
}

// Ensure attaching to a target or source that does not exist is refused
// with amqp:not-found and RabbitMQ's description, and an address that
// is not of the v2 format with amqp:invalid-field.
func TestAttachRefused(t *testing.T) {
	tb := startBroker(t, Config{})
	_, s := tb.dial(t, nil)
	cases := []struct {
		addr     string
		receiver bool
		cond     goamqp.ErrCond
		desc     string
	}{
		{"/queues/nope", false, goamqp.ErrCondNotFound, "no queue 'nope' in vhost '/'"},
		{"/exchanges/nope/k", false, goamqp.ErrCondNotFound, "no exchange 'nope' in vhost '/'"},
		{"/queues/nope", true, goamqp.ErrCondNotFound, "no queue 'nope' in vhost '/'"},
		{"/topic/x", false, goamqp.ErrCondInvalidField, ""},
		{"/exchanges/", false, goamqp.ErrCondInvalidField, ""},
	}
	for _, tc := range cases {
		var err error
		if tc.receiver {
			_, err = s.NewReceiver(ctxT(t), tc.addr, nil)
		} else {
			_, err = s.NewSender(ctxT(t), tc.addr, nil)
		}
		var ae *goamqp.Error
		if !errors.As(err, &ae) || ae.Condition != tc.cond || tc.desc != "" && ae.Description != tc.desc {
			t.Errorf("attach %s (receiver %v): %v, want %s %q", tc.addr, tc.receiver, err, tc.cond, tc.desc)
		}
	}
}

// Ensure an unsettled message that routes nowhere is released, and a
// settled one is dropped without a word.
func TestUnroutableReleased(t *testing.T) {
	tb := startBroker(t, Config{})
	_, s := tb.dial(t, nil)
	snd, err := s.NewSender(ctxT(t), "/exchanges/amq.direct/nobody", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := snd.SendWithReceipt(ctxT(t), goamqp.NewMessage([]byte("x")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := r.Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	} else if _, ok := st.(*goamqp.StateReleased); !ok {
		t.Fatalf("state %#v, want released", st)
	}
	settled, err := s.NewSender(ctxT(t), "/exchanges/amq.direct/nobody", &goamqp.SenderOptions{SettlementMode: ptr(goamqp.SenderSettleModeSettled)})
	if err != nil {
		t.Fatal(err)
	}
	if err := settled.Send(ctxT(t), goamqp.NewMessage([]byte("x")), nil); err != nil {
		t.Fatal(err)
	}
}

// Ensure a message larger than both sides' max-frame-size goes through
// in several transfers each way.
func TestMultiFrameTransfer(t *testing.T) {
	tb := startBroker(t, Config{MaxFrameSize: 4096})
	declare(t, tb.channel(t), "big", nil)
	_, s := tb.dial(t, &goamqp.ConnOptions{MaxFrameSize: 1024})
	body := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 000 bytes
	snd, err := s.NewSender(ctxT(t), "/queues/big", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Send(ctxT(t), goamqp.NewMessage(body), nil); err != nil {
		t.Fatal(err)
	}
	rcv, err := s.NewReceiver(ctxT(t), "/queues/big", nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.GetData(), body) {
		t.Fatalf("received %d bytes, want the %d sent", len(m.GetData()), len(body))
	}
	if err := rcv.AcceptMessage(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// Ensure the x-cc annotation adds routing keys, and a user-id that is
// not the connection's user detaches the link with unauthorized-access.
func TestCCAndUserID(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "a", nil)
	declare(t, ch, "b", nil)
	_, s := tb.dial(t, nil)
	snd, err := s.NewSender(ctxT(t), "/queues/a", nil) // the default exchange: "b" reaches queue b
	if err != nil {
		t.Fatal(err)
	}
	m := goamqp.NewMessage([]byte("cc"))
	m.Annotations = goamqp.Annotations{"x-cc": []any{"b"}}
	if err := snd.Send(ctxT(t), m, nil); err != nil {
		t.Fatal(err)
	}
	get(t, ch, "a", 1)
	get(t, ch, "b", 1)

	m = goamqp.NewMessage([]byte("impostor"))
	m.Properties = &goamqp.MessageProperties{UserID: []byte("admin")}
	err = snd.Send(ctxT(t), m, nil)
	var le *goamqp.LinkError
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != goamqp.ErrCondUnauthorizedAccess {
		t.Fatalf("send with another user-id: %v, want the link detached with unauthorized-access", err)
	}
}

// Ensure publisher flow control paces a connection whose credit is
// tiny without losing or stalling anything: every message is accepted.
func TestPublishFlowControl(t *testing.T) {
	tb := startBroker(t, Config{PublishCredit: 1024})
	declare(t, tb.channel(t), "q", nil)
	_, s := tb.dial(t, nil)
	snd, err := s.NewSender(ctxT(t), "/queues/q", nil)
	if err != nil {
		t.Fatal(err)
	}
	var receipts []goamqp.SendReceipt
	for range 200 {
		r, err := snd.SendWithReceipt(ctxT(t), goamqp.NewMessage(make([]byte, 1000)), nil)
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, r)
	}
	for i, r := range receipts {
		if st, err := r.Wait(ctxT(t)); err != nil {
			t.Fatal(err)
		} else if _, ok := st.(*goamqp.StateAccepted); !ok {
			t.Fatalf("message %d: %#v", i, st)
		}
	}
	waitReady(t, tb, "q", 200)
}
