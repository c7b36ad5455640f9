package classic

import (
	"bytes"
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
