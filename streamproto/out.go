package streamproto

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/warren-mq/warren/internal/netserve"
	"github.com/warren-mq/warren/streamproto/wire"
	"golang.org/x/sys/unix"
)

// fileSpan is data to send from a file between two parts of the frame
// buffer.
type fileSpan struct {
	at      int // position in the frame buffer where the file data goes
	file    *os.File
	pos, n  int64
	release func() // called once the data is sent (or dropped)
}

// outQueue is the connection's outgoing frames: the reader goroutine and
// the subscription goroutines append, and whoever holds the socket
// drains. Frames are encoded straight into the shared buffer, so queuing
// a frame does not allocate in the steady state.
//
// The socket is held by one goroutine at a time (mu.busy): normally the
// writer goroutine (writeLoop), which may block; or a goroutine that
// delivered a batch of chunks (a subscription's, or the reader
// delivering on credit) and writes what is queued without blocking
// (flush), which saves a hand-off to the writer goroutine per batch.
// TLS connections have no descriptor to write to without blocking:
// there flush only wakes the writer goroutine. Whoever
// holds the socket writes everything queued before letting go, so an
// appender that finds it busy needs to wake nobody. A non-blocking write
// that cannot finish hands the socket and the rest of its bytes to the
// writer goroutine (mu.handoff), so only the writer goroutine ever
// waits on the socket: a client that stops reading blocks neither a
// subscription goroutine nor the reader, and stopping a subscription
// never waits for the network.
type outQueue struct {
	mu struct {
		sync.Mutex
		buf    []byte
		spans  []fileSpan
		closed bool
		// busy: a goroutine holds the socket and the fields below that
		// are marked "owned by the socket's holder".
		busy bool
		// handoff: the holder (a non-blocking flush) could not write
		// everything; left holds the rest, for the writer goroutine,
		// which takes the socket over.
		handoff bool
		// err is a non-blocking flush's write error, for the writer
		// goroutine to return.
		err error
	}
	signal chan struct{} // cap 1; never closed

	// Static after newOutQueue.
	nc    net.Conn
	raw   syscall.RawConn // nc's descriptor; nil without one (TLS): no flush writes
	stats *netserve.Counters

	// Owned by the socket's holder (mu.busy).
	w     outWriter
	left  []byte // unwritten bytes of a flush, written first on handoff
	spare []byte // the previous frame buffer, for reuse

	spans []fileSpan // the writer goroutine's, for reuse by writeQueued
	// nb is writeNonblocking's state, kept here so that a flush does
	// not allocate a closure for RawConn.Write.
	nb struct {
		fn  func(fd uintptr) bool // q.writeFD, made once
		b   []byte
		n   int
		err error
	}

	lastWrite atomic.Int64 // Unix ns of the last write of frames, for heartbeats
}

func newOutQueue(nc net.Conn, stats *netserve.Counters) *outQueue {
	q := &outQueue{signal: make(chan struct{}, 1), nc: nc, stats: stats,
		w: outWriter{nc: nc, stats: stats}}
	if _, isTLS := nc.(*tls.Conn); !isTLS {
		if sc, ok := nc.(syscall.Conn); ok {
			if raw, err := sc.SyscallConn(); err == nil {
				q.raw = raw
				q.w.raw = raw
			}
		}
	}
	q.nb.fn = q.writeFD
	q.lastWrite.Store(time.Now().UnixNano())
	return q
}

// frame appends one frame built by fn. It reports false once the queue is
// closed.
func (q *outQueue) frame(fn func(b []byte) []byte) bool {
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

// deliver appends a frame whose head is built by fn and whose tail is n
// bytes of file at pos. release is called when the data has been sent or
// dropped.
func (q *outQueue) deliver(fn func(b []byte) []byte, file *os.File, pos, n int64, release func()) bool {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		release()
		return false
	}
	q.mu.buf = fn(q.mu.buf)
	q.mu.spans = append(q.mu.spans, fileSpan{at: len(q.mu.buf), file: file, pos: pos, n: n, release: release})
	q.mu.Unlock()
	q.kick()
	return true
}

// inlineMax bounds the frame bytes queued in memory that deliverInline
// adds to: past it a chunk goes as a file span (sent with sendfile or
// staged at write time), so a slow client holds at most this much chunk
// data per connection in the queue.
const inlineMax = 256 << 10

