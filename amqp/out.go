package amqp

import (
	"net"
	"sync"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/netserve"
)

// outQueue holds a connection's outgoing frames. Any goroutine may append
// (the reader with replies, queue dispatchers with deliveries, log writers
// with confirms); the writer goroutine swaps the buffer out and writes it
// with one system call, so frames coalesce under load.
type outQueue struct {
	mu struct {
		sync.Mutex
		buf     []byte
		closed  bool
		flushes []*confirms // confirm states to flush before the next write
	}
	drained *sync.Cond    // signalled when the writer takes the buffer
	signal  chan struct{} // cap 1; never closed
	limit   int           // deliveries wait while more than this is queued
}

func newOutQueue(limit int) *outQueue {
	q := &outQueue{signal: make(chan struct{}, 1), limit: limit}
	q.drained = sync.NewCond(&q.mu.Mutex)
	return q
}

// frames appends what fn writes. It reports false once the queue is
// closed. It never waits: replies and confirms must not block.
func (q *outQueue) frames(fn func(b []byte) []byte) bool {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return false
	}
	q.mu.buf = fn(q.mu.buf)
	q.mu.Unlock()
	q.kick()
	return true
}

// waitRoom waits while more than the limit is queued, so that a slow
// client pushes back on the queues that deliver to it.
func (q *outQueue) waitRoom() {
	q.mu.Lock()
	for len(q.mu.buf) > q.limit && !q.mu.closed {
		q.drained.Wait()
	}
	q.mu.Unlock()
}

func (q *outQueue) kick() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// requestFlush asks the writer to flush c's settled confirms before its
// next write: completions that arrive together coalesce into one ack.
func (q *outQueue) requestFlush(c *confirms) {
	q.mu.Lock()
	if !c.queued && !q.mu.closed {
		c.queued = true
		q.mu.flushes = append(q.mu.flushes, c)
	}
	q.mu.Unlock()
	q.kick()
}

// runFlushes flushes the confirm states queued by requestFlush.
func (q *outQueue) runFlushes(scratch []*confirms) []*confirms {
	q.mu.Lock()
	scratch = append(scratch[:0], q.mu.flushes...)
	clear(q.mu.flushes)
	q.mu.flushes = q.mu.flushes[:0]
	for _, c := range scratch {
		c.queued = false
	}
	q.mu.Unlock()
	for _, c := range scratch {
		c.flush()
	}
	clear(scratch)
	return scratch[:0]
}

// close refuses further frames; the writer sends what is queued and
// exits.
func (q *outQueue) close() {
	q.mu.Lock()
	q.mu.closed = true
	q.drained.Broadcast()
	q.mu.Unlock()
	q.kick()
}

// writeLoop is the connection's writer goroutine. It sends a heartbeat
// when nothing was written for half the heartbeat interval, counts what it
// writes in stats, and returns when the queue is closed and drained, on a
// write error, or when done is closed.
func (q *outQueue) writeLoop(nc net.Conn, stats *netserve.Counters, heartbeat func() time.Duration, done <-chan struct{}) error {
	defer q.close()
	var spare []byte
	var flushes []*confirms
	lastWrite := time.Now()
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-q.signal:
		case <-ticker.C:
			if hb := heartbeat(); hb > 0 && time.Since(lastWrite) >= hb/2 {
				q.frames(wire.AppendHeartbeat)
			}
			continue
		case <-done:
			return nil
		}
		flushes = q.runFlushes(flushes)
		q.mu.Lock()
		buf, closed := q.mu.buf, q.mu.closed
		q.mu.buf = spare[:0]
		q.drained.Broadcast()
		q.mu.Unlock()
		if len(buf) > 0 {
			nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			n, err := nc.Write(buf)
			stats.Sent(int64(n))
			if err != nil {
				return err
			}
			lastWrite = time.Now()
		}
		if cap(buf) <= 4<<20 {
			spare = buf
		} else {
			spare = nil
		}
		if closed {
			q.mu.Lock()
			empty := len(q.mu.buf) == 0
			q.mu.Unlock()
			if empty {
				return nil
			}
			q.kick()
		}
	}
}
