package streamproto

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync"
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
// the subscription goroutines append, the writer goroutine drains. Frames
// are encoded straight into the shared buffer, so queuing a frame does not
// allocate in the steady state.
type outQueue struct {
	mu struct {
		sync.Mutex
		buf    []byte
		spans  []fileSpan
		closed bool
	}
	signal chan struct{} // cap 1; never closed
}

func newOutQueue() *outQueue {
	return &outQueue{signal: make(chan struct{}, 1)}
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
// when nothing was written for heartbeat (if set), counts what it writes
// in stats, and returns when the queue is closed and drained or on a write
// error.
func (q *outQueue) writeLoop(nc net.Conn, stats *netserve.Counters, heartbeat func() time.Duration, done <-chan struct{}) error {
	defer q.drop()
	var spare []byte
	var spans []fileSpan
	w := &outWriter{nc: nc, stats: stats}
	lastWrite := time.Now()
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-q.signal:
		case <-ticker.C:
			if hb := heartbeat(); hb > 0 && time.Since(lastWrite) >= hb/2 {
				q.frame(appendHeartbeat)
			}
			continue
		case <-done:
			return nil
		}
		q.mu.Lock()
		buf := q.mu.buf
		q.mu.buf = spare[:0]
		spans = append(spans[:0], q.mu.spans...)
		q.mu.spans = q.mu.spans[:0]
		closed := q.mu.closed
		q.mu.Unlock()
		err := w.writeOut(buf, spans)
		for _, s := range spans {
			s.release()
		}
		if err != nil {
			return err
		}
		if len(buf) > 0 {
			lastWrite = time.Now()
		}
		spare = buf
		if cap(spare) > 2*inlineMax {
			spare = nil // a replay burst's buffer is not kept for the connection's life
		}
		if closed {
			return nil
		}
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
	stats   *netserve.Counters // nil: not counted
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
			if err := w.flush(); err != nil {
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
func (w *outWriter) flush() error {
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
					w, err := unix.Sendfile(int(dst), int(src), &pos, int(min(n, 1<<30)))
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
