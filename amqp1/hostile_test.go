package amqp1

import (
	"math/rand/v2"
	"net"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/internal/amqp10/frame"
)

// Ensure a session's worth of valid frames with one byte changed, many
// times over, never panics or hangs the broker: each connection ends
// with a close (or goes on), and the broker still serves afterwards.
func TestMutatedFrames(t *testing.T) {
	tb := startBroker(t, Config{})
	declare(t, tb.channel(t), "q", amqp091.Table{})
	var script []byte
	add := func(p frame.Performative) {
		var err error
		if script, err = frame.AppendFrame(script, 0, p); err != nil {
			t.Fatal(err)
		}
	}
	add(&frame.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100})
	add(&frame.Attach{Name: "s", Handle: 0, Role: frame.RoleSender, Source: &frame.Source{}, Target: &frame.Target{Address: "/queues/q"}, HasInitialDeliveryCount: true})
	add(&frame.Attach{Name: "r", Handle: 1, Role: frame.RoleReceiver, Source: &frame.Source{Address: "/queues/q"}, Target: &frame.Target{}})
	script, _ = frame.AppendTransferFrame(script, 0, &frame.Transfer{Handle: 0, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{1}, More: true}, []byte{0x00, 0x53, 0x75})
	script, _ = frame.AppendTransferFrame(script, 0, &frame.Transfer{Handle: 0}, []byte{0xa0, 0x02, 'h', 'i'})
	add(&frame.Flow{HasNextIncomingID: true, IncomingWindow: 100, OutgoingWindow: 100, Handle: 1, HasHandle: true, HasDeliveryCount: true, LinkCredit: 3, HasLinkCredit: true, Drain: true})
	add(&frame.Disposition{Role: frame.RoleReceiver, First: 0, Last: 5, Settled: true, State: frame.Modified{UndeliverableHere: true}})
	add(&frame.Detach{Handle: 1, Closed: true})
	add(&frame.End{})
	add(&frame.Close{})

	rng := rand.New(rand.NewPCG(1, 2))
	for range 150 {
		b := append([]byte(nil), script...)
		pos := rng.IntN(len(b))
		b[pos] = byte(rng.IntN(256))
		rc := tb.raw(t)
		rc.open(&frame.Open{ContainerID: "fuzz", MaxFrameSize: 65536})
		rc.write(b)
		rc.nc.(*net.TCPConn).CloseWrite() // a frame cut short ends at EOF, not at the deadline
		for {
			p, err := rc.next()
			if err != nil {
				break // EOF after the close, or a frame Warren would not read either
			}
			if _, ok := p.(*frame.Close); ok {
				break
			}
		}
		rc.nc.Close()
	}
	_, s := tb.dial(t, nil)
	if _, err := s.NewSender(ctxT(t), "/queues/q", nil); err != nil {
		t.Fatalf("after the mutated frames: %v", err)
	}
}
