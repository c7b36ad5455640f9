package amqptab

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

// Ensure properties scan to their values and rewrite with a property
// dropped and the headers replaced, byte for byte.
func TestPropsScanRewrite(t *testing.T) {
	raw := []byte{
		0xa9, 0x00, // flags: content-type, headers, priority, expiration
		3, 't', 'x', 't', // content-type
		0, 0, 0, 0, // headers: empty table
		7,           // priority
		2, '6', '0', // expiration "60"
	}
	p, err := ScanProps(raw)
	if err != nil {
		t.Fatal(err)
	}
	if p.Flags != FlagContentType|FlagHeaders|FlagPriority|FlagExpiration {
		t.Fatalf("flags %#x", p.Flags)
	}
	if v := p.Value(raw, FlagExpiration); string(v) != "60" {
		t.Fatalf("expiration %q", v)
	}
	if pr, ok := p.Priority(raw); !ok || pr != 7 {
		t.Fatalf("priority %d %v", pr, ok)
	}
	if v := p.Value(raw, FlagMessageID); v != nil {
		t.Fatalf("absent message-id %q", v)
	}
	hdrs, start := Begin(nil)
	hdrs = AppendLongStr(AppendKey(hdrs, "k"), "v")
	hdrs = End(hdrs, start)
	got := AppendProps(nil, raw, &p, FlagExpiration, hdrs)
	want := []byte{
		0xa8, 0x00, // flags: content-type, headers, priority
		3, 't', 'x', 't',
		0, 0, 0, 8, 1, 'k', 'S', 0, 0, 0, 1, 'v', // headers {k: "v"}
		7,
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("rewritten\n got % x\nwant % x", got, want)
	}
	// Truncations and trailing bytes are refused.
	for n := range len(raw) {
		if _, err := ScanProps(raw[:n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("ScanProps of %d bytes: %v", n, err)
		}
	}
	if _, err := ScanProps(append(raw, 0)); !errors.Is(err, ErrMalformed) {
		t.Fatal("trailing byte accepted")
	}
}

// Ensure a table of every tag decodes to the documented Go types.
func TestReadTable(t *testing.T) {
	tbl, start := Begin(nil)
	tbl = AppendLongStr(AppendKey(tbl, "s"), "str")
	tbl = AppendLong(AppendKey(tbl, "l"), -5)
	tbl = AppendTimestamp(AppendKey(tbl, "t"), 1700000000)
	tbl = AppendRaw(AppendKey(tbl, "b"), 'b', []byte{0xff})
	tbl = AppendRaw(AppendKey(tbl, "u"), 'u', []byte{0, 9})
	tbl = AppendRaw(AppendKey(tbl, "I"), 'I', []byte{0xff, 0xff, 0xff, 0xfe})
	tbl = AppendRaw(AppendKey(tbl, "bool"), 't', []byte{1})
	tbl = AppendRaw(AppendKey(tbl, "D"), 'D', []byte{2, 0, 0, 1, 0})
	tbl = AppendRaw(AppendKey(tbl, "V"), 'V', nil)
	tbl = AppendRaw(AppendKey(tbl, "x"), 'x', []byte{0, 0, 0, 2, 1, 2})
	tbl = append(AppendKey(tbl, "A"), 'A')
	var a int
	tbl, a = Begin(tbl)
	tbl = AppendLongStr(tbl, "e")
	tbl = End(tbl, a)
	tbl = append(AppendKey(tbl, "F"), 'F')
	var f int
	tbl, f = Begin(tbl)
	tbl = AppendLong(AppendKey(tbl, "n"), 1)
	tbl = End(tbl, f)
	tbl = AppendLongStr(AppendKey(tbl, "s"), "dup") // the first value wins
	tbl = End(tbl, start)
	got, err := ReadTable(tbl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"s": "str", "l": int64(-5), "t": time.Unix(1700000000, 0).UTC(), "b": int8(-1), "u": uint16(9),
		"I": int32(-2), "bool": true, "D": Decimal{2, 256}, "V": nil, "x": []byte{1, 2},
		"A": []any{"e"}, "F": map[string]any{"n": int64(1)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
	if _, err := ReadTable([]byte{0, 0, 0, 2, 1, 'k'}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated entry: %v", err)
	}
	if _, err := ReadTable([]byte{0, 0, 0, 3, 1, 'k', '?'}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown tag: %v", err)
	}
}

// FuzzReadTable checks that no input makes the decoder panic or read
// past its input, and that ScanProps agrees with itself.
func FuzzReadTable(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 6, 1, 'k', 'S', 0, 0, 0})
	f.Add([]byte{0, 0, 0, 9, 1, 'a', 'A', 0, 0, 0, 2, 'V', 'V'})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ReadTable(b)
		if p, err := ScanProps(b); err == nil {
			out := AppendProps(nil, b, &p, 0, nil)
			if !bytes.Equal(out[2:], b[2:]) {
				t.Fatalf("props rewrite changed the values: % x -> % x", b, out)
			}
		}
	})
}
