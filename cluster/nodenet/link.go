package nodenet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// maxBatchBytes bounds the payload bytes the writer takes from the
// queue for one write (one frame may be larger).
const maxBatchBytes = 1 << 20

// peer is another node: its send queue, which outlives links, and its
// current link.
type peer struct {
	// Static after newPeer.
	name string
	addr string

	q         sendQueue
	lastHeard atomic.Int64 // Net.since() when bytes or a handshake last arrived
	sent      atomic.Uint64
	received  atomic.Uint64
	dropped   atomic.Uint64
	dropping  atomic.Bool // Send dropped the last frame (logged once per run)
	forgotten atomic.Bool // Net.Forget: no link, no dial, no frames, refused; set under mu

	mu struct {
		sync.Mutex
		link      *link // current link; nil when down
		reachable bool
		links     uint64
	}
}

// isForgotten reports whether Net.Forget forgot p.
func (p *peer) isForgotten() bool { return p.forgotten.Load() }

func newPeer(name, addr string) *peer {
	p := &peer{name: name, addr: addr}
	p.q.signal = make(chan struct{}, 1)
	return p
}

// isReachable reports whether p is reachable.
func (p *peer) isReachable() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.reachable
}

// outFrame is a queued frame.
type outFrame struct {
	lane    Lane
	payload []byte
}

// sendQueue is a peer's bounded queue of frames: Send pushes, the
// current link's writer takes.
type sendQueue struct {
	mu     sync.Mutex
	frames []outFrame
	bytes  int
	signal chan struct{} // capacity 1; never closed
}

// push queues f unless that would pass maxFrames frames or maxBytes
// payload bytes (an empty queue takes any frame).
func (q *sendQueue) push(f outFrame, maxFrames, maxBytes int) bool {
	q.mu.Lock()
	if len(q.frames) > 0 && (len(q.frames) >= maxFrames || q.bytes+len(f.payload) > maxBytes) {
		q.mu.Unlock()
		return false
	}
	q.frames = append(q.frames, f)
	q.bytes += len(f.payload)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
	return true
}

// take moves frames from the head of the queue to dst, at least one if
// any and then while their payloads stay within maxBytes.
func (q *sendQueue) take(dst []outFrame, maxBytes int) []outFrame {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, size := 0, 0
	for n < len(q.frames) && (n == 0 || size+len(q.frames[n].payload) <= maxBytes) {
		size += len(q.frames[n].payload)
		n++
	}
	dst = append(dst, q.frames[:n]...)
	rest := copy(q.frames, q.frames[n:])
	clear(q.frames[rest:])
	q.frames = q.frames[:rest]
	q.bytes -= size
	return dst
}

// clear drops every queued frame and returns how many there were.
func (q *sendQueue) clear() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.frames)
	clear(q.frames)
	q.frames = q.frames[:0]
	q.bytes = 0
	return n
}

func (q *sendQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.frames)
}

// link is one established connection to a peer, with a reader and a
// writer goroutine.
type link struct {
	n    *Net
	p    *peer
	conn net.Conn

	closeOnce sync.Once
	closing   chan struct{} // closed by close
	done      chan struct{} // closed when the reader and writer have returned
}

// close closes the connection, which stops the reader and the writer.
func (l *link) close(why error) {
	l.closeOnce.Do(func() {
		l.conn.Close()
		close(l.closing)
		if !errors.Is(why, ErrClosed) {
			l.n.log.Info("nodenet: link closed", "peer", l.p.name, "remote", l.conn.RemoteAddr(), "why", why)
		}
	})
}

