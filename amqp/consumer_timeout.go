package amqp

import (
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
)

// Consumer timeout (RabbitMQ ≤4.2 consumer_timeout): a channel whose
// oldest unacked delivery is older than Config.ConsumerTimeout is closed
// with 406 and its unacked messages are requeued. A timer per channel
// looks at the oldest unacked delivery (the first: they are in tag order)
// every quarter of the timeout, at most every minute (RabbitMQ ticks
// every 60 s).
//
// The timer runs outside the reader goroutine: it ends the consumers,
// requeues the unacked messages and sends channel.close itself (what
// needs only ch.mu), and sets fired; the reader then finishes the close
// (state, a pending publish, a transaction's buffered acks) on the
// channel's next frame or when the connection ends.

// DefaultConsumerTimeout is RabbitMQ's consumer_timeout.
const DefaultConsumerTimeout = 30 * time.Minute

var monoEpoch = time.Now()

// monoNow is a monotonic clock reading in nanoseconds, never 0.
func monoNow() int64 { return int64(time.Since(monoEpoch)) + 1 }

type timeoutState struct {
	t       *time.Timer // guarded by ch.mu
	fired   atomic.Bool // the timer closed the channel
	handled bool        // owned by the reader: timedOut ran
}

func (ch *channel) timeoutValue() time.Duration {
	if ch.c.srv == nil {
		return 0
	}
	return ch.c.srv.cfg.ConsumerTimeout
}

func timeoutPeriod(d time.Duration) time.Duration {
	p := d / 4
	if p < 5*time.Millisecond {
		p = 5 * time.Millisecond
	}
	if p > time.Minute {
		p = time.Minute
	}
	return p
}

// armTimeout starts the channel's timer, if there is a timeout.
func (ch *channel) armTimeout() {
	d := ch.timeoutValue()
	if d <= 0 {
		return
	}
	ch.mu.Lock()
	ch.timeout.t = time.AfterFunc(timeoutPeriod(d), ch.checkTimeout)
	ch.mu.Unlock()
}

// REQUIRES: ch.mu held.
func (ch *channel) stopTimeoutLocked() {
	if ch.timeout.t != nil {
		ch.timeout.t.Stop()
	}
}

// checkTimeout runs on the timer.
func (ch *channel) checkTimeout() {
	d := ch.timeoutValue()
	ch.mu.Lock()
	if ch.mu.closed {
		ch.mu.Unlock()
		return
	}
	now := monoNow()
	expired := false
	for _, a := range ch.mu.unacked {
		if a.at != 0 {
			expired = now-a.at > int64(d)
			break
		}
	}
	if !expired {
		ch.timeout.t.Reset(timeoutPeriod(d))
		ch.mu.Unlock()
		return
	}
	ch.mu.closed = true
	consumers := ch.mu.consumers
	ch.mu.consumers = map[string]*consumer{}
	unacked := ch.mu.unacked
	ch.mu.unacked = nil
	ch.timeout.fired.Store(true)
	ch.mu.Unlock()
	for _, cs := range consumers {
		cs.stop()
	}
	requeueAll(unacked)
	ch.conf.close()
	text := "PRECONDITION_FAILED - delivery acknowledgement on channel " + strconv.Itoa(int(ch.id)) +
		" timed out. Timeout value used: " + strconv.FormatInt(d.Milliseconds(), 10) +
		" ms. This timeout value can be configured, see consumers doc guide to learn more"
	ch.c.log.Debug("channel error", "channel", ch.id, "code", wire.PreconditionFailed, "text", text)
	ch.c.send(ch.id, &wire.ChannelClose{ReplyCode: wire.PreconditionFailed, ReplyText: text})
}

// requeueAll requeues deliveries in delivery order per queue, without the
// reader's scratch buffers.
func requeueAll(acks []pendingAck) {
	for len(acks) > 0 {
		q := acks[0].q
		var ids []uint64
		rest := acks[:0]
		for _, a := range acks {
			if a.q == q {
				ids = append(ids, a.id)
			} else {
				rest = append(rest, a)
			}
		}
		slices.Sort(ids)
		q.Requeue(ids...)
		acks = rest
	}
}

// timedOut finishes, on the reader goroutine, a close by the timer.
func (ch *channel) timedOut() {
	if ch.timeout.handled {
		return
	}
	ch.timeout.handled = true
	ch.state = chanClosing
	ch.assembly.reset()
	if ch.tx != nil {
		var unacked []pendingAck
		for _, a := range ch.tx.acks {
			unacked = append(unacked, a.acks...)
		}
		ch.tx.reset()
		requeueAll(unacked)
	}
}
