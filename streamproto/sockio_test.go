package streamproto

import (
	"bytes"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// Ensure rawWritev writes every byte, in order, when the socket fills
// up mid-write (EAGAIN, then a wait for room) and when there are more
// buffers than one writev takes.
func TestRawWritevFullSocket(t *testing.T) {
	server, client := tcpPair(t)
	if err := server.(*net.TCPConn).SetWriteBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	raw, err := server.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var bufs [][]byte
	var want []byte
	for i := range 3000 { // > iovMax buffers, ~1.5 MB: far over the socket's buffer
		b := bytes.Repeat([]byte{byte(i)}, 1+i%1000)
		if i%7 == 0 {
			b = nil // empty buffers are skipped
		}
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		got <- b
	}()
	var wv rawWritev
	n, err := wv.write(raw, bufs, false)
	if err != nil || n != int64(len(want)) {
		t.Fatalf("write = %d, %v; want %d, nil", n, err, len(want))
	}
	if len(wv.iov) != 0 {
		t.Errorf("%d iovecs kept after the write", len(wv.iov))
	}
	server.Close()
	if b := <-got; !bytes.Equal(b, want) {
		t.Errorf("read %d bytes, not the %d written", len(b), len(want))
	}
}

// Ensure sockReader reads what was sent, reports io.EOF once the peer
// closed, and honours the read deadline.
func TestSockReader(t *testing.T) {
	server, client := tcpPair(t)
	r := newSockReader(server)
	if _, ok := r.(*sockReader); !ok {
		t.Fatalf("newSockReader(TCP) = %T, want *sockReader", r)
	}
	server.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	buf := make([]byte, 16)
	if _, err := r.Read(buf); !isTimeout(err) {
		t.Fatalf("read before data: %v, want a timeout", err)
	}
	server.SetReadDeadline(time.Time{})
	if _, err := client.Write([]byte("credit")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.LimitReader(r, 6))
	if err != nil || string(got) != "credit" {
		t.Fatalf("read %q, %v", got, err)
	}
	client.Close()
	if n, err := r.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("read after close = %d, %v; want 0, io.EOF", n, err)
	}
}

// Ensure pagesCached sees a file just written as cached, and that
// sendFile sends its bytes (raw or not).
func TestSendFileCached(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "chunks")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	fc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	cached := false
	fc.Control(func(fd uintptr) { cached = pagesCached(fd, 100, len(want)-200) })
	if !cached && !cachestatMissing.Load() {
		t.Error("pagesCached of a file just written = false")
	}
	server, client := tcpPair(t)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		got <- b
	}()
	if err := sendFile(server, f, 100, int64(len(want)-200)); err != nil {
		t.Fatal(err)
	}
	server.Close()
	if b := <-got; !bytes.Equal(b, want[100:len(want)-100]) {
		t.Errorf("received %d bytes, not the %d sent", len(b), len(want)-200)
	}
}

// Ensure rawWritev with more (sendmsg, MSG_MORE) delivers its bytes,
// in order, once the next write without it follows, over TCP, when
// the socket fills up mid-write, and falls back to writev on a
// descriptor that is not a socket (a pipe: ENOTSOCK).
func TestRawWritevMore(t *testing.T) {
	var first, second [][]byte
	var want []byte
	for i := range 1500 { // > iovMax buffers, ~750 KB
		b := bytes.Repeat([]byte{byte(i)}, 1+i%1000)
		if i < 1200 {
			first = append(first, b)
		} else {
			second = append(second, b)
		}
		want = append(want, b...)
	}
	check := func(t *testing.T, raw syscall.RawConn, closeW func(), r io.Reader) {
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(r)
			got <- b
		}()
		var wv rawWritev
		n1, err := wv.write(raw, first, true)
		if err != nil {
			t.Fatalf("write with more: %v", err)
		}
		n2, err := wv.write(raw, second, false)
		if err != nil || n1+n2 != int64(len(want)) {
			t.Fatalf("writes = %d+%d, %v; want %d, nil", n1, n2, err, len(want))
		}
		closeW()
		if b := <-got; !bytes.Equal(b, want) {
			t.Errorf("read %d bytes, not the %d written", len(b), len(want))
		}
	}
	t.Run("tcp", func(t *testing.T) {
		server, client := tcpPair(t)
		if err := server.(*net.TCPConn).SetWriteBuffer(4 << 10); err != nil {
			t.Fatal(err)
		}
		raw, err := server.(syscall.Conn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		check(t, raw, func() { server.Close() }, client)
	})
	t.Run("pipe", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		raw, err := w.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		check(t, raw, func() { w.Close() }, r)
	})
}
