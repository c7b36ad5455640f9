package wire

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/warren-mq/warren/internal/testutil"
)

func TestFrameConstants(t *testing.T) {
	if string(ProtocolHeader[:]) != "AMQP\x00\x00\x09\x01" {
		t.Errorf("ProtocolHeader = %q", ProtocolHeader)
	}
	if FrameMethod != 1 || FrameHeader != 2 || FrameBody != 3 || FrameHeartbeat != 8 || FrameEnd != 0xCE {
		t.Error("frame types changed")
	}
	if FrameOverhead != 8 || FrameMinSize != 8192 {
		t.Error("frame sizes changed")
	}
}

func TestAppendFrames(t *testing.T) {
	testutil.AssertBytes(t, AppendHeartbeat(nil), testutil.HexBytes(t, `08 0000 00000000 ce`))

	props := testutil.HexBytes(t, `9000 0a 'text/plain' 02`) // content-type, delivery-mode 2
	testutil.AssertBytes(t, AppendHeaderFrame(nil, 3, ClassBasic, 5, props), testutil.HexBytes(t, `
		02 0003 0000001a     # header frame, channel 3, payload 26
		003c 0000            # class 60, weight 0
		0000000000000005     # body size 5
		9000                 # flags: content-type, delivery-mode
		0a 'text/plain' 02
		ce
	`))

	testutil.AssertBytes(t, AppendBodyFrames([]byte("x"), 1, nil, 8192), []byte("x")) // empty body: no frame
	testutil.AssertBytes(t, AppendBodyFrames(nil, 1, []byte("hello"), 8192), testutil.HexBytes(t, `03 0001 00000005 'hello' ce`))
}

// Bodies are split into payloads of at most frameMax-8 bytes.
func TestAppendBodyFramesSplit(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 2000) // 20000 bytes
	for _, tc := range []struct {
		frameMax uint32
		sizes    []int
	}{
		{8192, []int{8184, 8184, 3632}},
		{100, []int{8184, 8184, 3632}}, // below FrameMinSize: raised
		{20008, []int{20000}},
		{20007, []int{19999, 1}},
		{0, []int{20000}}, // no limit
	} {
		out := AppendBodyFrames(nil, 9, body, tc.frameMax)
		fr := NewFrameReader(bytes.NewReader(out), 1024)
		var got []int
		var joined []byte
		for {
			f, err := fr.ReadFrame(1 << 20)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != FrameBody || f.Channel != 9 {
				t.Fatalf("frame %d/%d", f.Type, f.Channel)
			}
			got = append(got, len(f.Payload))
			joined = append(joined, f.Payload...)
		}
		if !equalInts(got, tc.sizes) || !bytes.Equal(joined, body) {
			t.Errorf("frameMax %d: sizes %v, want %v", tc.frameMax, got, tc.sizes)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// One reader returns a stream's frames in order, small ones from its
// buffer and large ones from the growing buffer, then io.EOF for good.
func TestReadFrameSequence(t *testing.T) {
	big := bytes.Repeat([]byte("B"), 150_000) // more than the buffer and than largeChunk
	var stream []byte
	stream = append(stream, ProtocolHeader[:]...)
	stream = AppendHeartbeat(stream)
	stream = AppendMethodFrame(stream, 1, &BasicPublish{Exchange: "ex", RoutingKey: "rk"})
	stream = AppendHeaderFrame(stream, 1, ClassBasic, uint64(len(big)), []byte{0, 0})
	stream = AppendBodyFrames(stream, 1, big, 0)
	stream = AppendMethodFrame(stream, 2, &BasicAck{DeliveryTag: 1})

	fr := NewFrameReader(bytes.NewReader(stream), 256)
	h, err := fr.ReadProtocolHeader()
	if err != nil || h != ProtocolHeader {
		t.Fatalf("ReadProtocolHeader = %q, %v", h, err)
	}
	want := []struct {
		typ     uint8
		channel uint16
		size    int
	}{{FrameHeartbeat, 0, 0}, {FrameMethod, 1, 13}, {FrameHeader, 1, 14}, {FrameBody, 1, len(big)}, {FrameMethod, 2, 13}}
	for i, w := range want {
		f, err := fr.ReadFrame(1 << 20)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if f.Type != w.typ || f.Channel != w.channel || len(f.Payload) != w.size {
			t.Fatalf("frame %d: type %d channel %d size %d, want %+v", i, f.Type, f.Channel, len(f.Payload), w)
		}
		if f.Type == FrameBody && !bytes.Equal(f.Payload, big) {
			t.Fatalf("body differs")
		}
		if f.Type == FrameMethod {
			if _, err := DecodeMethod(f.Payload); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
		}
	}
	for range 2 { // sticky
		if _, err := fr.ReadFrame(1 << 20); err != io.EOF {
			t.Fatalf("after the last frame: %v, want io.EOF", err)
		}
	}
}

func TestReadFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     string
		max    uint32
		want   error  // io error, or nil for a *FramingError
		substr string // in the FramingError text
	}{
		{"too large", `01 0001 00002001`, 8192, nil, "8193 bytes exceeds the limit of 8192"},
		{"too large, huge", `01 0001 ffffffff`, 131072, nil, "exceeds"},
		{"bad frame end", `01 0001 00000002 0102 00`, 8192, nil, "bad frame end octet 0x00"},
		{"bad frame end, large", `03 0001 00000400 ` + strings.Repeat("00", 1024) + ` cd`, 8192, nil, "bad frame end octet 0xcd"},
		{"unknown type", `04 0000 00000000 ce`, 8192, nil, "unknown frame type 4"},
		{"AMQP 1.0 bytes", `41 4d51 50030100`, 8192, nil, "exceeds the limit"},
		{"empty", ``, 8192, io.EOF, ""},
		{"truncated header", `01 0001`, 8192, io.ErrUnexpectedEOF, ""},
		{"truncated payload", `01 0001 00000010 0102`, 8192, io.ErrUnexpectedEOF, ""},
		{"missing frame end", `01 0001 00000002 0102`, 8192, io.ErrUnexpectedEOF, ""},
		{"truncated large payload", `03 0001 00001000 ` + strings.Repeat("00", 1000), 8192, io.ErrUnexpectedEOF, ""},
	} {
		fr := NewFrameReader(bytes.NewReader(testutil.HexBytes(t, tc.in)), 512)
		for attempt := range 2 { // errors are sticky
			_, err := fr.ReadFrame(tc.max)
			if tc.want != nil {
				if err != tc.want {
					t.Errorf("%s (attempt %d): err = %v, want %v", tc.name, attempt, err, tc.want)
				}
				continue
			}
			var fe *FramingError
			if !errors.As(err, &fe) || fe.Code != FrameError || !strings.Contains(fe.Text, tc.substr) {
				t.Errorf("%s (attempt %d): err = %v, want FramingError with %q", tc.name, attempt, err, tc.substr)
			}
		}
	}
}

