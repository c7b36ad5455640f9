package nodenet

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// Ensure the frame reader takes any bytes from the network without
// panicking or reading past a frame, and that what it returns encodes
// back to the bytes it read.
func FuzzReadFrame(f *testing.F) {
	f.Add(appendFrameHeader(nil, LaneRaft, 3), 64)
	f.Add(append(appendFrameHeader(nil, LaneRaft, 3), 1, 2, 3, 9), 64)
	f.Add((&hello{cluster: "c", from: "a", to: "b"}).appendTo(nil), 1024)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, 1024)
	f.Fuzz(func(t *testing.T, data []byte, maxPayload int) {
		maxPayload &= 1<<16 - 1
		r := bytes.NewReader(data)
		lane, p, err := readFrame(r, nil, maxPayload)
		if err != nil {
			return
		}
		if len(p) > maxPayload {
			t.Fatalf("payload of %d bytes, max %d", len(p), maxPayload)
		}
		used := len(data) - r.Len()
		got := append(appendFrameHeader(nil, lane, len(p)), p...)
		if !bytes.Equal(got, data[:used]) {
			t.Fatalf("re-encoded % x, read % x", got, data[:used])
		}
	})
}

// Ensure the handshake message decoders take any payload, and that a
// hello they accept encodes back to the same payload.
func FuzzHandshakeMessages(f *testing.F) {
	f.Add((&hello{cluster: "c", from: "n1", to: "n2", purpose: purposeConn, lane: 2}).appendTo(nil)[frameHeaderLen:])
	f.Add(refusal{ReasonWrongCluster, "x"}.appendTo(nil)[frameHeaderLen:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		if h, err := parseHello(p); err == nil {
			if got := h.appendTo(nil)[frameHeaderLen:]; !bytes.Equal(got, p) {
				t.Fatalf("hello re-encoded % x, parsed % x", got, p)
			}
		}
		if f, err := parseRefusal(p); err == nil {
			if got := f.appendTo(nil)[frameHeaderLen:]; !bytes.Equal(got, p) {
				t.Fatalf("refusal re-encoded % x, parsed % x", got, p)
			}
		}
		parseProof(p)
	})
}

// rw is a fake connection: reads from r, writes to w.
type rw struct {
	io.Reader
	io.Writer
}

// Ensure both sides of the handshake take any bytes from the network
// without panicking, and never report success to a peer that cannot
// know the secret.
func FuzzHandshake(f *testing.F) {
	l := &local{cluster: "c", name: "n2", secret: []byte("s")}
	d := hello{cluster: "c", from: "n1", to: "n2"}
	seed := d.appendTo(appendPreamble(nil, Version))
	f.Add(seed)
	f.Add(append(bytes.Clone(seed), appendProof(nil, make([]byte, macLen))...))
	f.Add(appendPreamble(nil, 9))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	a := hello{cluster: "c", from: "n2", to: "n1"}
	f.Add(append(a.appendTo(appendPreamble(nil, Version)), appendProof(nil, make([]byte, macLen))...))
	f.Add(refusal{ReasonBadSecret, "x"}.appendTo(appendPreamble(nil, Version)))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := acceptHandshake(rw{bytes.NewReader(data), io.Discard}, l); err == nil {
			t.Fatal("acceptor took a dialer that cannot know its nonce")
		}
		dl := &local{cluster: "c", name: "n1", secret: []byte("s")}
		err := dialHandshake(rw{bytes.NewReader(data), io.Discard}, dl, "n2", purposeLink, 0)
		if err == nil {
			t.Fatal("dialer took an acceptor that cannot know its nonce")
		}
		if errors.Is(err, ErrClosed) {
			t.Fatal("unexpected ErrClosed")
		}
	})
}
