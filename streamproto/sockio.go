package streamproto

import (
	"crypto/tls"
	"io"
	"net"
	"os"
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
