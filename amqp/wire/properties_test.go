package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/internal/testutil"
)

func allProps() Properties {
	return Properties{
		Flags: FlagContentType | FlagContentEncoding | FlagHeaders | FlagDeliveryMode |
			FlagPriority | FlagCorrelationID | FlagReplyTo | FlagExpiration | FlagMessageID |
			FlagTimestamp | FlagType | FlagUserID | FlagAppID | FlagClusterID,
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		Headers:         Table{"x-b": int32(2), "x-a": "one", "CC": []any{"k2"}},
		DeliveryMode:    2,
		Priority:        7,
		CorrelationID:   "corr",
		ReplyTo:         "amq.rabbitmq.reply-to",
		Expiration:      "60000",
		MessageID:       "m-1",
		Timestamp:       1700000000,
		Type:            "order.created",
		UserID:          "guest",
		AppID:           "app",
		ClusterID:       "c",
	}
}

func TestPropertiesRoundTripAllFlags(t *testing.T) {
	p := allProps()
	if p.Flags != 0xfffc {
		t.Fatalf("flags %#x", p.Flags)
	}
	raw, err := AppendProperties(nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseProperties(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip:\ngot  %+v\nwant %+v", got, p)
	}
	checkViewAgrees(t, raw, got)

	// Each property alone.
	for bit := uint16(0x8000); bit >= FlagClusterID; bit >>= 1 {
		one := allProps()
		one.Flags = bit
		raw, err := AppendProperties(nil, &one)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseProperties(raw)
		if err != nil {
			t.Fatalf("flag %#04x: %v", bit, err)
		}
		again, _ := AppendProperties(nil, &got)
		testutil.AssertBytes(t, again, raw)
		checkViewAgrees(t, raw, got)
	}
}

// checkViewAgrees compares ScanProperties with ParseProperties.
func checkViewAgrees(t *testing.T, raw []byte, p Properties) {
	t.Helper()
	v, err := ScanProperties(raw)
	if err != nil {
		t.Fatalf("ScanProperties: %v", err)
	}
	if v.Flags != p.Flags || v.DeliveryMode != p.DeliveryMode || v.Priority != p.Priority ||
		string(v.Expiration) != p.Expiration || string(v.UserID) != p.UserID || string(v.ReplyTo) != p.ReplyTo {
		t.Fatalf("view %+v disagrees with %+v", v, p)
	}
	for _, f := range []struct {
		flag uint16
		b    []byte
	}{{FlagExpiration, v.Expiration}, {FlagUserID, v.UserID}, {FlagReplyTo, v.ReplyTo}, {FlagHeaders, v.Headers}} {
		if (p.Flags&f.flag != 0) != (f.b != nil) {
			t.Fatalf("flag %#04x: view slice presence %v", f.flag, f.b != nil)
		}
	}
	if p.Flags&FlagHeaders == 0 {
		if v.HeadersPos != -1 {
			t.Fatalf("HeadersPos %d without headers", v.HeadersPos)
		}
		return
	}
	if !bytes.Equal(raw[v.HeadersPos:v.HeadersPos+len(v.Headers)], v.Headers) {
		t.Fatalf("HeadersPos %d does not locate the headers", v.HeadersPos)
	}
	h, n, err := amqptab.ReadTable(v.Headers)
	if err != nil || n != len(v.Headers) || !reflect.DeepEqual(h, p.Headers) {
		t.Fatalf("view headers %v (%d, %v), want %v", h, n, err, p.Headers)
	}
	if ok, _ := amqptab.TableSorted(v.Headers); !ok {
		t.Fatal("headers not written sorted")
	}
}

func TestPropertiesGolden(t *testing.T) {
	p := Properties{
		Flags:        FlagContentType | FlagHeaders | FlagDeliveryMode | FlagExpiration | FlagTimestamp,
		ContentType:  "text/plain",
		Headers:      Table{"b": true, "a": int32(1)},
		DeliveryMode: 2,
		Expiration:   "500",
		Timestamp:    0x0102030405060708,
	}
	want := testutil.HexBytes(t, `
		b140                     # content-type 0x8000, headers 0x2000, delivery-mode 0x1000,
		                         # expiration 0x0100, timestamp 0x0040
		0a 'text/plain'          # content-type
		0000000b                 # headers: table of 11 bytes, keys sorted
		   01 'a' 'I' 00000001
		   01 'b' 't' 01
		02                       # delivery-mode
		03 '500'                 # expiration
		0102030405060708         # timestamp
	`)
	got, err := AppendProperties(nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	testutil.AssertBytes(t, got, want)
	v, err := ScanProperties(want)
	if err != nil {
		t.Fatal(err)
	}
	want1 := PropsView{Flags: 0xb140, DeliveryMode: 2, Expiration: []byte("500"), Headers: want[13:28], HeadersPos: 13, Timestamp: 0x0102030405060708}
	if !reflect.DeepEqual(v, want1) {
		t.Fatalf("view\ngot  %+v\nwant %+v", v, want1)
	}
}

// RabbitMQ ignores flag bits 1-0 (it expects no continuation word);
// they are never written.
func TestPropertiesIgnoredFlagBits(t *testing.T) {
	raw := testutil.HexBytes(t, `1003 02`) // delivery-mode, plus bits 1 and 0
	p, err := ParseProperties(raw)
	if err != nil || p.Flags != FlagDeliveryMode || p.DeliveryMode != 2 {
		t.Fatalf("ParseProperties = %+v, %v", p, err)
	}
	v, err := ScanProperties(raw)
	if err != nil || v.Flags != FlagDeliveryMode {
		t.Fatalf("ScanProperties = %+v, %v", v, err)
	}
	p.Flags |= 0x0003
	out, err := AppendProperties(nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	testutil.AssertBytes(t, out, testutil.HexBytes(t, `1000 02`))
}

func TestPropertiesMalformed(t *testing.T) {
	p := allProps()
	raw, _ := AppendProperties(nil, &p)
	for i := range len(raw) {
		if _, err := ParseProperties(raw[:i]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseProperties of %d/%d bytes: %v", i, len(raw), err)
		}
		if _, err := ScanProperties(raw[:i]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("ScanProperties of %d/%d bytes: %v", i, len(raw), err)
		}
	}
	trailing := append(raw, 0)
	if _, err := ParseProperties(trailing); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "trailing") {
		t.Fatalf("ParseProperties trailing: %v", err)
	}
	if _, err := ScanProperties(trailing); !errors.Is(err, ErrMalformed) {
		t.Fatalf("ScanProperties trailing: %v", err)
	}
}

func TestAppendPropertiesErrors(t *testing.T) {
	dst := []byte("keep")
	p := Properties{Flags: FlagMessageID, MessageID: strings.Repeat("m", 256)}
	out, err := AppendProperties(dst, &p)
	if !errors.Is(err, ErrFieldType) || string(out) != "keep" || !strings.Contains(err.Error(), "message-id") {
		t.Fatalf("long message-id: %q, %v", out, err)
	}
	p = Properties{Flags: FlagHeaders, Headers: Table{"k": struct{}{}}}
	out, err = AppendProperties(dst, &p)
	if !errors.Is(err, ErrFieldType) || string(out) != "keep" {
		t.Fatalf("bad header: %q, %v", out, err)
	}
	// Fields whose flag is clear are not written.
	p = Properties{Flags: 0, ContentType: "ignored", Headers: Table{"k": struct{}{}}}
	out, err = AppendProperties(nil, &p)
	if err != nil || !bytes.Equal(out, []byte{0, 0}) {
		t.Fatalf("no flags: %x, %v", out, err)
	}
}

func TestParseContentHeader(t *testing.T) {
	payload := testutil.HexBytes(t, `
		003c 0000                # class 60, weight 0
		0000000000001000         # body size 4096
		1800 02 05               # delivery-mode 2, priority 5
	`)
	h, err := ParseContentHeader(payload)
	if err != nil {
		t.Fatal(err)
	}
	if h.ClassID != ClassBasic || h.Weight != 0 || h.BodySize != 4096 || !bytes.Equal(h.Props, payload[12:]) {
		t.Fatalf("header %+v", h)
	}
	_, v, err := ScanContentHeader(payload)
	if err != nil || v.DeliveryMode != 2 || v.Priority != 5 || v.HeadersPos != -1 {
		t.Fatalf("view %+v, %v", v, err)
	}
	if _, err := ParseContentHeader(payload[:13]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short header: %v", err)
	}
	if _, err := ParseContentHeader(payload[:15]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated properties: %v", err)
	}
}

func TestScanPropertiesAllocs(t *testing.T) {
	p := allProps()
	raw, _ := AppendProperties(nil, &p)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ScanProperties(raw); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ScanProperties allocs = %v, want 0", allocs)
	}
}

// Ensure ScanProperties checks the headers through every nesting level
// (amqptab.CheckTable), as ParseProperties's decoding does, and that the
// errors wrap ErrMalformed.
func TestScanPropertiesBadHeaders(t *testing.T) {
	// deep is a headers table nested amqptab.MaxDepth+1 deep.
	deep := []byte{1, 'l', 't', 1}
	for range amqptab.MaxDepth {
		deep = append(binary.BigEndian.AppendUint32([]byte{1, 'n', 'F'}, uint32(len(deep))), deep...)
	}
	deep = append(binary.BigEndian.AppendUint32(nil, uint32(len(deep))), deep...)
	for _, tc := range []struct {
		name    string
		headers []byte
	}{
		{"short length", testutil.HexBytes(t, `0000 00`)},
		{"length past end", testutil.HexBytes(t, `00000005 01 'k' 'V'`)},
		{"bad nested", testutil.HexBytes(t, `0000000a 01 'k' 'F' 00000003 01 'k' 'Z'`)},
		{"bad array", testutil.HexBytes(t, `00000008 01 'k' 'A' 00000001 'Z'`)},
		{"too deep", deep},
	} {
		props := append([]byte{0x20, 0}, tc.headers...)
		if _, err := ScanProperties(props); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: ScanProperties err = %v", tc.name, err)
		}
		if _, err := ParseProperties(props); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: ParseProperties err = %v", tc.name, err)
		}
	}
	// One level less is accepted.
	ok := deep[4+3:] // the table under the outermost key
	if _, err := ScanProperties(append([]byte{0x20, 0}, ok...)); err != nil {
		t.Fatalf("depth %d: %v", amqptab.MaxDepth, err)
	}
}
