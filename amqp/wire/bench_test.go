package wire

import (
	"fmt"
	"testing"
)

func BenchmarkDecodeBasicPublish(b *testing.B) {
	payload := AppendMethodPayload(nil, &BasicPublish{Exchange: "amq.topic", RoutingKey: "orders.eu.created", Mandatory: true})
	b.Run("reuse", func(b *testing.B) {
		var m BasicPublish
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			classID, methodID, args, err := SplitMethod(payload)
			if err != nil || classID != ClassBasic || methodID != MethodBasicPublish {
				b.Fatal(err)
			}
			if err := m.ReadArgs(args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeMethod", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeMethod(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAppendDeliver writes what a consumer delivery costs: the
// basic.deliver method frame, the content header with the stored raw
// properties and the body frames, into a reused buffer.
func BenchmarkAppendDeliver(b *testing.B) {
	p := Properties{
		Flags:        FlagContentType | FlagHeaders | FlagDeliveryMode,
		ContentType:  "application/json",
		Headers:      Table{"x-origin": "eu", "x-attempt": int32(1)},
		DeliveryMode: 2,
	}
	props, err := AppendProperties(nil, &p)
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{0, 100, 4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			body := make([]byte, size)
			m := &BasicDeliver{ConsumerTag: "amq.ctag-0123456789abcdefghijkl", Exchange: "amq.topic", RoutingKey: "orders.eu.created"}
			var buf []byte
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				m.DeliveryTag++
				buf = AppendMethodFrame(buf[:0], 1, m)
				buf = AppendHeaderFrame(buf, 1, ClassBasic, uint64(len(body)), props)
				buf = AppendBodyFrames(buf, 1, body, 131072)
			}
		})
	}
}

func BenchmarkScanProperties(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    Properties
	}{
		{"persistent", Properties{Flags: FlagContentType | FlagDeliveryMode, ContentType: "text/plain", DeliveryMode: 2}},
		{"headers", Properties{
			Flags:        FlagContentType | FlagHeaders | FlagDeliveryMode | FlagExpiration | FlagUserID,
			ContentType:  "application/json",
			Headers:      Table{"x-origin": "eu", "x-attempt": int32(1), "CC": []any{"a", "b"}, "x-death": []any{Table{"count": int64(1), "reason": "expired"}}},
			DeliveryMode: 2, Expiration: "60000", UserID: "guest",
		}},
	} {
		raw, err := AppendProperties(nil, &tc.p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ScanProperties(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
