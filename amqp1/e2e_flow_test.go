package amqp1

import (
	"testing"

	goamqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/queues/alarm"
)

// Ensure a resource alarm closes the session's incoming window (a flow
// with incoming-window 0) when the client sends, and clearing it opens
// the window again, as RabbitMQ throttles AMQP 1.0 publishers.
func TestAlarmClosesWindow(t *testing.T) {
	tb := startBroker(t, Config{})
	declare(t, tb.channel(t), "q", nil)
	rc := tb.raw(t)
	rc.open(&frame.Open{ContainerID: "raw", MaxFrameSize: 65536})
	rc.send(&frame.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100})
	rc.send(&frame.Attach{Name: "s", Handle: 0, Role: frame.RoleSender, Source: &frame.Source{}, Target: &frame.Target{Address: "/queues/q"}, HasInitialDeliveryCount: true})
	credit := false
	for !credit {
		p, err := rc.next()
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := p.(*frame.Flow); ok && f.HasHandle {
			if f.LinkCredit != DefaultMaxLinkCredit {
				t.Fatalf("link credit %d, want %d", f.LinkCredit, DefaultMaxLinkCredit)
			}
			credit = true
		}
	}
	tb.broker.Alarms().Set(alarm.Disk, true)
	msg := []byte{0x00, 0x53, 0x75, 0xa0, 0x02, 'h', 'i'} // one data section
	b, err := frame.AppendTransferFrame(nil, 0, &frame.Transfer{Handle: 0, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{0}, Settled: true}, msg)
	if err != nil {
		t.Fatal(err)
	}
	rc.write(b)
	want := uint32(0)
	for {
		p, err := rc.next()
		if err != nil {
			t.Fatal(err)
		}
		f, ok := p.(*frame.Flow)
		if !ok || f.HasHandle {
			continue
		}
		if f.IncomingWindow != want {
			t.Fatalf("session flow with incoming-window %d, want %d", f.IncomingWindow, want)
		}
		if want != 0 {
			break
		}
		tb.broker.Alarms().Set(alarm.Disk, false)
		want = DefaultMaxIncomingWindow
	}
	waitReady(t, tb, "q", 1) // the message that came in flight is kept
}

// Ensure a quorum queue works over AMQP 1.0: a released message comes
// back redelivered, an accepted one is gone.
func TestQuorum(t *testing.T) {
	tb := startBroker(t, Config{})
	declare(t, tb.channel(t), "qq", amqp091.Table{"x-queue-type": "quorum"})
	_, s := tb.dial(t, nil)
	snd, err := s.NewSender(ctxT(t), "/queues/qq", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := goamqp.NewMessage([]byte("q"))
	m.Header = &goamqp.MessageHeader{Durable: true}
	if err := snd.Send(ctxT(t), m, nil); err != nil {
		t.Fatal(err)
	}
	rcv, err := s.NewReceiver(ctxT(t), "/queues/qq", &goamqp.ReceiverOptions{Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rcv.Receive(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.ReleaseMessage(ctxT(t), got); err != nil {
		t.Fatal(err)
	}
	got, err = rcv.Receive(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.GetData()) != "q" || got.Header == nil || !got.Header.Durable {
		t.Fatalf("redelivered %q header %+v", got.GetData(), got.Header)
	}
	if err := rcv.AcceptMessage(ctxT(t), got); err != nil {
		t.Fatal(err)
	}
	waitReady(t, tb, "qq", 0)
}
