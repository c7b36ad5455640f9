package frame

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"runtime/metrics"
	"testing"
)

// Frames come from any client before it has authenticated, so the
// reader and every decoder must refuse garbage without panicking and
// without allocating out of proportion to the input (a count or size of
// 2^32 must cost nothing, 10 bytes of array32 with 65536 nulls must not
// cost a megabyte), and what they accept must encode again:
// decoding the re-encoding succeeds, and encoding is stable after one
// round (a non-canonical input, such as an explicit default, becomes
// canonical).
//
//	go test -run='^$' -fuzz=FuzzReadFrame ./internal/amqp10/frame/
//	go test -run='^$' -fuzz=FuzzTransfer ./internal/amqp10/frame/   (and FuzzOpen, ...)

// allocBudget is what a decode of n input bytes may allocate: a
// generous multiple of n (an item of one byte becomes an interface and
// a slot in a slice that doubles) and a constant: the reader's first
// 64 KiB chunk of a large frame and the zero-width array elements of a
// performative.
func allocBudget(n int) uint64 { return 256*uint64(n) + 512<<10 }

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

// checkAllocs fails unless fn, which reads n bytes of input, allocates
// within allocBudget(n). The cheap measure (runtime/metrics) counts
// small objects a span at a time as caches refill, and counts what the
// fuzzing engine's goroutines allocate meanwhile, so a result over the
// budget is measured again exactly (runtime.ReadMemStats, which stops
// the world) before it fails: a real excess repeats, noise does not.
func checkAllocs(t *testing.T, n int, fn func()) {
	metrics.Read(allocSample)
	before := allocSample[0].Value.Uint64()
	fn()
	metrics.Read(allocSample)
	got := allocSample[0].Value.Uint64() - before
	if got <= allocBudget(n) {
		return
	}
	for range 3 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		fn()
		runtime.ReadMemStats(&m1)
		if got = m1.TotalAlloc - m0.TotalAlloc; got <= allocBudget(n) {
			return
		}
	}
	t.Fatalf("%d bytes of input allocated %d", n, got)
}

// checkStable encodes p, decodes the encoding, encodes again, and fails
// unless the two encodings are equal.
func checkStable(t *testing.T, p Performative) {
	enc1, err := p.AppendTo(nil)
	if err != nil {
		t.Fatalf("decoded %T does not encode: %v", p, err)
	}
	p2 := newOf(p)
	rest, err := p2.Decode(enc1)
	if err != nil || len(rest) != 0 {
		t.Fatalf("re-encoding does not decode: %v (%d bytes left)\n% x", err, len(rest), enc1)
	}
	enc2, err := p2.AppendTo(nil)
	if err != nil || !bytes.Equal(enc1, enc2) {
		t.Fatalf("encoding is not stable (%v):\n% x\n% x", err, enc1, enc2)
	}
}

// fuzzSeeds adds the captured go-amqp frames' bodies and the encodings
// of the round-trip cases whose performative has code (all when 0), and
// some hostile shapes.
func fuzzSeeds(f *testing.F, code uint64) {
	for _, c := range performativeCases(f) {
		if code == 0 || c.p.Descriptor() == code {
			b, err := c.p.AppendTo(nil)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, c := range readCapture(f) {
		body := c.raw[HeaderSize:]
		if got, err := PeekCode(body); err == nil && (code == 0 || got == code) {
			f.Add(body)
		}
	}
	f.Add([]byte{0x00, 0x53, byte(code), 0xd0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff})          // list32, count 2^32-1
	f.Add([]byte{0x00, 0x53, byte(code), 0xc0, 0x07, 0x01, 0xf0, 0, 0, 0, 0x05, 0xff, 0xff}) // array32, count 2^32-1
	f.Add([]byte{0x00, 0x53, byte(code), 0xc0, 0x03, 0x01, 0xb0, 0xff})                      // vbin32 beyond the list
}

// fuzzPerformative fuzzes the decoder of the performative newP returns.
func fuzzPerformative(f *testing.F, newP func() Performative) {
	fuzzSeeds(f, newP().Descriptor())
	f.Fuzz(func(t *testing.T, b []byte) {
		p := newP()
		var err error
		checkAllocs(t, len(b), func() { _, err = p.Decode(b) })
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v is not a decode error", err)
			}
			return
		}
		checkStable(t, p)
	})
}

