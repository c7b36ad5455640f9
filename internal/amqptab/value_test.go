package amqptab

import (
	"math"
	"testing"
)

// Ensure DecodedInt takes every integer type, clamps what int64 cannot
// hold, and refuses what is not an integer.
func TestDecodedInt(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int64
		ok   bool
	}{
		{int8(-8), -8, true}, {uint8(8), 8, true}, {int16(-16), -16, true}, {uint16(16), 16, true},
		{int32(-32), -32, true}, {uint32(32), 32, true}, {int64(-64), -64, true},
		{int(-1), -1, true}, {uint(1), 1, true}, {uint64(math.MaxUint64), math.MaxInt64, true},
		{float64(1), 0, false}, {true, 0, false}, {"1", 0, false}, {nil, 0, false},
	} {
		if got, ok := DecodedInt(tc.v); got != tc.want || ok != tc.ok {
			t.Errorf("DecodedInt(%T %v) = %d, %v; want %d, %v", tc.v, tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

// Ensure DecodedString takes a longstr or a byte array, and nothing else.
func TestDecodedString(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
		ok   bool
	}{
		{"s", "s", true}, {[]byte("x"), "x", true}, {"", "", true},
		{int8(1), "", false}, {nil, "", false}, {[]any{"s"}, "", false},
	} {
		if got, ok := DecodedString(tc.v); got != tc.want || ok != tc.ok {
			t.Errorf("DecodedString(%T %v) = %q, %v; want %q, %v", tc.v, tc.v, got, ok, tc.want, tc.ok)
		}
	}
}