// deliverInline appends a frame built by fn (head and data both) without
// waking the writer, and reports ok. It reports queued false, building
// nothing, when inlineMax bytes are already queued (the caller sends the
// chunk with deliver instead), and ok false once the queue is closed.
func (q *outQueue) deliverInline(fn func(b []byte) []byte) (queued, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return false, false
	}
	if len(q.mu.buf) >= inlineMax {
		return false, true
	}
	q.mu.buf = fn(q.mu.buf)
	return true, true
}

func (q *outQueue) kick() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// flushRounds bounds the buffers one flush writes: frames queued while
// it writes are written too, up to this many rounds, then left to the
// writer goroutine, so a flush's caller is not held indefinitely by
// other goroutines' frames.
const flushRounds = 4

// flush gets what is queued on its way: it writes the queued frames
// itself, without blocking, when the socket is free and nothing queued
// needs a file read (a span); otherwise it wakes the writer goroutine (or
// leaves it to the socket's holder). Deliveries call it once per batch
// of chunks, before the goroutine would sleep, instead of kick: the
// batch then costs a write system call and no goroutine hand-off.
func (q *outQueue) flush() {
	if q.raw == nil {
		q.kick()
		return
	}
	q.mu.Lock()
	if q.mu.busy {
		// The holder writes what is queued before letting go, or
		// (handoff) the writer goroutine was woken.
		q.mu.Unlock()
		return
	}
	for round := 0; ; round++ {
		if len(q.mu.buf) == 0 && len(q.mu.spans) == 0 && !q.mu.closed {
			q.mu.Unlock()
			return
		}
		if round == flushRounds || len(q.mu.spans) > 0 || q.mu.closed || q.mu.err != nil {
			// Spans need reads and maybe sendfile; a closed queue's
			// drain and exit are the writer goroutine's.
			q.mu.busy = false
			q.mu.Unlock()
			q.kick()
			return
		}
		q.mu.busy = true
		buf := q.mu.buf
		q.mu.buf = q.spare[:0]
		q.spare = nil
		q.mu.Unlock()
		n, err := q.writeNonblocking(buf)
		q.mu.Lock()
		if err != nil || n < len(buf) {
			if err != nil {
				q.mu.err = err
				q.mu.busy = false
			} else {
				q.left = buf[n:]
				q.mu.handoff = true
			}
			q.mu.Unlock()
			q.kick()
			return
		}
		q.keepSpare(buf)
		q.mu.busy = false
	}
}

// writeNonblocking writes b to the socket as far as it can without
// waiting. REQUIRES: the socket held (mu.busy), q.raw set.
func (q *outQueue) writeNonblocking(b []byte) (int, error) {
	q.nb.b, q.nb.n, q.nb.err = b, 0, nil
	err := q.raw.Write(q.nb.fn)
	n, werr := q.nb.n, q.nb.err
	q.nb.b, q.nb.err = nil, nil
	if n > 0 {
		q.stats.Sent(int64(n))
		q.lastWrite.Store(time.Now().UnixNano())
	}
	if werr == nil {
		werr = err
	}
	return n, werr
}

// writeFD is q.nb.fn: it writes q.nb.b to fd until done or EAGAIN, with
// raw system calls (see sockio.go).
func (q *outQueue) writeFD(fd uintptr) bool {
	b := q.nb.b
	for q.nb.n < len(b) {
		m, errno := rawRW(unix.SYS_WRITE, fd, b[q.nb.n:]) // see sockio.go
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN:
			return true // the rest goes to the writer goroutine
		case errno != 0:
			q.nb.err = os.NewSyscallError("write", errno)
			return true
		}
		q.nb.n += m
	}
	return true
}

// keepSpare keeps a written frame buffer for reuse, unless a replay
// burst made it large. REQUIRES: the socket held.
func (q *outQueue) keepSpare(buf []byte) {
	if cap(buf) <= 2*inlineMax {
		q.spare = buf[:0]
	}
}

// close refuses further frames; the writer sends what is queued and exits.
func (q *outQueue) close() {
	q.mu.Lock()
	q.mu.closed = true
	q.mu.Unlock()
	q.kick()
}

