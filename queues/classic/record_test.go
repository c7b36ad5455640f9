package classic

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/warren-mq/warren/segment"
)

// Ensure EncodeRecord writes the documented layout, byte for byte.
func TestEncodeRecordGolden(t *testing.T) {
	m := &Message{
		Exchange:   "ex",
		RoutingKey: "k.1",
		Props:      []byte{0x10, 0x00, 0x02}, // flags: delivery-mode; mode 2
		Body:       []byte("hi"),
		Persistent: true,
	}
	got := EncodeRecord([]byte{0xAA}, m)
	want := []byte{
		0xAA,                   // caller's prefix, kept
		0x00, 0x00, 0x00, 0x11, // entry size: 17 bytes of record
		0x01,           // flags: persistent
		0x02, 'e', 'x', // exchange shortstr
		0x03, 'k', '.', '1', // routing key shortstr
		0x00, 0x00, 0x00, 0x03, // properties length
		0x10, 0x00, 0x02, // properties
		'h', 'i', // body
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeRecord:\n got % x\nwant % x", got, want)
	}
	// It is a segment simple entry holding the record.
	e, rest, err := segment.ParseEntry(got[1:])
	if err != nil || len(rest) != 0 || e.SubBatch || len(e.Data) != 17 {
		t.Fatalf("ParseEntry: %+v %v %v", e, rest, err)
	}
	if err := checkEntry(got[1:]); err != nil {
		t.Fatalf("checkEntry: %v", err)
	}
	r, err := parseRecord(e.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !r.persistent || string(r.exchange) != "ex" || string(r.routingKey) != "k.1" ||
		!bytes.Equal(r.props, m.Props) || string(r.body) != "hi" {
		t.Fatalf("parseRecord: %+v", r)
	}

	// Transient, empty everything.
	got = EncodeRecord(nil, &Message{})
	want = []byte{0, 0, 0, 7, 0x00, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("empty message:\n got % x\nwant % x", got, want)
	}
	if r, err := parseRecord(got[4:]); err != nil || r.persistent || len(r.body) != 0 {
		t.Fatalf("parseRecord(empty) = %+v, %v", r, err)
	}
}

// Ensure parseRecord and checkEntry refuse malformed bytes instead of
// reading past them.
func TestParseRecordMalformed(t *testing.T) {
	good := EncodeRecord(nil, &Message{Exchange: "x", RoutingKey: "rk", Props: []byte{0, 0}, Body: []byte("body")})
	rec := good[4:]
	for n := 0; n < len(rec)-len("body"); n++ {
		if _, err := parseRecord(rec[:n]); !errors.Is(err, errBadRecord) {
			t.Fatalf("parseRecord of %d bytes: %v", n, err)
		}
	}
	bad := append([]byte(nil), rec...)
	bad[0] = 0x80
	if _, err := parseRecord(bad); !errors.Is(err, errBadRecord) {
		t.Fatalf("unknown flags: %v", err)
	}
	if err := checkEntry(good[:len(good)-1]); err == nil {
		t.Fatal("checkEntry accepted a short entry")
	}
	if err := checkEntry(append(good, 0)); err == nil {
		t.Fatal("checkEntry accepted trailing bytes")
	}
	if err := checkEntry(segment.AppendSubBatch(nil, [][]byte{rec})); err == nil {
		t.Fatal("checkEntry accepted a sub-batch")
	}
}

// Ensure a record keeps an AMQP 1.0 properties section beside the 0-9-1
// properties (flag 0x08, u32 length, bytes, then the body), and a
// section cut short is refused.
func TestRecordAMQP10Props(t *testing.T) {
	p10 := []byte{0x00, 0x53, 0x73, 0x45} // properties, empty list
	got := EncodeRecord(nil, &Message{Exchange: "x", Props: []byte{0, 0}, AMQP10Props: p10, Body: []byte("b")})
	want := []byte{0, 0, 0, 19, 0x08, 1, 'x', 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 4, 0x00, 0x53, 0x73, 0x45, 'b'}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeRecord:\n got % x\nwant % x", got, want)
	}
	r, err := parseRecord(got[4:])
	if err != nil || !bytes.Equal(r.props10, p10) || string(r.body) != "b" || !bytes.Equal(r.props, []byte{0, 0}) {
		t.Fatalf("parseRecord: %+v, %v", r, err)
	}
	for n := 4 + 12; n < len(got)-1; n++ {
		if _, err := parseRecord(got[4:n]); !errors.Is(err, errBadRecord) {
			t.Fatalf("parseRecord of %d bytes: %v", n-4, err)
		}
	}
	// Without a section, no flag and no length.
	if r, err := parseRecord(EncodeRecord(nil, &Message{Body: []byte("b")})[4:]); err != nil || r.props10 != nil {
		t.Fatalf("without a section: %+v, %v", r, err)
	}
}

