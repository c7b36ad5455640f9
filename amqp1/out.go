package amqp1

import (
	"net"
	"sync"
	"time"

	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/internal/netserve"
)

// output is a connection's outgoing bytes: any goroutine appends whole
// frames under its lock; the writer goroutine swaps the buffer out and
// writes it with one system call, so frames queued meanwhile coalesce.
type output struct {
	mu     sync.Mutex
	buf    []byte
	closed bool          // no more frames: the writer flushes and exits
	wake   chan struct{} // cap 1: there are bytes; never closed
}

func newOutput() *output { return &output{wake: make(chan struct{}, 1)} }

// frames appends with fn; nothing is appended once closed.
func (o *output) frames(fn func([]byte) []byte) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.buf = fn(o.buf)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// close makes the writer exit once it has written what is queued.
func (o *output) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// writeLoop writes until close (after the last bytes), stop or a write
// error. Every heartbeat() interval in which nothing was written it
// writes an empty frame: the peer's idle-time-out halved, 0 for none.
func (o *output) writeLoop(nc net.Conn, stats *netserve.Counters, heartbeat func() time.Duration, stop <-chan struct{}) error {
	const never = time.Hour
	cur := never
	tick := time.NewTicker(cur)
	defer tick.Stop()
	var spare []byte
	wrote := false
	for {
		if hb := heartbeat(); hb > 0 && hb != cur {
			cur = hb
			tick.Reset(cur)
		}
		o.mu.Lock()
		b, closed := o.buf, o.closed
		o.buf = spare[:0]
		o.mu.Unlock()
		if len(b) > 0 {
			n, err := nc.Write(b)
			stats.Sent(int64(n))
			if err != nil {
				return err
			}
			wrote = true
			spare = b[:0]
			continue
		}
		spare = b
		if closed {
			return nil
		}
		select {
		case <-o.wake:
		case <-tick.C:
			if cur != never && !wrote {
				n, err := nc.Write(frame.AppendEmptyFrame(nil))
				stats.Sent(int64(n))
				if err != nil {
					return err
				}
			}
			wrote = false
		case <-stop:
			return nil
		}
	}
}