// runLink runs a link to p on conn, whose handshake is done, until it
// fails. It replaces p's link, if any, and starts reading and writing
// only when the old link's goroutines have returned, so that frames
// stay in order across links.
func (n *Net) runLink(p *peer, conn net.Conn) {
	l := &link{n: n, p: p, conn: conn, closing: make(chan struct{}), done: make(chan struct{})}
	defer close(l.done)
	p.mu.Lock()
	if n.ctx.Err() != nil || p.forgotten.Load() { // Close has run or is running over the peers, or Forget
		p.mu.Unlock()
		conn.Close()
		return
	}
	old := p.mu.link
	p.mu.link = l
	p.mu.links++
	p.lastHeard.Store(n.since())
	if !p.mu.reachable {
		p.mu.reachable = true
		n.events.push(event{p.name, true})
	}
	p.mu.Unlock()
	n.log.Info("nodenet: link up", "peer", p.name, "remote", conn.RemoteAddr())
	if old != nil {
		old.close(errors.New("replaced by a new connection"))
		<-old.done
	}
	writerDone := make(chan struct{})
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer close(writerDone)
		l.close(l.writeLoop())
	}()
	l.close(l.readLoop())
	<-writerDone
	p.mu.Lock()
	if p.mu.link == l {
		p.mu.link = nil
	}
	p.mu.Unlock()
}

// readLoop reads frames and hands them to the lanes' handlers until the
// connection fails.
func (l *link) readLoop() error {
	r := bufio.NewReaderSize(heardReader{l}, 64<<10)
	hdr := new([frameHeaderLen]byte)
	for {
		lane, payload, err := readFrame(r, hdr, l.n.cfg.MaxPayload)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("closed by the peer")
			}
			return err
		}
		l.p.received.Add(1)
		switch {
		case lane == LaneControl:
			// A heartbeat.
		case lane > MaxLane:
			return fmt.Errorf("%w: a frame on lane %#x after the handshake", ErrMalformed, uint8(lane))
		default:
			if h := l.n.handlers.Load().frame[lane]; h != nil {
				h(l.p.name, payload)
			}
		}
	}
}

// heardReader reads a link's connection and marks its peer heard
// whenever bytes arrive, so that a large frame on a slow network keeps
// the peer reachable while it arrives.
type heardReader struct{ l *link }

func (h heardReader) Read(b []byte) (int, error) {
	n, err := h.l.conn.Read(b)
	if n > 0 {
		h.l.p.lastHeard.Store(h.l.n.since())
	}
	return n, err
}

// writeLoop writes queued frames, coalesced into one writev per batch,
// and a heartbeat each HeartbeatInterval when nothing else was written,
// until the link closes or a write fails. A write that does not finish
// within Timeout (plus a second per MiB) fails.
func (l *link) writeLoop() error {
	q := &l.p.q
	tick := time.NewTicker(l.n.cfg.HeartbeatInterval)
	defer tick.Stop()
	var (
		batch   []outFrame
		headers []byte
		bufs    net.Buffers
		wrote   bool // since the last tick
	)
	// A link before this one may have taken the signal for frames it
	// left in the queue.
	select {
	case q.signal <- struct{}{}:
	default:
	}
	for {
		select {
		case <-l.closing:
			return ErrClosed
		case <-q.signal:
		case <-tick.C:
			if !wrote {
				batch = append(batch[:0], outFrame{lane: LaneControl})
				if err := l.write(batch, &headers, &bufs); err != nil {
					return err
				}
			}
			wrote = false
			continue
		}
		for {
			batch = q.take(batch[:0], maxBatchBytes)
			if len(batch) == 0 {
				break
			}
			if err := l.write(batch, &headers, &bufs); err != nil {
				return err
			}
			l.p.sent.Add(uint64(len(batch)))
			wrote = true
		}
	}
}

// write writes batch with one writev.
func (l *link) write(batch []outFrame, headers *[]byte, bufs *net.Buffers) error {
	h := (*headers)[:0]
	size := 0
	for _, f := range batch {
		h = appendFrameHeader(h, f.lane, len(f.payload))
		size += len(f.payload)
	}
	*headers = h
	b := (*bufs)[:0]
	for i, f := range batch {
		b = append(b, h[i*frameHeaderLen:(i+1)*frameHeaderLen])
		if len(f.payload) > 0 {
			b = append(b, f.payload)
		}
	}
	*bufs = b
	l.conn.SetWriteDeadline(time.Now().Add(l.n.cfg.Timeout + time.Duration(size>>20)*time.Second))
	_, err := b.WriteTo(l.conn)
	clear(batch) // let the payloads go
	clear(*bufs)
	return err
}
