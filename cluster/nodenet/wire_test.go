package nodenet

import (
	"bytes"
	"errors"
	"testing"
)

// Ensure a hello encodes field by field as the package doc draws it and
// decodes back.
func TestHelloBytes(t *testing.T) {
	h := hello{cluster: "c", from: "n1", to: "n2", purpose: purposeConn, lane: LaneStream}
	for i := range h.nonce {
		h.nonce[i] = byte(i)
	}
	got := h.appendTo(nil)
	want := []byte{
		0x00, 0x00, 0x00, 0x2a, // payload length 42
		0xf0,      // hello
		0x01, 'c', // cluster
		0x02, 'n', '1', // from
		0x02, 'n', '2', // to
		0x01, // purpose: lane connection
		0x02, // lane: stream
	}
	want = append(want, h.nonce[:]...) // nonce
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
	back, err := parseHello(got[frameHeaderLen:])
	if err != nil || back != h {
		t.Fatalf("parseHello: got %+v, %v; want %+v", back, err, h)
	}
}

// Ensure a refusal and a proof encode as drawn, and the preamble.
func TestRefusalProofPreambleBytes(t *testing.T) {
	got := refusal{ReasonBadSecret, "no"}.appendTo(nil)
	want := []byte{
		0x00, 0x00, 0x00, 0x04, // payload length 4
		0xf2,           // refuse
		0x05,           // reason: bad secret
		0x02, 'n', 'o', // text
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("refusal: got % x, want % x", got, want)
	}
	f, err := parseRefusal(got[frameHeaderLen:])
	if err != nil || f.reason != ReasonBadSecret || f.text != "no" {
		t.Fatalf("parseRefusal: got %+v, %v", f, err)
	}
	mac := bytes.Repeat([]byte{0xab}, macLen)
	got = appendProof(nil, mac)
	want = append([]byte{0x00, 0x00, 0x00, 0x20, 0xf1}, mac...) // length 32, proof, mac
	if !bytes.Equal(got, want) {
		t.Fatalf("proof: got % x, want % x", got, want)
	}
	if got := appendPreamble(nil, Version); !bytes.Equal(got, []byte{'W', 'R', 'N', 'N', 0x01}) {
		t.Fatalf("preamble: got % x", got)
	}
}

// Ensure the decoders refuse short, long and oversized input.
func TestDecodersRefuse(t *testing.T) {
	good := (&hello{cluster: "c", from: "a", to: "b"}).appendTo(nil)[frameHeaderLen:]
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"short", func() error { _, err := parseHello(good[:len(good)-1]); return err }()},
		{"long", func() error { _, err := parseHello(append(good[:len(good):len(good)], 0)); return err }()},
		{"purpose", func() error {
			b := bytes.Clone(good)
			b[len(b)-nonceLen-2] = 7
			_, err := parseHello(b)
			return err
		}()},
		{"proof", func() error { _, err := parseProof(make([]byte, 31)); return err }()},
		{"refusal", func() error { _, err := parseRefusal([]byte{1, 5, 'x'}); return err }()},
	} {
		if !errors.Is(tc.err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", tc.name, tc.err)
		}
	}
	_, _, err := readFrame(bytes.NewReader([]byte{0, 0, 4, 1, 1}), nil, 1024)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("readFrame of 1025 bytes with max 1024: got %v, want ErrFrameTooLarge", err)
	}
	if _, err := parsePreamble([]byte("GET /")); !errors.Is(err, ErrBadMagic) {
		t.Errorf("parsePreamble(GET /): got %v, want ErrBadMagic", err)
	}
}