// drop discards what is queued, releasing file spans. The writer calls it
// when it exits.
func (q *outQueue) drop() {
	q.mu.Lock()
	q.mu.closed = true
	spans := q.mu.spans
	q.mu.spans = nil
	q.mu.buf = nil
	q.mu.Unlock()
	for _, s := range spans {
		s.release()
	}
}

// writeLoop is the connection's writer goroutine. It sends a heartbeat
// when nothing was written for heartbeat (if set), and returns when the
// queue is closed and drained, when done is closed, or on a write error
// (its own or a flush's).
func (q *outQueue) writeLoop(heartbeat func() time.Duration, done <-chan struct{}) error {
	defer q.drop()
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-q.signal:
		case <-ticker.C:
			if hb := heartbeat(); hb > 0 && time.Since(time.Unix(0, q.lastWrite.Load())) >= hb/2 {
				q.frame(appendHeartbeat)
			}
			continue
		case <-done:
			return nil
		}
		if closed, err := q.writeQueued(); err != nil || closed {
			return err
		}
	}
}

// writeQueued is the writer goroutine's turn: unless a flush holds the
// socket, it takes it (or takes it over on handoff) and writes until the
// queue is empty. It reports closed once the queue is closed and
// drained, and a write error (sticky: a flush's too).
func (q *outQueue) writeQueued() (closed bool, err error) {
	spans := q.spans[:0]
	defer func() { q.spans = spans[:0] }()
	held := false // this goroutine holds the socket
	q.mu.Lock()
	for {
		if q.mu.err != nil {
			err := q.mu.err
			q.mu.Unlock()
			return false, err
		}
		if q.mu.busy && !q.mu.handoff && !held {
			// A flush is writing; it wakes this goroutine if it leaves
			// anything.
			q.mu.Unlock()
			return false, nil
		}
		held = true
		if q.mu.handoff {
			q.mu.handoff = false
			left := q.left
			q.left = nil
			q.mu.Unlock()
			if _, err := q.nc.Write(left); err != nil {
				q.mu.Lock()
				q.mu.busy = false
				q.mu.err = err
				q.mu.Unlock()
				return false, err
			}
			q.stats.Sent(int64(len(left)))
			q.lastWrite.Store(time.Now().UnixNano())
			q.mu.Lock()
			continue
		}
		if len(q.mu.buf) == 0 && len(q.mu.spans) == 0 {
			q.mu.busy = false
			closed := q.mu.closed
			q.mu.Unlock()
			return closed, nil
		}
		q.mu.busy = true
		buf := q.mu.buf
		q.mu.buf = q.spare[:0]
		q.spare = nil
		spans = append(spans[:0], q.mu.spans...)
		clear(q.mu.spans)
		q.mu.spans = q.mu.spans[:0]
		q.mu.Unlock()
		err := q.w.writeOut(buf, spans)
		for _, s := range spans {
			s.release()
		}
		clear(spans)
		if err != nil {
			q.mu.Lock()
			q.mu.busy = false
			q.mu.err = err
			q.mu.Unlock()
			return false, err
		}
		if len(buf) > 0 {
			q.lastWrite.Store(time.Now().UnixNano())
		}
		q.mu.Lock()
		q.keepSpare(buf)
	}
}

// Small file spans go through memory: for a span of at most smallSpan
// bytes, one pread and a single writev of frame heads and data cost less
// than a head write plus a sendfile, and wake the reader once instead of
// twice. At low publish rates every chunk is a few records, so this halves
// the system calls and peer wakeups of a live consumer; replay's large
// chunks still go by sendfile.
const (
	smallSpan  = 64 << 10
	scratchMax = 1 << 20 // memory staged per writev, at most
)

// outWriter writes the drained queue; it belongs to the writer goroutine
// and keeps its buffers across batches.
type outWriter struct {
	nc      net.Conn
	raw     syscall.RawConn    // nc's descriptor; nil: writes go through nc (TLS, tests)
	stats   *netserve.Counters // nil: not counted
	wv      rawWritev          // raw's writev state
	vec     net.Buffers
	scratch []byte // staged chunk data; kept between batches only when small
	joined  []byte // vec in one buffer, for TLS connections
}

