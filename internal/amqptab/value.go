package amqptab

import "math"

// DecodedString returns the text a decoded longstr ('S', a string) or
// byte array ('x', a []byte) holds.
func DecodedString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	}
	return "", false
}

// DecodedInt returns the integer a decoded value holds, as int64: any of
// the integer types Decode and ReadTable give, and Go's int, uint and
// uint64, which tables built in Go code hold. A uint or uint64 above
// math.MaxInt64 is clamped to it. Other types, floats and bools included,
// are not integers.
func DecodedInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	case uint:
		if uint64(x) > math.MaxInt64 {
			return math.MaxInt64, true
		}
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return math.MaxInt64, true
		}
		return int64(x), true
	}
	return 0, false
}
