package queues

import (
	"reflect"
	"testing"
	"time"
)

type namedTable map[string]any

func TestArgsRoundTrip(t *testing.T) {
	in := map[string]any{
		"b": int8(-1), "B": uint8(2), "s": int16(-3), "u": uint16(4), "I": int32(-5),
		"i": uint32(6), "l": int64(-7), "f": float32(1.5), "d": 2.25, "S": "str",
		"x": []byte{1, 2}, "t": true, "V": nil,
		"T": time.Unix(1700000000, 0).UTC(),
		"A": []any{int32(1), "two", map[string]any{"k": int64(3)}},
		"F": namedTable{"nested": int16(9)},
	}
	enc, err := encodeArgs(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeArgs(enc)
	if err != nil {
		t.Fatal(err)
	}
	want := normalizeArgs(in)
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %#v\nwant %#v", out, want)
	}
	if _, ok := out["F"].(map[string]any); !ok {
		t.Fatalf("named table not normalised: %T", out["F"])
	}
	if got, _ := decodeArgs(nil); got != nil {
		t.Fatalf("empty decode = %v", got)
	}
}
