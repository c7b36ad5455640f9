package amqptab

import (
	"bytes"
	"errors"
	"testing"
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

// FuzzScanProps checks that no input makes the properties scanner panic
// or read past its input, and that rewriting what it accepts keeps the
// values.
func FuzzScanProps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 6, 1, 'k', 'S', 0, 0, 0})
	f.Add([]byte{0, 0, 0, 9, 1, 'a', 'A', 0, 0, 0, 2, 'V', 'V'})
	f.Add([]byte{0xa9, 0x00, 3, 't', 'x', 't', 0, 0, 0, 0, 7, 2, '6', '0'})
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := ScanProps(b); err == nil {
			out := AppendProps(nil, b, &p, 0, nil)
			if !bytes.Equal(out[2:], b[2:]) {
				t.Fatalf("props rewrite changed the values: % x -> % x", b, out)
			}
		}
	})
}
