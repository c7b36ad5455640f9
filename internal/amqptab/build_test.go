package amqptab

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// Ensure a table built by hand (Begin, AppendKey, ..., End) of every tag
// decodes to the documented Go types.
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
	got, n, err := ReadTable(tbl)
	if err != nil || n != len(tbl) {
		t.Fatalf("n = %d of %d, err = %v", n, len(tbl), err)
	}
	want := Table{
		"s": "str", "l": int64(-5), "t": time.Unix(1700000000, 0).UTC(), "b": int8(-1), "u": uint16(9),
		"I": int32(-2), "bool": true, "D": Decimal{2, 256}, "V": nil, "x": []byte{1, 2},
		"A": []any{"e"}, "F": Table{"n": int64(1)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
	if _, _, err := ReadTable([]byte{0, 0, 0, 2, 1, 'k'}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated entry: %v", err)
	}
	if _, _, err := ReadTable([]byte{0, 0, 0, 3, 1, 'k', '?'}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown tag: %v", err)
	}
}
