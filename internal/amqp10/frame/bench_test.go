package frame

import (
	"bytes"
	"fmt"
	"testing"
)

var benchSizes = []int{16, 1024, 64 << 10}

// transferFrame is a frame as a client sends a message: a transfer with
// delivery id, 8-byte tag, message format and the payload.
func transferFrame(tb testing.TB, size int) []byte {
	b, err := AppendTransferFrame(nil, 1, &Transfer{Handle: 2, DeliveryID: 123456, HasDeliveryID: true,
		DeliveryTag: []byte("\x00\x00\x00\x00\x00\x01\xe2\x40"), HasMessageFormat: true}, make([]byte, size))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkDecodeTransfer reads a transfer frame from a stream and
// decodes its performative, as a front end does for each message
// published.
func BenchmarkDecodeTransfer(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			frame := transferFrame(b, size)
			src := bytes.NewReader(frame)
			r := NewReader(src, DefaultMaxFrameSize)
			var t Transfer
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				src.Reset(frame)
				f, err := r.ReadFrame()
				if err != nil {
					b.Fatal(err)
				}
				payload, err := t.Decode(f.Body)
				if err != nil || len(payload) != size {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeTransferBody decodes the performative of a transfer
// frame's body only.
func BenchmarkDecodeTransferBody(b *testing.B) {
	body := transferFrame(b, 16)[HeaderSize:]
	var t Transfer
	b.ReportAllocs()
	for b.Loop() {
		if _, err := t.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeTransferDisposition appends a transfer frame with its
// payload and the disposition that settles it, as a front end does for
// each message it delivers and each it confirms.
func BenchmarkEncodeTransferDisposition(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			payload := make([]byte, size)
			buf := make([]byte, 0, size+256)
			tag := []byte("\x00\x00\x00\x00\x00\x01\xe2\x40")
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var id uint32
			for b.Loop() {
				id++
				var err error
				buf, err = appendTransferAndDisposition(buf[:0], id, tag, payload)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func appendTransferAndDisposition(dst []byte, id uint32, tag, payload []byte) ([]byte, error) {
	t := Transfer{Handle: 2, DeliveryID: id, HasDeliveryID: true, DeliveryTag: tag, HasMessageFormat: true}
	dst, err := AppendTransferFrame(dst, 1, &t, payload)
	if err != nil {
		return dst, err
	}
	// Not AppendFrame, whose interface argument would move d to the heap.
	d := Disposition{Role: RoleReceiver, First: id, Last: id, Settled: true, State: Accepted{}}
	dst, start := BeginFrame(dst, TypeAMQP, 1)
	if dst, err = d.AppendTo(dst); err != nil {
		return dst[:start], err
	}
	return EndFrame(dst, start), nil
}

// Ensure encoding a transfer and a disposition allocates nothing.
func TestEncodeAllocs(t *testing.T) {
	buf := make([]byte, 0, 1024)
	payload := make([]byte, 100)
	tag := []byte{1, 2, 3, 4}
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = appendTransferAndDisposition(buf[:0], 7, tag, payload); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("transfer and disposition allocs = %v, want 0", allocs)
	}
}