// writeOut writes buf with the file spans spliced in at their positions.
func (w *outWriter) writeOut(buf []byte, spans []fileSpan) error {
	prev := 0
	for _, s := range spans {
		if s.at > prev {
			w.vec = append(w.vec, buf[prev:s.at])
		}
		prev = s.at
		if s.n > smallSpan {
			// The frame's head waits in the socket for the sendfile
			// (MSG_MORE), so that head and data go in the same
			// segments: one wake-up of the peer, not two.
			if err := w.flushMore(true); err != nil {
				return err
			}
			err := sendFile(w.nc, s.file, s.pos, s.n)
			if err != nil {
				return err
			}
			w.stats.Sent(s.n)
			continue
		}
		if len(w.scratch)+int(s.n) > scratchMax {
			if err := w.flush(); err != nil {
				return err
			}
		}
		// Growing may move scratch; spans already staged keep the old
		// array alive until the flush, so they stay valid.
		start := len(w.scratch)
		w.scratch = slices.Grow(w.scratch, int(s.n))[:start+int(s.n)]
		if _, err := s.file.ReadAt(w.scratch[start:], s.pos); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the file is shorter than promised
			}
			return err
		}
		w.vec = append(w.vec, w.scratch[start:])
	}
	if len(buf) > prev {
		w.vec = append(w.vec, buf[prev:])
	}
	return w.flush()
}

// flush writes the staged buffers with one writev (when the connection
// has a file descriptor) and empties the stage.
func (w *outWriter) flush() error { return w.flushMore(false) }

// flushMore is flush; with more, and a file descriptor, the bytes may
// wait in the socket for the next write (MSG_MORE).
func (w *outWriter) flushMore(more bool) error {
	var err error
	if len(w.vec) > 0 {
		var n int64
		if _, ok := w.nc.(*tls.Conn); ok && len(w.vec) > 1 {
			// Without writev each buffer would be a TLS record and a
			// write of its own: join them.
			for _, b := range w.vec {
				w.joined = append(w.joined, b...)
			}
			var m int
			m, err = w.nc.Write(w.joined)
			n = int64(m)
			w.joined = w.joined[:0]
			if cap(w.joined) > scratchMax {
				w.joined = nil
			}
		} else if w.raw != nil {
			n, err = w.wv.write(w.raw, w.vec, more)
		} else {
			v := w.vec // WriteTo consumes v; w.vec keeps its backing array
			n, err = v.WriteTo(w.nc)
		}
		w.stats.Sent(n)
	}
	clear(w.vec)
	w.vec = w.vec[:0]
	w.scratch = w.scratch[:0]
	if cap(w.scratch) > smallSpan {
		w.scratch = nil // a burst's stage is not kept for the connection's life
	}
	return err
}

// sendFile sends n bytes of f at pos to nc with sendfile(2), without
// touching f's offset (so any number of connections can share f). It
// falls back to a copy for connections without a file descriptor.
func sendFile(nc net.Conn, f *os.File, pos, n int64) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		_, err := io.Copy(nc, io.NewSectionReader(f, pos, n))
		return err
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	fc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	cerr := fc.Control(func(src uintptr) {
		for n > 0 && serr == nil {
			werr := rc.Write(func(dst uintptr) bool {
				for n > 0 {
					k := int(min(n, sendfileMax))
					var w int
					var err error
					if pagesCached(src, pos, k) {
						w, err = rawSendfile(dst, src, &pos, k)
					} else {
						w, err = unix.Sendfile(int(dst), int(src), &pos, k)
					}
					if w > 0 {
						n -= int64(w)
					}
					switch {
					case err == unix.EAGAIN:
						return false // wait until the socket is writable
					case err == unix.EINTR:
						continue
					case err != nil:
						serr = err
						return true
					case w == 0:
						serr = io.ErrUnexpectedEOF // the file is shorter than promised
						return true
					}
				}
				return true
			})
			if werr != nil && serr == nil {
				serr = werr
			}
		}
	})
	return errors.Join(cerr, serr)
}

func appendHeartbeat(b []byte) []byte {
	b, start := wire.BeginFrame(b, wire.KeyHeartbeat, 1)
	return wire.EndFrame(b, start)
}
