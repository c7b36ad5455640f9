package streamproto

import (
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/alarm"
)

// Ensure a stream publisher blocked for longer than two heartbeat
// intervals is not dropped as silent (it was not read), shows as
// blocked, and has its messages confirmed once the alarm clears; and
// that a blocked connection can be force-closed.
func TestAlarmBlockedPublisherOutlivesHeartbeat(t *testing.T) {
	tb := startBroker(t, brokerOpts{heartbeat: 1})
	env := newEnv(t, tb)
	if err := env.DeclareStream("s", nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer("s", nil)
	if err != nil {
		t.Fatal(err)
	}
	confirms := p.NotifyPublishConfirmation()
	tb.broker.Alarms().Set(alarm.Memory, true)
	// Larger than the reader's buffer: its body is read from the socket
	// after the wait.
	if err := p.Send(amqp.NewMessage(make([]byte, 300<<10))); err != nil {
		t.Fatal(err)
	}
	for _, c := range tb.broker.Conns() {
		if hb := c.Info().Heartbeat; hb != 1 {
			t.Fatalf("heartbeat %d s, want 1", hb)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !hasState(tb.broker, queues.StateBlocked) {
		if time.Now().After(deadline) {
			t.Fatal("no connection blocked")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case c := <-confirms:
		t.Fatalf("confirmed while blocked: %v", c)
	case <-time.After(3 * time.Second): // three heartbeat intervals
	}
	tb.broker.Alarms().Set(alarm.Memory, false)
	select {
	case cs := <-confirms:
		if len(cs) != 1 || !cs[0].IsConfirmed() {
			t.Fatalf("confirms %v", cs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not confirmed after the alarm")
	}

	tb.broker.Alarms().Set(alarm.Disk, true)
	defer tb.broker.Alarms().Set(alarm.Disk, false)
	closed := p.NotifyClose()
	if err := p.Send(amqp.NewMessage([]byte("held"))); err != nil {
		t.Fatal(err)
	}
	for !hasState(tb.broker, queues.StateBlocked) {
		time.Sleep(10 * time.Millisecond)
	}
	tb.broker.CloseConns(func(ci queues.ConnInfo) bool { return ci.State == queues.StateBlocked }, "bye")
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("blocked producer not closed")
	}
}

func hasState(b *queues.Broker, state string) bool {
	for _, c := range b.Conns() {
		if c.Info().State == state {
			return true
		}
	}
	return false
}
