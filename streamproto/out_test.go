package streamproto

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Ensure writeOut splices file spans into the frame buffer byte for byte,
// whether a span goes through memory (small) or by sendfile (large), when
// the staged memory overflows scratchMax mid-batch, and over a connection
// without a file descriptor.
func TestWriteOutSplicesSpans(t *testing.T) {
	data := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// Frame heads interleaved with spans: tiny, at the small limit, just
	// over it, and enough small ones in a row to pass scratchMax.
	sizes := []int64{1, smallSpan, smallSpan + 1, 100, 0}
	for range scratchMax/smallSpan + 3 {
		sizes = append(sizes, smallSpan-7)
	}
	sizes = append(sizes, 1<<20, 5)
	var buf, want []byte
	var spans []fileSpan
	released := 0
	pos := int64(0)
	for i, n := range sizes {
		head := bytes.Repeat([]byte{byte('a' + i%26)}, i%5+1)
		buf = append(buf, head...)
		want = append(want, head...)
		spans = append(spans, fileSpan{at: len(buf), file: f, pos: pos, n: n, release: func() { released++ }})
		want = append(want, data[pos:pos+n]...)
		pos += n
		if pos > int64(len(data))-(1<<20) {
			pos = 0
		}
	}
	buf = append(buf, "tail"...)
	want = append(want, "tail"...)

	check := func(t *testing.T, server, client net.Conn) {
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(client)
			got <- b
		}()
		w := &outWriter{nc: server}
		// Twice, so the second batch reuses the writer's buffers.
		for range 2 {
			if err := w.writeOut(buf, spans); err != nil {
				t.Fatal(err)
			}
		}
		server.Close()
		b := <-got
		if !bytes.Equal(b, append(append([]byte(nil), want...), want...)) {
			t.Fatalf("got %d bytes, want %d; first difference at %d", len(b), 2*len(want), firstDiff(b, append(append([]byte(nil), want...), want...)))
		}
	}
	t.Run("tcp", func(t *testing.T) {
		server, client := tcpPair(t)
		check(t, server, client)
	})
	t.Run("pipe", func(t *testing.T) {
		server, client := net.Pipe()
		defer client.Close()
		check(t, server, client)
	})
	if released != 0 {
		t.Errorf("writeOut released %d spans; releasing is the write loop's job", released)
	}
}

// Ensure a span past the end of its file is an error, not short output.
func TestWriteOutShortFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	server, client := net.Pipe()
	defer client.Close()
	go io.Copy(io.Discard, client)
	w := &outWriter{nc: server}
	err = w.writeOut([]byte("head"), []fileSpan{{at: 4, file: f, pos: 5, n: 10}})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("span past EOF: err %v, want io.ErrUnexpectedEOF", err)
	}
	server.Close()
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Ensure appendHeartbeat writes the whole Heartbeat frame: size 4, key,
// version 1.
func TestAppendHeartbeat(t *testing.T) {
	want := []byte{0x00, 0x00, 0x00, 0x04, 0x00, 0x17, 0x00, 0x01}
	if got := appendHeartbeat(nil); !bytes.Equal(got, want) {
		t.Errorf("appendHeartbeat = % x, want % x", got, want)
	}
}

// Ensure a flush never waits on the socket: with a client that does not
// read, flushes return (the test would hang otherwise) once the socket's
// buffer is full, handing the socket and the rest of their bytes to the
// writer goroutine; once the client reads, it gets every frame, in the
// order queued, and the writer exits after close.
func TestFlushHandsOffToWriter(t *testing.T) {
	server, client := tcpPair(t)
	q := newOutQueue(server, nil)
	if q.raw == nil {
		t.Fatal("no descriptor: flush would not write")
	}
	stop := make(chan struct{})
	loopErr := make(chan error, 1)
	go func() { loopErr <- q.writeLoop(func() time.Duration { return 0 }, stop) }()

	// Far more than loopback's socket buffers hold, in 10 KB frames.
	var want []byte
	frame := make([]byte, 10<<10)
	for i := range 1000 {
		for j := range frame {
			frame[j] = byte(i + j)
		}
		want = append(want, frame...)
		fn := func(b []byte) []byte { return append(b, frame...) }
		queued, ok := q.deliverInline(fn)
		if !ok {
			t.Fatal("queue closed")
		}
		if !queued {
			q.frame(fn)
		}
		if i%10 == 9 {
			q.flush()
		}
	}
	q.flush()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("first difference at %d of %d bytes", firstDiff(got, want), len(want))
	}
	q.close()
	if err := <-loopErr; err != nil {
		t.Fatalf("writeLoop: %v", err)
	}
	close(stop)
}

// tcpPair returns the two ends of a loopback TCP connection, closed at
// the end of the test.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close() })
	return server, client
}
