package amqp10

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// Ensure each value encodes to RabbitMQ's bytes (amqp10_binary_generator)
// and those bytes decode back to it.
func TestValueGolden(t *testing.T) {
	long300 := strings.Repeat("a", 300)
	tests := []struct {
		name string
		v    any
		want []byte
	}{
		{"null", nil, []byte{0x40}},
		{"true", true, []byte{0x41}},
		{"false", false, []byte{0x42}},
		{"uint0", uint32(0), []byte{0x43}},
		{"smalluint", uint32(255), []byte{0x52, 0xff}},
		{"uint", uint32(256), []byte{0x70, 0, 0, 1, 0}},
		{"ulong0", uint64(0), []byte{0x44}},
		{"smallulong", uint64(0x75), []byte{0x53, 0x75}},
		{"ulong", uint64(1 << 40), []byte{0x80, 0, 0, 1, 0, 0, 0, 0, 0}},
		{"ubyte", uint8(9), []byte{0x50, 9}},
		{"ushort", uint16(0x1234), []byte{0x60, 0x12, 0x34}},
		{"byte", int8(-2), []byte{0x51, 0xfe}},
		{"short", int16(-2), []byte{0x61, 0xff, 0xfe}},
		{"smallint", int32(-128), []byte{0x54, 0x80}},
		{"int", int32(128), []byte{0x71, 0, 0, 0, 0x80}},
		{"smalllong", int64(127), []byte{0x55, 0x7f}},
		{"long", int64(-129), []byte{0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}},
		{"float", float32(1.5), []byte{0x72, 0x3f, 0xc0, 0, 0}},
		{"double", float64(-2), []byte{0x82, 0xc0, 0, 0, 0, 0, 0, 0, 0}},
		{"char", Char('€'), []byte{0x73, 0, 0, 0x20, 0xac}},
		{"timestamp", Timestamp(1000), []byte{0x83, 0, 0, 0, 0, 0, 0, 0x03, 0xe8}},
		{"uuid", UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
			[]byte{0x98, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		{"decimal32", Decimal32{1, 2, 3, 4}, []byte{0x74, 1, 2, 3, 4}},
		{"vbin8", []byte{1, 2}, []byte{0xa0, 0x02, 1, 2}},
		{"str8", "hé", []byte{0xa1, 0x03, 'h', 0xc3, 0xa9}},
		{"str32", long300, append([]byte{0xb1, 0, 0, 0x01, 0x2c}, long300...)},
		{"sym8", Symbol("x-exchange"), append([]byte{0xa3, 10}, "x-exchange"...)},
		{"list0", []any{}, []byte{0x45}},
		{"list8", []any{true, uint32(0)}, []byte{
			0xc0, 0x03, 0x02, // list8, size 3 (count + items), count 2
			0x41, // true
			0x43, // uint 0
		}},
		{"list32 by count", make([]any, 255), append([]byte{
			0xd0, 0, 0, 0x01, 0x03, // list32, size 259
			0, 0, 0, 0xff, // count 255
		}, bytes.Repeat([]byte{0x40}, 255)...)},
		{"map8 empty", Map{}, []byte{0xc1, 0x01, 0x00}},
		{"map8", Map{{Symbol("k"), int64(1)}}, []byte{
			0xc1, 0x06, 0x02, // map8, size 6, count 2 (one entry)
			0xa3, 0x01, 'k', // sym8 "k"
			0x55, 0x01, // smalllong 1
		}},
		{"array8 of symbols", Array{Symbol("a"), Symbol("bc")}, []byte{
			0xe0, 0x0d, 0x02, // array8, size 13, count 2
			0xb3,            // element constructor sym32
			0, 0, 0, 1, 'a', // "a"
			0, 0, 0, 2, 'b', 'c', // "bc"
		}},
		{"array of longs", Array{int64(1), int64(-1)}, []byte{
			0xe0, 0x12, 0x02, 0x81,
			0, 0, 0, 0, 0, 0, 0, 1,
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		}},
		{"array of lists", Array{[]any{true}}, []byte{
			0xe0, 0x0b, 0x01, 0xd0, // array8, size 11, count 1, list32
			0, 0, 0, 5, 0, 0, 0, 1, 0x41, // list32 size 5, count 1, true
		}},
		{"described", Described{Descriptor: uint64(0x75), Value: []byte("hi")}, []byte{
			0x00, 0x53, 0x75, 0xa0, 0x02, 'h', 'i',
		}},
		{"described array", Array{Described{Symbol("d"), int32(1)}, Described{Symbol("d"), int32(2)}}, []byte{
			0xe0, 0x0e, 0x02, // array8, size 14, count 2
			0x00, 0xa3, 0x01, 'd', 0x71, // constructor: described by "d", int
			0, 0, 0, 1, 0, 0, 0, 2,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendValue(nil, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("encode: got % x, want % x", got, tc.want)
			}
			v, n, err := Decode(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tc.want) {
				t.Fatalf("decode took %d bytes, want %d", n, len(tc.want))
			}
			want := tc.v
			if l, ok := want.([]any); ok && len(l) == 255 {
				want = l // make([]any, 255) holds nils, as decoded
			}
			if !reflect.DeepEqual(v, want) {
				t.Fatalf("decode: got %#v, want %#v", v, want)
			}
		})
	}
}

// Ensure the decoder takes the forms RabbitMQ's generator never makes
// but other encoders do.
func TestDecodeOtherForms(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want any
	}{
		{"boolean 0x56", []byte{0x56, 0x01}, true},
		{"list32 small", []byte{0xd0, 0, 0, 0, 5, 0, 0, 0, 1, 0x40}, []any{nil}},
		{"map32 empty", []byte{0xd1, 0, 0, 0, 4, 0, 0, 0, 0}, Map{}},
		{"vbin32", []byte{0xb0, 0, 0, 0, 1, 7}, []byte{7}},
		{"sym32", []byte{0xb3, 0, 0, 0, 1, 'x'}, Symbol("x")},
		{"array of true", []byte{0xe0, 0x02, 0x03, 0x41}, Array{true, true, true}},
		{"NaN float", []byte{0x72, 0x7f, 0xc0, 0, 0}, float32(math.NaN())},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, n, err := Decode(tc.in)
			if err != nil || n != len(tc.in) {
				t.Fatalf("got %v, %d bytes, %v", v, n, err)
			}
			if f, ok := tc.want.(float32); ok && f != f {
				if g, ok := v.(float32); !ok || g == g {
					t.Fatalf("got %#v, want NaN", v)
				}
				return
			}
			if !reflect.DeepEqual(v, tc.want) {
				t.Fatalf("got %#v, want %#v", v, tc.want)
			}
		})
	}
}