// An oversized frame is refused before its payload is read or buffered.
func TestReadFrameTooLargeReadsNoPayload(t *testing.T) {
	r := &countingReader{r: bytes.NewReader(append(testutil.HexBytes(t, `03 0001 40000000`), make([]byte, 1<<20)...))}
	fr := NewFrameReader(r, 16)
	_, err := fr.ReadFrame(FrameMinSize)
	var fe *FramingError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v", err)
	}
	if r.n > 16 {
		t.Fatalf("read %d bytes", r.n)
	}
	if cap(fr.big) != 0 {
		t.Fatalf("allocated %d bytes", cap(fr.big))
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadFrameIOError(t *testing.T) {
	boom := errors.New("boom")
	fr := NewFrameReader(io.MultiReader(bytes.NewReader([]byte{1, 0}), &errReader{boom}), 64)
	if _, err := fr.ReadFrame(8192); err != boom {
		t.Fatalf("err = %v, want boom", err)
	}
	fr = NewFrameReader(io.MultiReader(bytes.NewReader([]byte("AMQ")), &errReader{boom}), 64)
	if _, err := fr.ReadProtocolHeader(); err != boom {
		t.Fatalf("ReadProtocolHeader err = %v, want boom", err)
	}
	if _, err := NewFrameReader(strings.NewReader("AMQ"), 64).ReadProtocolHeader(); err != io.ErrUnexpectedEOF {
		t.Fatalf("short protocol header: %v", err)
	}
}

// Ensure a passed read deadline is not sticky when it interrupts a frame
// whose bytes are still in the buffer (the connection's forced close wakes
// its reader that way, then reads the client's close-ok), and that other
// errors stay sticky.
func TestReadFrameDeadlineNotSticky(t *testing.T) {
	frame := AppendMethodFrame(nil, 0, &ConnectionCloseOk{})
	for _, cut := range []int{0, 3, len(frame) - 1} { // nothing, part of the header, all but the frame-end
		r := &scriptReader{steps: []scriptStep{
			{data: frame[:cut]},
			{err: os.ErrDeadlineExceeded},
			{data: frame[cut:]},
		}}
		fr := NewFrameReader(r, 64)
		if _, err := fr.ReadFrame(8192); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("cut %d: first read: err = %v, want a passed deadline", cut, err)
		}
		f, err := fr.ReadFrame(8192)
		if err != nil || f.Type != FrameMethod || !bytes.Equal(f.Payload, frame[7:len(frame)-1]) {
			t.Fatalf("cut %d: after the deadline: frame %+v, err %v", cut, f, err)
		}
	}
	boom := errors.New("boom")
	fr := NewFrameReader(&scriptReader{steps: []scriptStep{{err: boom}, {data: frame}}}, 64)
	for i := 0; i < 2; i++ {
		if _, err := fr.ReadFrame(8192); err != boom {
			t.Fatalf("read %d: err = %v, want the sticky boom", i, err)
		}
	}
}

// scriptReader returns its steps in order, then io.EOF.
type scriptReader struct{ steps []scriptStep }

type scriptStep struct {
	data []byte
	err  error
}

func (r *scriptReader) Read(p []byte) (int, error) {
	if len(r.steps) == 0 {
		return 0, io.EOF
	}
	s := r.steps[0]
	r.steps = r.steps[1:]
	return copy(p, s.data), s.err
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

// loopReader returns data over and over.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

// Steady-state reads allocate nothing, for frames that fit the buffer
// and for larger ones once the second buffer has grown.
func TestReadFrameAllocs(t *testing.T) {
	small := AppendMethodFrame(nil, 1, &BasicAck{DeliveryTag: 9})
	large := AppendBodyFrames(nil, 1, make([]byte, 100_000), 0)
	for _, tc := range []struct {
		name string
		data []byte
	}{{"small", small}, {"large", large}} {
		fr := NewFrameReader(&loopReader{data: tc.data}, 4096)
		if _, err := fr.ReadFrame(1 << 20); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(50, func() {
			if _, err := fr.ReadFrame(1 << 20); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: allocs = %v, want 0", tc.name, allocs)
		}
	}
}