func FuzzOpen(f *testing.F) { fuzzPerformative(f, func() Performative { return &Open{} }) }

func FuzzBegin(f *testing.F) { fuzzPerformative(f, func() Performative { return &Begin{} }) }

func FuzzAttach(f *testing.F) { fuzzPerformative(f, func() Performative { return &Attach{} }) }

func FuzzFlow(f *testing.F) { fuzzPerformative(f, func() Performative { return &Flow{} }) }

func FuzzTransfer(f *testing.F) { fuzzPerformative(f, func() Performative { return &Transfer{} }) }

func FuzzDisposition(f *testing.F) {
	fuzzPerformative(f, func() Performative { return &Disposition{} })
}

func FuzzDetach(f *testing.F) { fuzzPerformative(f, func() Performative { return &Detach{} }) }

func FuzzEnd(f *testing.F) { fuzzPerformative(f, func() Performative { return &End{} }) }

func FuzzClose(f *testing.F) { fuzzPerformative(f, func() Performative { return &Close{} }) }

func FuzzSASLMechanisms(f *testing.F) {
	fuzzPerformative(f, func() Performative { return &SASLMechanisms{} })
}

func FuzzSASLInit(f *testing.F) { fuzzPerformative(f, func() Performative { return &SASLInit{} }) }

func FuzzSASLChallenge(f *testing.F) {
	fuzzPerformative(f, func() Performative { return &SASLChallenge{} })
}

func FuzzSASLResponse(f *testing.F) {
	fuzzPerformative(f, func() Performative { return &SASLResponse{} })
}

func FuzzSASLOutcome(f *testing.F) {
	fuzzPerformative(f, func() Performative { return &SASLOutcome{} })
}

// FuzzReadFrame reads a stream of frames (after an optional protocol
// header) with the largest maximum frame size, so that sizes claimed
// but not sent are exercised, and decodes each body.
func FuzzReadFrame(f *testing.F) {
	var stream []byte
	stream = AppendProtocolHeader(stream, ProtocolSASL)
	for _, c := range readCapture(f) {
		f.Add(c.raw)
		stream = append(stream, c.raw...)
	}
	f.Add(stream)
	f.Add(AppendEmptyFrame(nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 1, 2, 3})       // a 4 GiB claim
	f.Add([]byte{0, 0, 0, 0x10, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0})    // doff beyond the frame
	f.Add([]byte{0, 0, 0, 0x0c, 3, 1, 0, 0, 1, 2, 3, 4})             // extended header, empty SASL body
	f.Add([]byte{0, 0, 0, 0x0c, 2, 0, 0, 1, 0x00, 0x53, 0x17, 0x45}) // end
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAllocs(t, len(b), func() { readAll(t, b) })
	})
}

// readAll reads and decodes the frames of b until an error, checking
// what decodes.
func readAll(t *testing.T, b []byte) {
	r := NewReader(bytes.NewReader(b), DefaultMaxFrameSize)
	if len(b) >= ProtocolHeaderSize && string(b[:4]) == "AMQP" {
		if _, err := r.ReadProtocolHeader(); err != nil {
			t.Fatalf("ReadProtocolHeader: %v", err)
		}
	}
	for {
		f, err := r.ReadFrame()
		if err != nil {
			if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrFraming) {
				t.Fatalf("ReadFrame: unexpected error %v", err)
			}
			if _, again := r.ReadFrame(); again != err {
				t.Fatalf("error not sticky: %v, then %v", err, again)
			}
			return
		}
		if f.Empty() {
			continue
		}
		p, _, err := Decode(f.Type, f.Body)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("Decode: %v is not a decode error", err)
			}
			continue
		}
		checkStable(t, p)
	}
}