// Ensure malformed input is refused with ErrMalformed, without
// allocating for counts the input cannot hold.
func TestDecodeMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"unknown constructor", []byte{0x99}},
		{"truncated uint", []byte{0x70, 0, 0}},
		{"vbin8 past end", []byte{0xa0, 5, 1}},
		{"vbin32 size beyond input", []byte{0xb0, 0xff, 0xff, 0xff, 0xff}},
		{"bad UTF-8", []byte{0xa1, 1, 0xff}},
		{"bad boolean", []byte{0x56, 2}},
		{"list count beyond size", []byte{0xc0, 0x02, 0x05, 0x40}},
		{"list32 huge count", []byte{0xd0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff}},
		{"list trailing bytes", []byte{0xc0, 0x03, 0x01, 0x40, 0x40}},
		{"map odd count", []byte{0xc1, 0x02, 0x01, 0x40}},
		{"array of nulls beyond budget", []byte{0xf0, 0, 0, 0, 5, 0x10, 0, 0, 0, 0x40}},
		{"array count beyond size", []byte{0xe0, 0x03, 0x09, 0x50, 0x01}},
		{"compound descriptor", []byte{0x00, 0x45, 0x40}},
		{"doubly described array", []byte{0xe0, 0x04, 0x01, 0x00, 0x40, 0x00}},
		{"nesting too deep", append(bytes.Repeat([]byte{0x00, 0x40}, MaxDepth), 0x40)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if v, _, err := Decode(tc.in); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %#v, %v; want ErrMalformed", v, err)
			}
		})
	}
}

// Ensure values without an encoding are refused and leave dst alone.
func TestAppendValueUnsupported(t *testing.T) {
	deep := any(nil)
	for range MaxDepth + 1 {
		deep = []any{deep}
	}
	for _, v := range []any{
		struct{}{}, "\xff", uint(1), Array{int32(1), int64(2)}, Array{struct{}{}}, deep,
		Map{{Key: "k", Value: make(chan int)}},
	} {
		dst := []byte{1, 2}
		got, err := AppendValue(dst, v)
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("%T: got error %v, want ErrUnsupported", v, err)
		}
		if !bytes.Equal(got, []byte{1, 2}) {
			t.Fatalf("%T: dst changed to % x", v, got)
		}
	}
}

// Ensure a compound that outgrows the 8-bit form switches to the
// 32-bit form and decodes back.
func TestCompoundForms(t *testing.T) {
	for _, n := range []int{0, 1, 84, 85, 254, 255, 1000} {
		m := make(Map, n)
		for i := range m {
			m[i] = MapEntry{Key: Symbol("k"), Value: uint8(i)}
		}
		b, err := AppendValue(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		small := n < 64 // 5 bytes per entry, 255 bytes at most
		if (b[0] == codeMap8) != small {
			t.Fatalf("%d entries: constructor 0x%02x", n, b[0])
		}
		v, _, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.(Map); len(got) != n || (n > 0 && got[n-1].Value != uint8(n-1)) {
			t.Fatalf("%d entries: decoded %d", n, len(got))
		}
	}
}

// Ensure DecodeBudget takes zero-width array elements from a budget its
// calls share, and refuses a value with more than are left.
func TestDecodeBudget(t *testing.T) {
	nulls := []byte{codeArray8, 0x02, 0x03, codeNull} // three nulls
	budget := 5
	if v, n, err := DecodeBudget(nulls, &budget); err != nil || n != len(nulls) || len(v.(Array)) != 3 || budget != 2 {
		t.Fatalf("first: %v %d %v, budget %d", v, n, err, budget)
	}
	if _, _, err := DecodeBudget(nulls, &budget); !errors.Is(err, ErrMalformed) || budget != 2 {
		t.Fatalf("second: %v, budget %d; want ErrMalformed, 2", err, budget)
	}
}
