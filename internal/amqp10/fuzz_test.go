package amqp10

import (
	"bytes"
	"reflect"
	"testing"

	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
)

// Stream records come from disk and from any client, so the decoder must
// refuse garbage without panicking or allocating out of proportion, and
// whatever it accepts must encode again: decoding the re-encoding gives
// the same message (encoding reaches a fixed point after one round, as
// non-canonical forms such as list32 for two items become canonical).

func fuzzSeeds(f *testing.F) {
	ref, err := refMessage().MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ref)
	v, _ := (&streamamqp.Message{Value: map[string]any{"k": []any{int64(1), "x"}}}).MarshalBinary()
	f.Add(v)
	f.Add([]byte{0x00, 0x53, 0x75, 0xa0, 0x02, 'h', 'i'})
	f.Add([]byte{0x00, 0x53, 0x76, 0xc0, 0x03, 0x02, 0x41, 0x40})
	f.Add([]byte{0x00, 0x53, 0x77, 0xe0, 0x0d, 0x02, 0xb3, 0, 0, 0, 1, 'a', 0, 0, 0, 2, 'b', 'c'})
	f.Add([]byte{0x00, 0x53, 0x77, 0xf0, 0, 0, 0, 5, 0x10, 0, 0, 0, 0x40})
	f.Add([]byte{0x00, 0x53, 0x77, 0x00, 0xa3, 0x01, 'd', 0xd1, 0, 0, 0, 4, 0, 0, 0, 0})
}

func FuzzUnmarshal(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Message
		if err := m.UnmarshalBinary(b); err != nil {
			return
		}
		enc1, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		var m2 Message
		if err := m2.UnmarshalBinary(enc1); err != nil {
			t.Fatalf("re-encoding does not decode: %v\n% x", err, enc1)
		}
		enc2, err := m2.MarshalBinary()
		if err != nil {
			t.Fatalf("second encode: %v", err)
		}
		if !bytes.Equal(enc1, enc2) {
			t.Fatalf("encoding is not stable:\n% x\n% x", enc1, enc2)
		}
	})
}

func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		v, n, err := Decode(b)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("took %d of %d bytes", n, len(b))
		}
		enc1, err := AppendValue(nil, v)
		if err != nil {
			t.Fatalf("decoded %T does not encode: %v", v, err)
		}
		v2, n2, err := Decode(enc1)
		if err != nil || n2 != len(enc1) {
			t.Fatalf("re-encoding does not decode: %v (%d of %d bytes)\n% x", err, n2, len(enc1), enc1)
		}
		enc2, _ := AppendValue(nil, v2)
		if !bytes.Equal(enc1, enc2) {
			t.Fatalf("encoding is not stable:\n% x\n% x", enc1, enc2)
		}
	})
}

// FuzzReadProperties checks ReadProperties against UnmarshalBinary: on a
// message UnmarshalBinary accepts, it finds the same properties and
// application properties, and passing over a value takes the bytes that
// decoding it takes.
func FuzzReadProperties(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, n, err := Decode(b); err == nil {
			_ = v
			var budget int
			d := newDecoder(b, &budget)
			d.skip(1)
			if d.err != nil || d.off != n {
				t.Fatalf("skip took %d bytes (%v), decode %d", d.off, d.err, n)
			}
		}
		var m Message
		if err := m.UnmarshalBinary(b); err != nil {
			return
		}
		props, app, err := ReadProperties(b)
		if err != nil {
			t.Fatalf("ReadProperties: %v on a message UnmarshalBinary accepts", err)
		}
		if !reflect.DeepEqual(props, m.Properties) || !reflect.DeepEqual(app, m.ApplicationProperties) {
			t.Fatalf("ReadProperties: %+v %v, UnmarshalBinary: %+v %v", props, app, m.Properties, m.ApplicationProperties)
		}
		// RawSections and Items walk the same entries.
		_, rawApp, err := RawSections(b)
		if err != nil {
			t.Fatalf("RawSections: %v on a message UnmarshalBinary accepts", err)
		}
		var items []any
		if err := Items(rawApp, func(item []byte) bool {
			v, n, err := Decode(item)
			if err != nil || n != len(item) {
				t.Fatalf("item % x: %v", item, err)
			}
			items = append(items, v)
			return true
		}); err != nil {
			t.Fatalf("Items: %v", err)
		}
		if len(items) != 2*len(app) {
			t.Fatalf("Items: %d items, want %d", len(items), 2*len(app))
		}
		for i, e := range app {
			if !reflect.DeepEqual(items[2*i], e.Key) || !reflect.DeepEqual(items[2*i+1], e.Value) {
				t.Fatalf("Items: entry %d is %v=%v, want %v=%v", i, items[2*i], items[2*i+1], e.Key, e.Value)
			}
		}
	})
}
