package streamproto

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A connection's socket is non-blocking, so reading and writing it
// never waits in the kernel: the reader goroutine and a flush make the
// read(2) and write(2) calls as raw system calls, which skip the Go
// scheduler's system call bookkeeping (entersyscall, exitsyscall). The
// bookkeeping matters for a consumer that gives one credit per chunk: the
// broker is idle between two credits, the runtime's monitor thread
// (sysmon) then sleeps until the next system call, and the first call
// after the idle spell, the read of the credit, woke it each time (a
// futex wake-up, then sysmon's own 20 µs sleeps until it found the
// broker idle again), a quarter of the broker's CPU in a Go-client
// replay. Waiting for the socket still goes through the runtime's
// poller (syscall.RawConn), so deadlines and Close work as with
// net.Conn's Read and Write. Calls that may wait for the disk (pread,
// sendfile) stay ordinary system calls.

// sockReader reads a connection's socket with raw read system calls. It
// is used by one goroutine (the connection's reader).
type sockReader struct {
	raw syscall.RawConn
	fn  func(fd uintptr) bool // r.readFD, made once
	b   []byte                // the current Read's buffer
	n   int
	err error
}

// newSockReader returns a reader of nc's socket, or nc itself when nc
// has no descriptor to read without blocking (TLS).
func newSockReader(nc net.Conn) io.Reader {
	if _, isTLS := nc.(*tls.Conn); isTLS {
		return nc
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nc
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nc
	}
	r := &sockReader{raw: raw}
	r.fn = r.readFD
	return r
}

// Read reads what the socket has, waiting until it has something, the
// read deadline passes or the connection is closed. It returns io.EOF
// once the peer has closed.
func (r *sockReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.b, r.n, r.err = p, 0, nil
	err := r.raw.Read(r.fn)
	n, rerr := r.n, r.err
	r.b, r.err = nil, nil
	if rerr == nil {
		rerr = err
	}
	return n, rerr
}

// readFD is r.fn: one read of the socket into r.b; false asks the poller
// to wait until the socket is readable.
func (r *sockReader) readFD(fd uintptr) bool {
	for {
		n, errno := rawRW(unix.SYS_READ, fd, r.b)
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN:
			return false
		case errno != 0:
			r.err = os.NewSyscallError("read", errno)
		case n == 0:
			r.err = io.EOF
		default:
			r.n = n
		}
		return true
	}
}

// rawRW makes read(2) or write(2) (trap) on fd with b, a non-empty
// buffer, as a raw system call. Only for descriptors in non-blocking
// mode: the goroutine keeps its P during the call.
func rawRW(trap, fd uintptr, b []byte) (int, syscall.Errno) {
	n, _, errno := unix.RawSyscall(trap, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return int(n), errno
}

// sendfileMax bounds one sendfile call.
const sendfileMax = 1 << 30

// cachestatMissing is set once cachestat(2) turns out to be missing
// (Linux before 6.5): sendFile then makes ordinary system calls only.
var cachestatMissing atomic.Bool

// pageSize is the page cache's unit.
var pageSize = int64(os.Getpagesize())

// pagesCached reports whether the page cache holds every page of n
// bytes of file fd at pos (cachestat(2), as a raw system call: it
// never waits). A sendfile of such bytes waits for no disk read, so
// sendFile makes it a raw system call: an ordinary one, which a large
// chunk's sendfile keeps going for longer than sysmon's 20 µs tick,
// has its P taken away and handed to another thread, and keeps sysmon
// polling every 20 µs, 14% of the broker's CPU in a lean-client replay
// of large chunks.
func pagesCached(fd uintptr, pos int64, n int) bool {
	if cachestatMissing.Load() || n <= 0 {
		return false
	}
	first, end := pos/pageSize, (pos+int64(n)+pageSize-1)/pageSize
	rng := unix.CachestatRange{Off: uint64(first * pageSize), Len: uint64((end - first) * pageSize)}
	var st unix.Cachestat_t
	_, _, errno := unix.RawSyscall6(unix.SYS_CACHESTAT, fd, uintptr(unsafe.Pointer(&rng)), uintptr(unsafe.Pointer(&st)), 0, 0, 0)
	if errno != 0 {
		if errno == unix.ENOSYS {
			cachestatMissing.Store(true)
		}
		return false
	}
	return st.Cache >= uint64(end-first)
}

// rawSendfile is unix.Sendfile as a raw system call, for bytes in the
// page cache (pagesCached) to a non-blocking socket.
func rawSendfile(dst, src uintptr, pos *int64, n int) (int, error) {
	w, _, errno := unix.RawSyscall6(unix.SYS_SENDFILE, dst, src, uintptr(unsafe.Pointer(pos)), uintptr(n), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(w), nil
}

// rawWritev writes buffers to a non-blocking socket with raw writev
// calls, waiting for room through the poller (RawConn.Write). It keeps
// its iovec array between writes, so a write allocates nothing.
type rawWritev struct {
	fn  func(fd uintptr) bool // wv.writev, made once
	iov []unix.Iovec
	i   int // iov[i:] is left to write
	n   int64
	err error
	// more makes the writes sendmsg(2) with MSG_MORE: the bytes wait
	// in the socket for what the caller sends next (a sendfile), to go
	// in the same segments.
	more bool
	msg  unix.Msghdr // sendmsg's header, kept here so that it does not escape
}

// iovMax is the most iovecs one writev takes (Linux's UIO_MAXIOV).
const iovMax = 1024

// write writes every byte of bufs and returns how many it wrote. With
// more, the bytes may wait in the socket for the next write (MSG_MORE).
func (wv *rawWritev) write(raw syscall.RawConn, bufs [][]byte, more bool) (int64, error) {
	wv.more = more
	if wv.fn == nil {
		wv.fn = wv.writev
	}
	for _, b := range bufs {
		if len(b) > 0 {
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			wv.iov = append(wv.iov, v)
		}
	}
	wv.i, wv.n, wv.err = 0, 0, nil
	err := raw.Write(wv.fn)
	n, werr := wv.n, wv.err
	clear(wv.iov) // no references to written buffers
	wv.iov, wv.err = wv.iov[:0], nil
	if werr == nil {
		werr = err
	}
	return n, werr
}

// writev is wv.fn: it writes iov[i:] until done or EAGAIN (false: wait
// until the socket is writable).
func (wv *rawWritev) writev(fd uintptr) bool {
	for wv.i < len(wv.iov) {
		batch := wv.iov[wv.i:min(len(wv.iov), wv.i+iovMax)]
		var m uintptr
		var errno syscall.Errno
		if wv.more {
			wv.msg = unix.Msghdr{Iov: &batch[0]}
			wv.msg.SetIovlen(len(batch))
			m, _, errno = unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&wv.msg)), unix.MSG_MORE)
			wv.msg = unix.Msghdr{}
		} else {
			m, _, errno = unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&batch[0])), uintptr(len(batch)))
		}
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			if wv.more {
				// Not a socket, or one without MSG_MORE: plain
				// writev, which reports the error if it is real.
				wv.more = false
				continue
			}
			wv.err = os.NewSyscallError("writev", errno)
			return true
		}
		wv.n += int64(m)
		for m > 0 {
			v := &wv.iov[wv.i]
			if uint64(m) < v.Len {
				v.Base = (*byte)(unsafe.Add(unsafe.Pointer(v.Base), m))
				v.Len -= uint64(m)
				break
			}
			m -= uintptr(v.Len)
			wv.i++
		}
	}
	return true
}