// FuzzParseRecord: parseRecord reads queue log records from disk. It
// must never panic or read past its input, and what it accepts encodes
// back to the same bytes.
// Ensure a reference record keeps what a queue needs of its message
// without the body: persistence, body size, priority, expiration; and
// that a reference is never made of a reference.
func TestRefRecord(t *testing.T) {
	props := []byte{0, 0}
	for _, tc := range []struct {
		name       string
		props      []byte
		persistent bool
		prio       uint8
		ttl        int64
	}{
		{"plain", props, true, 0, -1},
		{"transient", props, false, 0, -1},
		// flags: priority, expiration; then priority 7, shortstr "1500".
		{"priority and expiration", []byte{0x09, 0x00, 7, 4, '1', '5', '0', '0'}, true, 7, 1500},
	} {
		rec := EncodeRecord(nil, &Message{Exchange: "x", RoutingKey: "k", Props: tc.props, Body: []byte("hello body"), Persistent: tc.persistent})
		ref, err := AppendRef(nil, rec, 1<<40+3)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := checkEntry(ref); err != nil || len(ref) != 4+refRecordSize {
			t.Fatalf("%s: entry of %d bytes: %v", tc.name, len(ref), err)
		}
		r, err := parseRecord(ref[4:])
		if err != nil || !r.ref || r.bodyOff != 1<<40+3 || r.persistent != tc.persistent {
			t.Fatalf("%s: parsed %+v, %v", tc.name, r, err)
		}
		m, err := parseMeta(r, 5)
		if err != nil || m.size != 10 || m.prio != min(tc.prio, 5) || m.msgTTL != tc.ttl {
			t.Fatalf("%s: meta %+v, %v", tc.name, m, err)
		}
		SetRefOffset(ref, 99)
		if r, err := parseRecord(ref[4:]); err != nil || r.bodyOff != 99 || r.refMeta.size != 10 {
			t.Fatalf("%s: after SetRefOffset %+v, %v", tc.name, r, err)
		}
		if _, err := AppendRef(nil, ref, 1); err == nil {
			t.Fatalf("%s: a reference to a reference was made", tc.name)
		}
	}
}

func FuzzParseRecord(f *testing.F) {
	for _, m := range []*Message{
		{},
		{Exchange: "x", RoutingKey: "k", Props: []byte{0, 0}, Body: []byte("body"), Persistent: true},
		{Exchange: "x", Props: []byte{0, 0}, AMQP10Props: []byte{0x00, 0x53, 0x73, 0x45}, Body: []byte("b")},
	} {
		f.Add(EncodeRecord(nil, m)[4:])
	}
	ref, err := AppendRef(nil, EncodeRecord(nil, &Message{Props: []byte{0, 0}, Body: []byte("b"), Persistent: true}), 7)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ref[4:])
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRecord(b)
		if err != nil {
			return
		}
		if r.ref {
			// A reference re-encodes from its fields.
			again := []byte{b[0]}
			again = binary.BigEndian.AppendUint64(again, r.bodyOff)
			again = binary.BigEndian.AppendUint32(again, r.refMeta.size)
			again = append(again, r.refMeta.prio)
			again = binary.BigEndian.AppendUint64(again, uint64(r.refMeta.msgTTL))
			if !bytes.Equal(again, b) {
				t.Fatalf("re-encoded reference % x, read % x", again, b)
			}
			return
		}
		flags := b[0]
		again := encodeRecord(nil, flags, string(r.exchange), string(r.routingKey), r.props, r.props10, r.body)
		if !bytes.Equal(again[4:], b) {
			t.Fatalf("re-encoded % x, read % x", again[4:], b)
		}
	})
}
