package amqp1

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
)

// replyReceiver attaches a direct reply-to receiver as RabbitMQ 4.2's
// clients do: a dynamic source with the rabbitmq:volatile-queue
// capability, expiry-policy link-detach, settled.
func replyReceiver(t testing.TB, s *goamqp.Session, credit int32) *goamqp.Receiver {
	t.Helper()
	rcv, err := s.NewReceiver(ctxT(t), "", &goamqp.ReceiverOptions{
		DynamicAddress:            true,
		SourceCapabilities:        []string{"rabbitmq:volatile-queue"},
		SourceExpiryPolicy:        goamqp.ExpiryPolicyLinkDetach,
		RequestedSenderSettleMode: goamqp.SenderSettleModeSettled.Ptr(),
		Credit:                    credit,
	})
	if err != nil {
		t.Fatalf("reply receiver: %v", err)
	}
	if !strings.HasPrefix(rcv.Address(), "/queues/amq.rabbitmq.reply-to.") {
		t.Fatalf("reply address %q", rcv.Address())
	}
	return rcv
}

func sendAccepted(t testing.TB, snd *goamqp.Sender, m *goamqp.Message) {
	t.Helper()
	r, err := snd.SendWithReceipt(ctxT(t), m, nil)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	st, err := r.Wait(ctxT(t))
	if _, ok := st.(*goamqp.StateAccepted); !ok || err != nil {
		t.Fatalf("send: state %#v, %v; want accepted", st, err)
	}
}

