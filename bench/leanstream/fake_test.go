package leanstream

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/warren-mq/warren/streamproto/wire"
)

// fakeServer accepts one connection and runs script on it.
func fakeServer(t *testing.T, script func(r *bufio.Reader, w net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		script(bufio.NewReader(conn), conn)
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// readFrame returns the key, version and the rest of one frame.
func readFrame(r *bufio.Reader) (key wire.Key, version uint16, body []byte, err error) {
	var hdr [4]byte
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err = io.ReadFull(r, b); err != nil {
		return
	}
	return wire.Key(binary.BigEndian.Uint16(b)), binary.BigEndian.Uint16(b[2:]), b[4:], nil
}

func frame(key wire.Key, fields ...[]byte) []byte {
	b, start := wire.BeginFrame(nil, key, 1)
	for _, f := range fields {
		b = append(b, f...)
	}
	return wire.EndFrame(b, start)
}

func u16(v uint16) []byte { return wire.AppendU16(nil, v) }
func u32(v uint32) []byte { return wire.AppendU32(nil, v) }

// Ensure the handshake negotiates tune values, and a server-initiated
// Close is answered, ends the connection with a CloseError and fails
// pending calls.
func TestHandshakeAndServerClose(t *testing.T) {
	errs := make(chan error, 10)
	addr := fakeServer(t, func(r *bufio.Reader, w net.Conn) {
		fail := func(msg string) { errs <- errors.New(msg) }
		expect := func(want wire.Key) []byte {
			key, _, body, err := readFrame(r)
			if err != nil || key != want {
				fail("unexpected frame")
				return nil
			}
			return body
		}
		corr := func(b []byte) []byte { return b[:4] }
		b := expect(wire.KeyPeerProperties)
		w.Write(frame(wire.KeyPeerProperties|wire.ResponseBit, corr(b), u16(1), appendMap(nil, map[string]string{"product": "fake"})))
		b = expect(wire.KeySaslHandshake)
		w.Write(frame(wire.KeySaslHandshake|wire.ResponseBit, corr(b), u16(1), u32(1), wire.AppendString(nil, "PLAIN")))
		b = expect(wire.KeySaslAuthenticate)
		if string(b[4:]) != string(append(wire.AppendString(nil, "PLAIN"), wire.AppendBytes(nil, []byte("\x00u\x00p"))...)) {
			fail("bad PLAIN")
		}
		w.Write(frame(wire.KeySaslAuthenticate|wire.ResponseBit, corr(b), u16(1)))
		w.Write(frame(wire.KeyTune, u32(4096), u32(0)))
		b = expect(wire.KeyTune | wire.ResponseBit)
		if len(b) != 8 || binary.BigEndian.Uint32(b) != 4096 || binary.BigEndian.Uint32(b[4:]) != 60 {
			fail("bad tune reply")
		}
		b = expect(wire.KeyOpen)
		w.Write(frame(wire.KeyOpen|wire.ResponseBit, corr(b), u16(1), u32(0)))
		// A request that gets no answer, then the server closes.
		expect(wire.KeyCreate)
		w.Write(frame(wire.KeyClose, u32(99), u16(uint16(wire.CodeInternalError)), wire.AppendString(nil, "boom")))
		b = expect(wire.KeyClose | wire.ResponseBit)
		if binary.BigEndian.Uint32(b) != 99 || binary.BigEndian.Uint16(b[4:]) != 1 {
			fail("bad close reply")
		}
		errs <- nil
	})
	c, err := DialConfig(t.Context(), Config{Addr: addr, User: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.FrameMax() != 4096 || c.ServerProperties()["product"] != "fake" {
		t.Errorf("frame max %d, properties %v", c.FrameMax(), c.ServerProperties())
	}
	var big Batch
	big.Add(1, make([]byte, 5000))
	if err := c.Publish(0, &big); err == nil {
		t.Error("publish over the frame max accepted")
	}
	err = c.Create("s", nil)
	var ce *CloseError
	if !errors.As(err, &ce) || ce.Code != wire.CodeInternalError || ce.Reason != "boom" || !errors.Is(err, ErrClosed) {
		t.Errorf("pending call: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection not done")
	}
	if !errors.As(c.Err(), &ce) {
		t.Errorf("Err: %v", c.Err())
	}
	if err := <-errs; err != nil {
		t.Error(err)
	}
}

// Ensure a malformed Deliver ends the connection with an error instead of
// a panic.
func TestMalformedDeliver(t *testing.T) {
	addr := fakeServer(t, func(r *bufio.Reader, w net.Conn) {
		for {
			key, _, body, err := readFrame(r)
			if err != nil {
				return
			}
			switch key {
			case wire.KeyPeerProperties:
				w.Write(frame(key|wire.ResponseBit, body[:4], u16(1), u32(0)))
			case wire.KeySaslHandshake:
				w.Write(frame(key|wire.ResponseBit, body[:4], u16(1), u32(0)))
			case wire.KeySaslAuthenticate:
				w.Write(frame(key|wire.ResponseBit, body[:4], u16(1)))
				w.Write(frame(wire.KeyTune, u32(0), u32(0)))
			case wire.KeyOpen:
				w.Write(frame(key|wire.ResponseBit, body[:4], u16(1), u32(0)))
				// A chunk header claiming more data than follows.
				chunk := buildChunk(0, 1, 1, simple([]byte("x")))
				w.Write(frame(wire.KeyDeliver, []byte{1}, chunk[:len(chunk)-2]))
			}
		}
	})
	c, err := DialConfig(t.Context(), Config{Addr: addr})
	if err != nil {
		// The Deliver can arrive while the handshake still reads: then
		// the dial fails with it.
		if !errors.Is(err, ErrBadChunk) {
			t.Fatalf("dial: %v, want nil or %v", err, ErrBadChunk)
		}
		return
	}
	defer c.Close()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection survived a malformed deliver")
	}
	if !errors.Is(c.Err(), ErrBadChunk) {
		t.Errorf("Err: %v", c.Err())
	}
}

// Ensure chunks read in place from the read buffer and chunks read past
// it both reach the handler intact, and that credits a handler defers
// reach the server, summed, before the client waits for more.
func TestDeliverInPlaceAndDeferredCredit(t *testing.T) {
	const subID = 3
	// Three small chunks in one write, then one of a replay's size,
	// which takes several reads.
	sizes := []int{10, 200, 30, 300 << 10}
	credits := make(chan int, 1)
	addr := fakeServer(t, func(r *bufio.Reader, w net.Conn) {
		got := 0
		for {
			key, _, body, err := readFrame(r)
			if err != nil {
				return
			}
			switch key {
			case wire.KeyPeerProperties, wire.KeySaslHandshake:
				w.Write(frame(key|wire.ResponseBit, body[:4], u16(1), u32(0)))
			case wire.KeySaslAuthenticate:
				w.Write(frame(key|wire.ResponseBit, body[:4], u16(1)))
				w.Write(frame(wire.KeyTune, u32(0), u32(0)))
			case wire.KeyOpen:
				w.Write(frame(key|wire.ResponseBit, body[:4], u16(1), u32(0)))
			case wire.KeySubscribe:
				out := frame(key|wire.ResponseBit, body[:4], u16(1))
				for i, n := range sizes {
					msg := AppendMessage(nil, bytes.Repeat([]byte{byte('a' + i)}, n))
					out = append(out, frame(wire.KeyDeliver, []byte{subID}, buildChunk(uint64(i), 1, 1, simple(msg)))...)
				}
				w.Write(out)
			case wire.KeyCredit:
				if body[0] != subID {
					t.Errorf("credit for subscription %d, want %d", body[0], subID)
				}
				if got += int(binary.BigEndian.Uint16(body[1:])); got == len(sizes) {
					credits <- got
				}
			}
		}
	})
	c, err := DialConfig(t.Context(), Config{Addr: addr, CheckCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bodies := make(chan []byte, len(sizes))
	err = c.Subscribe(subID, "s", First(), 0, func(ch *Chunk) {
		it := ch.Messages()
		for it.Next() {
			body, _ := DataBody(it.Message())
			bodies <- bytes.Clone(body)
		}
		c.DeferCredit(ch.SubscriptionID, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		select {
		case b := <-bodies:
			if want := bytes.Repeat([]byte{byte('a' + i)}, n); !bytes.Equal(b, want) {
				t.Fatalf("chunk %d of %d bytes: wrong body (%d bytes)", i, n, len(b))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("chunk %d not delivered", i)
		}
	}
	select {
	case n := <-credits:
		if n != len(sizes) {
			t.Errorf("credit %d, want %d", n, len(sizes))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("deferred credits not written while the client waits")
	}
}

// Ensure deferred credits are summed per subscription, in order, and
// split into frames of at most maxCreditFrame.
func TestWriteDeferredCredits(t *testing.T) {
	var out bytes.Buffer
	c := &Client{w: bufio.NewWriter(&out)}
	c.DeferCredit(7, 1)
	c.DeferCredit(2, 5)
	c.DeferCredit(7, 1)
	for range 2 {
		c.DeferCredit(9, 20000)
	}
	c.DeferCredit(4, 0) // nothing
	if err := c.writeDeferredCredits(); err != nil {
		t.Fatal(err)
	}
	if c.creditsDeferred.Load() || len(c.creditIDs) != 0 {
		t.Error("credits left after the write")
	}
	type credit struct {
		sub uint8
		n   uint16
	}
	want := []credit{{7, 2}, {2, 5}, {9, maxCreditFrame}, {9, 40000 - maxCreditFrame}}
	r := bufio.NewReader(&out)
	for i, w := range want {
		key, version, body, err := readFrame(r)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		got := credit{body[0], binary.BigEndian.Uint16(body[1:])}
		if key != wire.KeyCredit || version != 1 || len(body) != 3 || got != w {
			t.Errorf("frame %d: key %v version %d %+v, want Credit v1 %+v", i, key, version, got, w)
		}
	}
	if _, _, _, err := readFrame(r); err != io.EOF {
		t.Errorf("after the credits: %v, want io.EOF", err)
	}
	// Nothing deferred: nothing written.
	if err := c.writeDeferredCredits(); err != nil || out.Len() != 0 {
		t.Errorf("empty write: %v, %d bytes", err, out.Len())
	}
}
