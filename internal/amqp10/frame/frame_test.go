package frame

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/warren-mq/warren/internal/testutil"
)

// Ensure protocol headers are recognised: the three AMQP 1.0 ones,
// AMQP 0-9-1's, and anything else that starts with "AMQP".
func TestProtocolHeader(t *testing.T) {
	tests := []struct {
		in         string
		id         ProtocolID
		is10, is91 bool
		err        bool
	}{
		{in: "AMQP\x00\x01\x00\x00", id: ProtocolAMQP, is10: true},
		{in: "AMQP\x03\x01\x00\x00", id: ProtocolSASL, is10: true},
		{in: "AMQP\x02\x01\x00\x00", id: ProtocolTLS, is10: true},
		{in: "AMQP\x00\x00\x09\x01", id: 0, is91: true},
		{in: "AMQP\x01\x01\x00\x09", id: 1, is91: true},
		{in: "AMQP\x00\x00\x08\x00", id: 0},
		{in: "AMQP\x00\x01\x00", err: true},
		{in: "GET / HTTP/1.1", err: true},
		{in: "\x16\x03\x01\x02\x00\x01\x00\x01", err: true},
	}
	for _, tt := range tests {
		h, err := ParseProtocolHeader([]byte(tt.in))
		if tt.err {
			if !errors.Is(err, ErrNotAMQP) {
				t.Errorf("%q: got %v, want ErrNotAMQP", tt.in, err)
			}
			continue
		}
		if err != nil || h.ID() != tt.id || h.Is10() != tt.is10 || h.Is091() != tt.is91 {
			t.Errorf("%q: got %v id %d 1.0 %v 0-9-1 %v, want id %d 1.0 %v 0-9-1 %v", tt.in, err, h.ID(), h.Is10(), h.Is091(), tt.id, tt.is10, tt.is91)
		}
	}
	if got := string(AppendProtocolHeader(nil, ProtocolSASL)); got != "AMQP\x03\x01\x00\x00" {
		t.Fatalf("AppendProtocolHeader = %q", got)
	}
	if got := ProtocolHeaderOf(ProtocolAMQP).String(); got != "AMQP 0 1 0 0" {
		t.Fatalf("String = %q", got)
	}
}

// Ensure frame headers that break the rules are framing errors.
func TestFrameHeaderErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"short", `00000008 02 00`, "header of 6 bytes"},
		{"size below 8", `00000007 02 00 0000`, "frame size 7"},
		{"doff below 2", `00000008 01 00 0000`, "data offset 1"},
		{"doff beyond frame", `0000000c 04 00 0000`, "data offset 4 in a frame of 12 bytes"},
		{"unknown type", `00000008 02 02 0000`, "frame type 2"},
		{"too large", `00000201 02 00 0000`, "frame of 513 bytes, the maximum is 512"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFrameHeader(testutil.HexBytes(t, tt.in), MinMaxFrameSize)
			if !errors.Is(err, ErrFraming) || ConditionOf(err) != CondFramingError || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a framing error saying %q", err, tt.want)
			}
		})
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// Ensure the Reader reads headers and frames: an empty frame, an
// extended header skipped, a SASL frame, EOF between frames and in one.
func TestReader(t *testing.T) {
	in := testutil.HexBytes(t, `
		'AMQP' 03 01 00 00
		00000008 02 00 0000                  # empty frame
		00000010 03 01 0000 aabbccdd 00534445 # SASL frame, extended header aabbccdd
		0000000d 02 00 0007 00 53 17 45 ff   # end on channel 7 and a stray byte
		'AMQP' 00 01 00 00
		0000000c 02 00 00`)
	r := NewReader(bytes.NewReader(in), MinMaxFrameSize)
	if h, err := r.ReadProtocolHeader(); err != nil || h != ProtocolHeaderOf(ProtocolSASL) {
		t.Fatalf("ReadProtocolHeader = %v, %v", h, err)
	}
	f, err := r.ReadFrame()
	if err != nil || !f.Empty() || f.Type != TypeAMQP || f.Channel != 0 {
		t.Fatalf("empty frame: %+v %v", f, err)
	}
	f, err = r.ReadFrame()
	if err != nil || f.Type != TypeSASL || string(f.Body) != "\x00\x53\x44\x45" {
		t.Fatalf("SASL frame: %+v %v", f, err)
	}
	f, err = r.ReadFrame()
	if err != nil || f.Channel != 7 || !bytes.Equal(f.Body, []byte{0, 0x53, 0x17, 0x45, 0xff}) {
		t.Fatalf("end frame: %+v %v", f, err)
	}
	if _, _, err := Decode(f.Type, f.Body); !errors.Is(err, ErrDecode) {
		t.Fatalf("end with a payload decoded: %v", err)
	}
	if h, err := r.ReadProtocolHeader(); err != nil || h != ProtocolHeaderOf(ProtocolAMQP) {
		t.Fatalf("second header = %v, %v", h, err)
	}
	if _, err := r.ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated frame: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := r.ReadFrame(); err != io.ErrUnexpectedEOF {
		t.Fatalf("error not sticky: %v", err)
	}

	r = NewReader(bytes.NewReader(testutil.HexBytes(t, `00000008 02 00 0000`)), MinMaxFrameSize)
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("end of stream between frames: %v, want io.EOF", err)
	}
}

