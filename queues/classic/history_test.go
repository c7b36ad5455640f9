package classic

import (
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/amqptab"
)

// Ensure HistoryDecoder makes a delivery of a queue record: exchange,
// routing key and body as recorded, the properties with the record's
// offset as the x-stream-offset header (long), replacing one the
// publisher set, other headers kept, the record itself unchanged.
func TestHistoryDecoderFill(t *testing.T) {
	table, start := amqptab.Begin(nil)
	table = amqptab.AppendKey(table, "a")
	table = amqptab.AppendLongStr(table, "x")
	table = amqptab.AppendKey(table, hdrStreamOffset)
	table = amqptab.AppendLongStr(table, "bogus")
	table = amqptab.End(table, start)
	props := append([]byte{0x20, 0x00}, table...) // flags: headers
	entry := EncodeRecord(nil, &Message{Exchange: "ex", RoutingKey: "rk", Props: props, Body: []byte("body")})
	rec := entry[4:]
	orig := string(rec)

	var h HistoryDecoder
	for _, off := range []uint64{42, 7} {
		var d Delivery
		if err := h.Fill(&d, rec, off); err != nil {
			t.Fatal(err)
		}
		if !d.History || d.ID != off || d.Exchange != "ex" || d.RoutingKey != "rk" || string(d.Body) != "body" {
			t.Fatalf("delivery %+v", d)
		}
		pv, err := amqptab.ScanProps(d.Props)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]any{}
		err = amqptab.ScanTable(pv.Value(d.Props, amqptab.FlagHeaders), func(k []byte, tag byte, v []byte) error {
			if n, ok := amqptab.Int(tag, v); ok {
				got[string(k)] = n
			} else {
				got[string(k)] = string(v[4:])
			}
			return nil
		})
		if err != nil || len(got) != 2 || got["a"] != "x" || got[hdrStreamOffset] != int64(off) {
			t.Fatalf("headers %v, %v", got, err)
		}
	}
	if string(rec) != orig {
		t.Fatal("Fill changed the record")
	}
	var d Delivery
	if err := h.Fill(&d, []byte{0x80}, 1); err == nil {
		t.Fatal("a malformed record filled a delivery")
	}
}

// Ensure the sweep looks at aging history every tenth of max-age,
// between one and ten seconds.
func TestHistorySweepInterval(t *testing.T) {
	for _, tc := range []struct{ age, want time.Duration }{
		{2 * time.Second, time.Second},
		{30 * time.Second, 3 * time.Second},
		{7 * 24 * time.Hour, 10 * time.Second},
	} {
		if got := historySweepInterval(tc.age); got != tc.want {
			t.Errorf("max-age %v: got %v, want %v", tc.age, got, tc.want)
		}
	}
}