// Ensure an AMQP 0-9-1 requester (a consumer of amq.rabbitmq.reply-to)
// gets the replies of an AMQP 1.0 responder, sent to the request's
// reply-to through the null target with "to", and through a sender
// attached to that address, as RabbitMQ 4.2 maps the reply-to
// (/queues/<name>). A reply to a name whose requester is gone is still
// accepted, and a sender can no longer attach to it.
func TestDirectReplyTo091Requester(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "rpc", nil)
	replies, err := ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c2"} {
		if err := ch.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: id, Body: []byte("ping " + id)}); err != nil {
			t.Fatal(err)
		}
	}

	_, s := tb.dial(t, nil)
	rcv, err := s.NewReceiver(ctxT(t), "/queues/rpc", &goamqp.ReceiverOptions{Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	anon, err := s.NewSender(ctxT(t), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var replyTo string
	for i := range 2 {
		req, err := rcv.Receive(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := rcv.AcceptMessage(ctxT(t), req); err != nil {
			t.Fatal(err)
		}
		p := req.Properties
		if p == nil || p.ReplyTo == nil || !strings.HasPrefix(*p.ReplyTo, "/queues/amq.rabbitmq.reply-to.") {
			t.Fatalf("request properties %+v", p)
		}
		replyTo = *p.ReplyTo
		reply := goamqp.NewMessage([]byte("pong " + p.CorrelationID.(string)))
		reply.Properties = &goamqp.MessageProperties{CorrelationID: p.CorrelationID}
		reply.ApplicationProperties = map[string]any{"n": int64(i)}
		if i == 0 {
			reply.Properties.To = &replyTo
			sendAccepted(t, anon, reply)
		} else {
			snd, err := s.NewSender(ctxT(t), replyTo, nil)
			if err != nil {
				t.Fatalf("sender to %s: %v", replyTo, err)
			}
			sendAccepted(t, snd, reply)
			snd.Close(ctxT(t))
		}
	}
	for i, id := range []string{"c1", "c2"} {
		select {
		case d := <-replies:
			if string(d.Body) != "pong "+id || d.CorrelationId != id || d.Headers["n"] != int64(i) {
				t.Errorf("reply %d: %q corr %q headers %v", i, d.Body, d.CorrelationId, d.Headers)
			}
			if d.Exchange != "" || "/queues/"+d.RoutingKey != replyTo {
				t.Errorf("reply %d: exchange %q key %q", i, d.Exchange, d.RoutingKey)
			}
		case <-time.After(wait):
			t.Fatalf("reply %s did not come", id)
		}
	}

	// The requester goes: a reply is still accepted (RabbitMQ 4.2 does
	// not look for the requester when routing), a sender is refused.
	ch.Close()
	deadline := time.Now().Add(wait)
	for {
		_, err := s.NewSender(ctxT(t), replyTo, nil)
		var ae *goamqp.Error
		if errors.As(err, &ae) && ae.Condition == goamqp.ErrCondNotFound {
			if want := "no queue '" + strings.TrimPrefix(replyTo, "/queues/") + "' in vhost '/'"; ae.Description != want {
				t.Errorf("description %q, want %q", ae.Description, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sender to a gone requester: %v, want amqp:not-found", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	late := goamqp.NewMessage([]byte("late"))
	late.Properties = &goamqp.MessageProperties{To: &replyTo}
	sendAccepted(t, anon, late)
}

// Ensure an AMQP 1.0 requester (a receiver with a dynamic volatile
// source) gets replies from an AMQP 0-9-1 responder, publishing to the
// default exchange with the request's reply-to (the /queues/ prefix
// removed), and from an AMQP 1.0 responder; that a reply without credit
// is dropped, not kept; and that other dynamic sources are refused.
func TestDirectReplyTo10Requester(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "rpc", nil)
	_, s := tb.dial(t, nil)
	replies := replyReceiver(t, s, 10)
	addr := replies.Address()
	snd, err := s.NewSender(ctxT(t), "/queues/rpc", nil)
	if err != nil {
		t.Fatal(err)
	}
	req := goamqp.NewMessage([]byte("ping"))
	req.Properties = &goamqp.MessageProperties{ReplyTo: &addr, MessageID: "m1", CorrelationID: "c1"}
	sendAccepted(t, snd, req)

	// An AMQP 0-9-1 responder.
	d := get(t, ch, "rpc", 1)[0]
	if "/queues/"+d.ReplyTo != addr || d.CorrelationId != "c1" {
		t.Fatalf("request over 0-9-1: reply-to %q corr %q; want %q", d.ReplyTo, d.CorrelationId, addr)
	}
	if err := ch.Publish("", d.ReplyTo, true, false, amqp091.Publishing{CorrelationId: "c1", ContentType: "text/plain", Headers: amqp091.Table{"h": "v"}, Body: []byte("pong 091")}); err != nil {
		t.Fatal(err)
	}
	m, err := replies.Receive(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.GetData()) != "pong 091" || m.Properties == nil || m.Properties.CorrelationID != "c1" || m.ApplicationProperties["h"] != "v" {
		t.Fatalf("reply from 0-9-1: %q %+v %v", m.GetData(), m.Properties, m.ApplicationProperties)
	}
	if m.Properties.ContentType == nil || *m.Properties.ContentType != "text/plain" {
		t.Errorf("content-type %v", m.Properties.ContentType)
	}

	// An AMQP 1.0 responder on another connection, through the null
	// target.
	_, s2 := tb.dial(t, nil)
	anon, err := s2.NewSender(ctxT(t), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	reply := goamqp.NewMessage([]byte("pong 1.0"))
	reply.Properties = &goamqp.MessageProperties{To: &addr, CorrelationID: "c2"}
	sendAccepted(t, anon, reply)
	if m, err = replies.Receive(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	if string(m.GetData()) != "pong 1.0" || m.Properties.CorrelationID != "c2" {
		t.Fatalf("reply from 1.0: %q %+v", m.GetData(), m.Properties)
	}

	// No credit: the reply is dropped (accepted all the same).
	noCredit := replyReceiver(t, s, -1) // manual credit, none yet
	nc := noCredit.Address()
	dropped := goamqp.NewMessage([]byte("dropped"))
	dropped.Properties = &goamqp.MessageProperties{To: &nc}
	sendAccepted(t, anon, dropped)
	if err := noCredit.IssueCredit(1); err != nil {
		t.Fatal(err)
	}
	// The credit travels on this connection and the replies on the
	// other: resend until one finds the credit there. The first reply
	// that arrives must be one of these, never the dropped one.
	deadline := time.Now().Add(10 * time.Second)
	for {
		kept := goamqp.NewMessage([]byte("kept"))
		kept.Properties = &goamqp.MessageProperties{To: &nc}
		sendAccepted(t, anon, kept)
		ctx, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
		m, err = noCredit.Receive(ctx, nil)
		cancel()
		if err == nil {
			if string(m.GetData()) != "kept" {
				t.Fatalf("after credit: %q, want kept", m.GetData())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after credit: %v, want kept", err)
		}
	}

	// Other dynamic sources are not supported (RabbitMQ's
	// rabbitmq:temporary-queue is not implemented).
	_, err = s.NewReceiver(ctxT(t), "", &goamqp.ReceiverOptions{DynamicAddress: true})
	var ae *goamqp.Error
	if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotImplemented {
		t.Fatalf("plain dynamic source: %v, want amqp:not-implemented", err)
	}
}