// Ensure a frame larger than the maximum is refused after its header,
// before a byte of its body is read, and that SetMaxFrameSize raises it.
func TestReaderMaxFrameSize(t *testing.T) {
	big := append(testutil.HexBytes(t, `00000400 02 00 0000`), make([]byte, 0x400-8)...)
	c := &countingReader{r: bytes.NewReader(big)}
	r := NewReader(c, MinMaxFrameSize)
	_, err := r.ReadFrame()
	if !errors.Is(err, ErrFrameTooLarge) || !errors.Is(err, ErrFraming) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
	if c.n != HeaderSize {
		t.Fatalf("read %d bytes, want only the header", c.n)
	}
	r = NewReader(bytes.NewReader(big), MinMaxFrameSize)
	r.SetMaxFrameSize(0x400)
	if f, err := r.ReadFrame(); err != nil || len(f.Body) != 0x400-8 {
		t.Fatalf("after SetMaxFrameSize: %d bytes, %v", len(f.Body), err)
	}
}

// Ensure a frame that claims more bytes than arrive costs memory in
// proportion to what arrived, not to the claim.
func TestReaderClaimDoesNotAllocate(t *testing.T) {
	in := append(testutil.HexBytes(t, `ffffffff 02 00 0000`), make([]byte, 1000)...)
	allocs := testing.AllocsPerRun(10, func() {
		r := NewReader(bytes.NewReader(in), DefaultMaxFrameSize)
		if _, err := r.ReadFrame(); err != io.ErrUnexpectedEOF {
			t.Fatalf("got %v", err)
		}
	})
	r := NewReader(bytes.NewReader(in), DefaultMaxFrameSize)
	r.ReadFrame()
	if cap(r.buf) > 2*largeBodyChunk || allocs > 5 {
		t.Fatalf("a 4 GiB claim with 1000 bytes: buffer of %d bytes, %v allocations", cap(r.buf), allocs)
	}
	// A large frame that does arrive is read whole.
	n := 3*largeBodyChunk + 5
	whole := AppendEmptyFrame(nil)
	whole[3] = 0
	whole = EndFrame(append(whole, make([]byte, n)...), 0)
	f, err := NewReader(bytes.NewReader(whole), DefaultMaxFrameSize).ReadFrame()
	if err != nil || len(f.Body) != n {
		t.Fatalf("large frame: %d bytes, %v", len(f.Body), err)
	}
}

// Ensure the Reader reuses its buffer: reading a frame allocates nothing.
func TestReaderAllocs(t *testing.T) {
	b, err := AppendTransferFrame(nil, 1, &Transfer{Handle: 1, DeliveryID: 1, HasDeliveryID: true, DeliveryTag: []byte{1}}, make([]byte, 100))
	if err != nil {
		t.Fatal(err)
	}
	src := bytes.NewReader(b)
	r := NewReader(src, MinMaxFrameSize)
	var tr Transfer
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(b)
		r.err = nil
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Decode(f.Body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ReadFrame and Transfer.Decode allocs = %v, want 0", allocs)
	}
}

// Ensure the appenders write what the Reader reads.
func TestAppendFrames(t *testing.T) {
	if got := AppendEmptyFrame(nil); !bytes.Equal(got, []byte{0, 0, 0, 8, 2, 0, 0, 0}) {
		t.Fatalf("AppendEmptyFrame = % x", got)
	}
	b, err := AppendFrame(nil, 5, &Begin{NextOutgoingID: 1, IncomingWindow: 2, OutgoingWindow: 3, HandleMax: DefaultHandleMax})
	if err != nil {
		t.Fatal(err)
	}
	testutil.AssertBytes(t, b, testutil.HexBytes(t, `00000015 02 00 0005  00 53 11 c0 08 04 40 52 01 52 02 52 03`))
	b, err = AppendFrame(b, 9, &SASLOutcome{Code: SASLOK})
	if err != nil {
		t.Fatal(err)
	}
	b, err = AppendTransferFrame(b, 2, &Transfer{Handle: 0}, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(bytes.NewReader(b), MinMaxFrameSize)
	var types []Type
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p, payload, err := Decode(f.Type, f.Body)
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, f.Type)
		if tr, ok := p.(*Transfer); ok && (string(payload) != "hello" || f.Channel != 2 || tr.Handle != 0) {
			t.Fatalf("transfer: %+v %q on %d", tr, payload, f.Channel)
		}
	}
	if len(types) != 3 || types[1] != TypeSASL || types[0] != TypeAMQP {
		t.Fatalf("frame types %v", types)
	}
}

// Ensure AppendTransferFrames splits a payload into frames no larger
// than the maximum, marks all but the last with more, and that the
// parts join to the payload.
func TestAppendTransferFrames(t *testing.T) {
	payload := make([]byte, 2000)
	for i := range payload {
		payload[i] = byte(i)
	}
	for _, size := range []int{0, 1, 400, 2000} {
		first := &Transfer{Handle: 300, DeliveryID: 7, HasDeliveryID: true, DeliveryTag: []byte("tag"), HasMessageFormat: true, Settled: true}
		b, err := AppendTransferFrames(nil, 3, first, payload[:size], MinMaxFrameSize)
		if err != nil {
			t.Fatal(err)
		}
		r := NewReader(bytes.NewReader(b), MinMaxFrameSize)
		var joined []byte
		for i := 0; ; i++ {
			f, err := r.ReadFrame()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("size %d frame %d: %v", size, i, err)
			}
			var tr Transfer
			part, err := tr.Decode(f.Body)
			if err != nil {
				t.Fatal(err)
			}
			joined = append(joined, part...)
			last := len(joined) == size
			if tr.More == last || tr.Handle != 300 || !tr.Settled || (i == 0) != tr.HasDeliveryID {
				t.Fatalf("size %d frame %d: %+v (last %v)", size, i, tr, last)
			}
		}
		if !bytes.Equal(joined, payload[:size]) {
			t.Fatalf("size %d: joined %d bytes", size, len(joined))
		}
	}
	if _, err := AppendTransferFrames(nil, 0, &Transfer{DeliveryTag: make([]byte, 40)}, []byte("x"), 20); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("a transfer that cannot fit: %v", err)
	}
}
