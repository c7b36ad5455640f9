package fieldval

import (
	"bytes"
	"math"
	"testing"
	"time"
)

type namedTable map[string]any

type Decimal struct {
	Scale uint8
	Value uint32
}

// Ensure type names are RabbitMQ's.
func TestType(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{nil, "void"}, {true, "bool"}, {int8(1), "byte"}, {uint8(1), "unsignedbyte"},
		{int16(1), "short"}, {uint16(1), "unsignedshort"}, {int32(1), "signedint"},
		{uint32(1), "unsignedint"}, {int64(1), "long"}, {1, "long"}, {uint64(1), "long"},
		{float32(1), "float"}, {1.0, "double"}, {"s", "longstr"}, {[]byte("b"), "binary"},
		{[]any{}, "array"}, {time.Unix(1, 0), "timestamp"}, {map[string]any{}, "table"},
		{namedTable{}, "table"}, {Decimal{}, "decimal"}, {struct{}{}, "struct {}"},
	}
	for _, c := range cases {
		if got := Type(c.v); got != c.want {
			t.Errorf("Type(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
}

// Ensure ExactEqual is =:= without the AMQP types at the top and with
// them inside arrays and tables.
func TestExactEqual(t *testing.T) {
	cases := []struct {
		a, b any
		want bool
	}{
		{int8(5), int64(5), true},
		{uint64(math.MaxUint64), int64(-1), false},
		{int32(1), 1.0, false},
		{float32(1.5), 1.5, true},
		{"x", []byte("x"), true},
		{nil, nil, true},
		{nil, "", false},
		{true, int32(1), false},
		{time.Unix(5, 0), int64(5), true},
		{[]any{int32(1)}, []any{int32(1)}, true},
		{[]any{int32(1)}, []any{int64(1)}, false},
		{map[string]any{"k": "v"}, namedTable{"k": "v"}, true},
		{map[string]any{"k": int16(1)}, map[string]any{"k": int32(1)}, false},
		{Decimal{2, 5}, Decimal{2, 5}, true},
	}
	for _, c := range cases {
		if got := ExactEqual(c.a, c.b); got != c.want {
			t.Errorf("ExactEqual(%#v, %#v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// Ensure integers print in decimal, a uint64 above MaxInt64 unsigned.
func TestIntegerText(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{{int8(-3), "-3"}, {uint64(math.MaxUint64), "18446744073709551615"}, {time.Unix(7, 0), "7"}} {
		i, ok := Int(c.v)
		if got := string(i.AppendText(nil)); !ok || got != c.want {
			t.Errorf("Int(%#v) = %s %v, want %s", c.v, got, ok, c.want)
		}
	}
	if _, ok := Int(1.0); ok {
		t.Error("a float is an integer")
	}
}

// Ensure the canonical encoding is the one on disk (binding identities
// are catalog keys): keys sorted, each value tagged with its type name.
func TestAppendTable(t *testing.T) {
	got := AppendTable(nil, map[string]any{"b": int16(-2), "a": []any{true, "s"}, "c": nil})
	want := []byte{
		3,                                  // 3 keys
		1, 'a', 5, 'a', 'r', 'r', 'a', 'y', // "a": array
		2,                     // 2 elements
		4, 'b', 'o', 'o', 'l', // bool
		1,                                    // true
		7, 'l', 'o', 'n', 'g', 's', 't', 'r', // longstr
		1, 's', // "s"
		1, 'b', 5, 's', 'h', 'o', 'r', 't', // "b": short
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, // -2 as u64
		1, 'c', 4, 'v', 'o', 'i', 'd', // "c": void
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
	if !bytes.Equal(AppendTable(nil, map[string]any{"t": namedTable{"k": 1.5}}),
		AppendTable(nil, map[string]any{"t": map[string]any{"k": 1.5}})) {
		t.Fatal("a named table encodes unlike a plain one")
	}
}
