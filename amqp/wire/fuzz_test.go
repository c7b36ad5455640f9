package wire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"
)

// Crashers found by these fuzzers live in testdata/fuzz/<Fuzz...>/ and
// run as ordinary test cases with `go test`.

func FuzzReadFrame(f *testing.F) {
	var stream []byte
	stream = AppendHeartbeat(stream)
	stream = AppendMethodFrame(stream, 1, &BasicPublish{Exchange: "x", RoutingKey: "k"})
	stream = AppendHeaderFrame(stream, 1, ClassBasic, 3, []byte{0x10, 0, 2})
	stream = AppendBodyFrames(stream, 1, []byte("abc"), 8192)
	f.Add(stream, uint32(8192), 16)
	f.Add(stream, uint32(4), 64)
	f.Add(AppendBodyFrames(nil, 2, make([]byte, 3000), 0), uint32(1<<20), 100)
	f.Add([]byte{1, 0, 0, 0, 0, 0, 1, 0}, uint32(10), 16)
	f.Fuzz(func(t *testing.T, data []byte, max uint32, bufSize int) {
		bufSize = 16 + int(uint(bufSize)%8192)
		fr := NewFrameReader(bytes.NewReader(data), bufSize)
		read := 0
		for {
			fr0, err := fr.ReadFrame(max)
			if err != nil {
				var fe *FramingError
				if !errors.As(err, &fe) && err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatalf("unexpected error %v", err)
				}
				if err2 := func() error { _, e := fr.ReadFrame(max); return e }(); err2 != err {
					t.Fatalf("error not sticky: %v then %v", err, err2)
				}
				return
			}
			if uint64(len(fr0.Payload)) > uint64(max) {
				t.Fatalf("payload %d > max %d", len(fr0.Payload), max)
			}
			// The frame is where the stream says it is.
			want := data[read : read+FrameOverhead+len(fr0.Payload)]
			if want[0] != fr0.Type || !bytes.Equal(want[7:len(want)-1], fr0.Payload) || want[len(want)-1] != FrameEnd {
				t.Fatalf("frame at %d does not match the stream", read)
			}
			read += len(want)
		}
	})
}

func FuzzDecodeMethod(f *testing.F) {
	for _, m := range allMethods() {
		for pattern := range 2 {
			fillMethod(m, pattern)
			f.Add(AppendMethodPayload(nil, m))
		}
	}
	f.Add([]byte{0, 60, 0, 40, 0, 0, 2, 0xff, 0xfe, 0, 0})
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := DecodeMethod(payload)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownMethod) {
				t.Fatalf("error %v wraps neither sentinel", err)
			}
			return
		}
		p2 := AppendMethodPayload(nil, m)
		m2, err := DecodeMethod(p2)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", m.MethodName(), err)
		}
		p3 := AppendMethodPayload(nil, m2)
		if !bytes.Equal(p2, p3) {
			t.Fatalf("%s: encoding not stable:\n%x\n%x", m.MethodName(), p2, p3)
		}
		// A reused struct decodes to the same value as a fresh one.
		reused := NewMethod(m.ClassID(), m.MethodID())
		fillMethod(reused, 1)
		if err := reused.ReadArgs(payload[4:]); err != nil || !equalNaN(reused, m) {
			t.Fatalf("%s: reused struct: %+v, %v; want %+v", m.MethodName(), reused, err, m)
		}
	})
}

// equalNaN is reflect.DeepEqual, except that it compares the encodings of
// tables (NaN float values are not DeepEqual to themselves).
func equalNaN(a, b Method) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	return bytes.Equal(AppendMethodPayload(nil, a), AppendMethodPayload(nil, b))
}

func FuzzParseProperties(f *testing.F) {
	p := allProps()
	raw, _ := AppendProperties(nil, &p)
	f.Add(raw)
	f.Add([]byte{0x10, 0x03, 0x02})
	f.Add([]byte{0x20, 0x00, 0, 0, 0, 0})
	p = Properties{Flags: FlagTimestamp | FlagUserID, Timestamp: uint64(time.Now().Unix()), UserID: "u"}
	raw, _ = AppendProperties(nil, &p)
	f.Add(raw)
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParseProperties(raw)
		v, verr := ScanProperties(raw)
		if (err == nil) != (verr == nil) {
			t.Fatalf("ParseProperties %v but ScanProperties %v", err, verr)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) || !errors.Is(verr, ErrMalformed) {
				t.Fatalf("errors %v / %v do not wrap ErrMalformed", err, verr)
			}
			return
		}
		if v.Flags != p.Flags || v.DeliveryMode != p.DeliveryMode || v.Priority != p.Priority ||
			string(v.Expiration) != p.Expiration || string(v.UserID) != p.UserID || string(v.ReplyTo) != p.ReplyTo {
			t.Fatalf("view %+v disagrees with %+v", v, p)
		}
		raw2, err := AppendProperties(nil, &p)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		p2, err := ParseProperties(raw2)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		raw3, _ := AppendProperties(nil, &p2)
		if !bytes.Equal(raw2, raw3) {
			t.Fatalf("encoding not stable:\n%x\n%x", raw2, raw3)
		}
	})
}
