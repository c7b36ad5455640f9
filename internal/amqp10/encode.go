package amqp10

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"
)

// Encoding appends to a slice. Integers take the compact constructors
// where the value allows (uint0, smalluint, smalllong, ...), variable
// width values the 8-bit size form up to 255 bytes, and compounds the
// 8-bit form when their count and size fit: the choices of RabbitMQ's
// amqp10_binary_generator, so that equal messages encode to equal bytes.

// AppendNull appends null.
func AppendNull(dst []byte) []byte { return append(dst, codeNull) }

// AppendBool appends a boolean in its one-byte form (0x41 true, 0x42
// false).
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, codeTrue)
	}
	return append(dst, codeFalse)
}

// AppendUbyte appends a ubyte.
func AppendUbyte(dst []byte, v uint8) []byte { return append(dst, codeUbyte, v) }

// AppendUshort appends a ushort.
func AppendUshort(dst []byte, v uint16) []byte {
	return binary.BigEndian.AppendUint16(append(dst, codeUshort), v)
}

// AppendUint appends a uint.
func AppendUint(dst []byte, v uint32) []byte {
	switch {
	case v == 0:
		return append(dst, codeUint0)
	case v < 256:
		return append(dst, codeSmallUint, byte(v))
	}
	return binary.BigEndian.AppendUint32(append(dst, codeUint), v)
}

// AppendUlong appends a ulong.
func AppendUlong(dst []byte, v uint64) []byte {
	switch {
	case v == 0:
		return append(dst, codeUlong0)
	case v < 256:
		return append(dst, codeSmallUlong, byte(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, codeUlong), v)
}

// AppendByte appends a byte (signed).
func AppendByte(dst []byte, v int8) []byte { return append(dst, codeByte, byte(v)) }

// AppendShort appends a short.
func AppendShort(dst []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(append(dst, codeShort), uint16(v))
}

// AppendInt appends an int.
func AppendInt(dst []byte, v int32) []byte {
	if v >= -128 && v <= 127 {
		return append(dst, codeSmallInt, byte(int8(v)))
	}
	return binary.BigEndian.AppendUint32(append(dst, codeInt), uint32(v))
}

// AppendLong appends a long.
func AppendLong(dst []byte, v int64) []byte {
	if v >= -128 && v <= 127 {
		return append(dst, codeSmallLong, byte(int8(v)))
	}
	return binary.BigEndian.AppendUint64(append(dst, codeLong), uint64(v))
}

// AppendFloat appends a float.
func AppendFloat(dst []byte, v float32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, codeFloat), math.Float32bits(v))
}

// AppendDouble appends a double.
func AppendDouble(dst []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, codeDouble), math.Float64bits(v))
}

// AppendTimestamp appends a timestamp (milliseconds since the epoch).
func AppendTimestamp(dst []byte, ms int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, codeTimestamp), uint64(ms))
}

// AppendUUID appends a uuid.
func AppendUUID(dst []byte, u UUID) []byte { return append(append(dst, codeUUID), u[:]...) }

// AppendChar appends a char.
func AppendChar(dst []byte, c Char) []byte {
	return binary.BigEndian.AppendUint32(append(dst, codeChar), uint32(c))
}

// AppendBinary appends a binary (vbin8 up to 255 bytes, else vbin32).
func AppendBinary(dst, v []byte) []byte {
	return append(appendVar(dst, codeVbin8, codeVbin32, len(v)), v...)
}

// AppendString appends a string (str8 up to 255 bytes, else str32). The
// caller ensures s is UTF-8; AppendValue checks.
func AppendString(dst []byte, s string) []byte {
	return append(appendVar(dst, codeStr8, codeStr32, len(s)), s...)
}

// AppendSymbol appends a symbol (sym8 up to 255 bytes, else sym32).
func AppendSymbol(dst []byte, s string) []byte {
	return append(appendVar(dst, codeSym8, codeSym32, len(s)), s...)
}

func appendVar(dst []byte, code8, code32 byte, n int) []byte {
	if n <= math.MaxUint8 {
		return append(dst, code8, byte(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, code32), uint32(n))
}

// AppendDescriptor appends the start of a described value whose
// descriptor is the ulong code: 0x00, then the code. The value follows.
func AppendDescriptor(dst []byte, code uint64) []byte {
	return AppendUlong(append(dst, codeDescribed), code)
}

// Compound is a list or map being appended: BeginList or BeginMap
// reserves its header, the caller appends the items, End fills the
// header in.
type Compound struct {
	start int
	isMap bool
}

// compoundHeader is the reserved header: code, u32 size, u32 count.
const compoundHeader = 9

// BeginList starts a list.
func BeginList(dst []byte) ([]byte, Compound) {
	return append(dst, codeList32, 0, 0, 0, 0, 0, 0, 0, 0), Compound{start: len(dst)}
}

// BeginMap starts a map.
func BeginMap(dst []byte) ([]byte, Compound) {
	return append(dst, codeMap32, 0, 0, 0, 0, 0, 0, 0, 0), Compound{start: len(dst), isMap: true}
}

// End finishes the compound, which holds count items appended after
// Begin (for a map, keys and values: twice the entries). An empty list
// becomes list0; a compound whose count is under 255 and whose items and
// count fit in 255 bytes takes the 8-bit form, as RabbitMQ encodes.
func (c Compound) End(dst []byte, count int) []byte {
	items := len(dst) - c.start - compoundHeader
	if count == 0 && !c.isMap {
		return append(dst[:c.start], codeList0)
	}
	if count < 255 && items+1 < 256 {
		code := byte(codeList8)
		if c.isMap {
			code = codeMap8
		}
		dst[c.start] = code
		dst[c.start+1] = byte(items + 1)
		dst[c.start+2] = byte(count)
		copy(dst[c.start+3:], dst[c.start+compoundHeader:])
		return dst[:len(dst)-6]
	}
	binary.BigEndian.PutUint32(dst[c.start+1:], uint32(items+4))
	binary.BigEndian.PutUint32(dst[c.start+5:], uint32(count))
	return dst
}

// AppendValue appends any value of the Go representation (see types.go).
// A value with no encoding (another Go type, a string that is not UTF-8,
// mixed array elements, nesting deeper than MaxDepth) is an error
// wrapping ErrUnsupported, and dst is returned unchanged.
func AppendValue(dst []byte, v any) ([]byte, error) {
	start := len(dst)
	dst, err := appendValue(dst, v, 1)
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("amqp10: nesting deeper than %d: %w", MaxDepth, ErrUnsupported)
	}
	switch v := v.(type) {
	case nil:
		return AppendNull(dst), nil
	case bool:
		return AppendBool(dst, v), nil
	case uint8:
		return AppendUbyte(dst, v), nil
	case uint16:
		return AppendUshort(dst, v), nil
	case uint32:
		return AppendUint(dst, v), nil
	case uint64:
		return AppendUlong(dst, v), nil
	case int8:
		return AppendByte(dst, v), nil
	case int16:
		return AppendShort(dst, v), nil
	case int32:
		return AppendInt(dst, v), nil
	case int64:
		return AppendLong(dst, v), nil
	case int:
		return AppendLong(dst, int64(v)), nil
	case float32:
		return AppendFloat(dst, v), nil
	case float64:
		return AppendDouble(dst, v), nil
	case Decimal32:
		return append(append(dst, codeDecimal32), v[:]...), nil
	case Decimal64:
		return append(append(dst, codeDecimal64), v[:]...), nil
	case Decimal128:
		return append(append(dst, codeDecimal128), v[:]...), nil
	case Char:
		return AppendChar(dst, v), nil
	case Timestamp:
		return AppendTimestamp(dst, int64(v)), nil
	case UUID:
		return AppendUUID(dst, v), nil
	case []byte:
		if uint64(len(v)) > math.MaxUint32 {
			break
		}
		return AppendBinary(dst, v), nil
	case string:
		if !utf8.ValidString(v) {
			return dst, fmt.Errorf("amqp10: string is not UTF-8: %w", ErrUnsupported)
		}
		if uint64(len(v)) > math.MaxUint32 {
			break
		}
		return AppendString(dst, v), nil
	case Symbol:
		if uint64(len(v)) > math.MaxUint32 {
			break
		}
		return AppendSymbol(dst, string(v)), nil
	case []any:
		dst, c := BeginList(dst)
		for _, e := range v {
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return c.End(dst, len(v)), nil
	case Map:
		dst, c := BeginMap(dst)
		for _, e := range v {
			var err error
			if dst, err = appendValue(dst, e.Key, depth+1); err != nil {
				return dst, err
			}
			if dst, err = appendValue(dst, e.Value, depth+1); err != nil {
				return dst, err
			}
		}
		return c.End(dst, 2*len(v)), nil
	case Array:
		return appendArray(dst, v, depth, false)
	case Described:
		dst = append(dst, codeDescribed)
		var err error
		if dst, err = appendValue(dst, v.Descriptor, depth+1); err != nil {
			return dst, err
		}
		return appendValue(dst, v.Value, depth+1)
	}
	return dst, fmt.Errorf("amqp10: %T: %w", v, ErrUnsupported)
}

// appendArray appends an array whose elements take the wide constructor
// of the first element's type (as RabbitMQ's generator does); with wide,
// the array itself takes the 32-bit form (as array elements must).
func appendArray(dst []byte, a Array, depth int, wide bool) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("amqp10: nesting deeper than %d: %w", MaxDepth, ErrUnsupported)
	}
	start := len(dst)
	dst = append(dst, codeArray32, 0, 0, 0, 0, 0, 0, 0, 0)
	if len(a) == 0 {
		dst = append(dst, codeNull)
	} else {
		var err error
		if dst, err = appendConstructor(dst, a[0], depth); err != nil {
			return dst, err
		}
		for _, e := range a {
			if dst, err = appendElement(dst, a[0], e, depth); err != nil {
				return dst, err
			}
		}
	}
	items := len(dst) - start - compoundHeader // constructor and values
	if !wide && len(a) < 255 && items+1 < 256 {
		dst[start] = codeArray8
		dst[start+1] = byte(items + 1)
		dst[start+2] = byte(len(a))
		copy(dst[start+3:], dst[start+compoundHeader:])
		return dst[:len(dst)-6], nil
	}
	binary.BigEndian.PutUint32(dst[start+1:], uint32(items+4))
	binary.BigEndian.PutUint32(dst[start+5:], uint32(len(a)))
	return dst, nil
}

// arrayCode is the array element constructor of a Go value.
func arrayCode(v any) (byte, bool) {
	switch v.(type) {
	case nil:
		return codeNull, true
	case bool:
		return codeBool, true
	case uint8:
		return codeUbyte, true
	case uint16:
		return codeUshort, true
	case uint32:
		return codeUint, true
	case uint64:
		return codeUlong, true
	case int8:
		return codeByte, true
	case int16:
		return codeShort, true
	case int32:
		return codeInt, true
	case int64, int:
		return codeLong, true
	case float32:
		return codeFloat, true
	case float64:
		return codeDouble, true
	case Decimal32:
		return codeDecimal32, true
	case Decimal64:
		return codeDecimal64, true
	case Decimal128:
		return codeDecimal128, true
	case Char:
		return codeChar, true
	case Timestamp:
		return codeTimestamp, true
	case UUID:
		return codeUUID, true
	case []byte:
		return codeVbin32, true
	case string:
		return codeStr32, true
	case Symbol:
		return codeSym32, true
	case []any:
		return codeList32, true
	case Map:
		return codeMap32, true
	case Array:
		return codeArray32, true
	}
	return 0, false
}

func appendConstructor(dst []byte, first any, depth int) ([]byte, error) {
	if d, ok := first.(Described); ok {
		dst = append(dst, codeDescribed)
		var err error
		if dst, err = appendValue(dst, d.Descriptor, depth+1); err != nil {
			return dst, err
		}
		if _, nested := d.Value.(Described); nested {
			return dst, fmt.Errorf("amqp10: array of doubly described values: %w", ErrUnsupported)
		}
		return appendConstructor(dst, d.Value, depth)
	}
	code, ok := arrayCode(first)
	if !ok {
		return dst, fmt.Errorf("amqp10: array of %T: %w", first, ErrUnsupported)
	}
	return append(dst, code), nil
}

// appendElement appends e without its constructor; e must have the Go
// type of first (for described values: the same descriptor type and
// value type).
func appendElement(dst []byte, first, e any, depth int) ([]byte, error) {
	if fd, ok := first.(Described); ok {
		d, ok := e.(Described)
		if !ok || reflect.TypeOf(d.Value) != reflect.TypeOf(fd.Value) {
			return dst, fmt.Errorf("amqp10: array mixes %T and %T: %w", first, e, ErrUnsupported)
		}
		return appendElement(dst, fd.Value, d.Value, depth)
	}
	mismatch := func() ([]byte, error) {
		return dst, fmt.Errorf("amqp10: array mixes %T and %T: %w", first, e, ErrUnsupported)
	}
	switch v := e.(type) {
	case nil:
		if first != nil {
			return mismatch()
		}
		return dst, nil
	case bool:
		if _, ok := first.(bool); !ok {
			return mismatch()
		}
		if v {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case uint8:
		if _, ok := first.(uint8); !ok {
			return mismatch()
		}
		return append(dst, v), nil
	case uint16:
		if _, ok := first.(uint16); !ok {
			return mismatch()
		}
		return binary.BigEndian.AppendUint16(dst, v), nil
	case uint32:
		if _, ok := first.(uint32); !ok {
			return mismatch()
		}
		return binary.BigEndian.AppendUint32(dst, v), nil
	case uint64:
		if _, ok := first.(uint64); !ok {
			return mismatch()
		}
		return binary.BigEndian.AppendUint64(dst, v), nil
	case int8:
		if _, ok := first.(int8); !ok {
			return mismatch()
		}
		return append(dst, byte(v)), nil
	case int16:
		if _, ok := first.(int16); !ok {
			return mismatch()
		}
		return binary.BigEndian.AppendUint16(dst, uint16(v)), nil
	case int32:
		if _, ok := first.(int32); !ok {
			return mismatch()
		}
		return binary.BigEndian.AppendUint32(dst, uint32(v)), nil
	case int64, int:
		switch first.(type) {
		case int64, int:
		default:
			return mismatch()
		}
		n, _ := v.(int64)
		if i, ok := v.(int); ok {
			n = int64(i)
		}
		return binary.BigEndian.AppendUint64(dst, uint64(n)), nil
	case float32:
		if _, ok := first.(float32); !ok {
			return mismatch()
		}
		return binary.BigEndian.AppendUint32(dst, math.Float32bits(v)), nil
	case float64:
		if _, ok := first.(float64); !ok {
			return mismatch()
		}
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(v)), nil
	case Decimal32:
		if _, ok := first.(Decimal32); !ok {
			return mismatch()
		}
		return append(dst, v[:]...), nil
	case Decimal64:
		if _, ok := first.(Decimal64); !ok {
			return mismatch()
		}
		return append(dst, v[:]...), nil
	case Decimal128:
		if _, ok := first.(Decimal128); !ok {
			return mismatch()
		}
		return append(dst, v[:]...), nil
	case Char:
		if _, ok := first.(Char); !ok {
			return mismatch()
		}
		return binary.BigEndian.AppendUint32(dst, uint32(v)), nil
	case Timestamp:
		if _, ok := first.(Timestamp); !ok {
			return mismatch()
		}
		return binary.BigEndian.AppendUint64(dst, uint64(v)), nil
	case UUID:
		if _, ok := first.(UUID); !ok {
			return mismatch()
		}
		return append(dst, v[:]...), nil
	case []byte:
		if _, ok := first.([]byte); !ok || uint64(len(v)) > math.MaxUint32 {
			return mismatch()
		}
		return append(binary.BigEndian.AppendUint32(dst, uint32(len(v))), v...), nil
	case string:
		if _, ok := first.(string); !ok || uint64(len(v)) > math.MaxUint32 || !utf8.ValidString(v) {
			return mismatch()
		}
		return append(binary.BigEndian.AppendUint32(dst, uint32(len(v))), v...), nil
	case Symbol:
		if _, ok := first.(Symbol); !ok || uint64(len(v)) > math.MaxUint32 {
			return mismatch()
		}
		return append(binary.BigEndian.AppendUint32(dst, uint32(len(v))), v...), nil
	case []any, Map, Array:
		switch first.(type) {
		case []any, Map, Array:
		default:
			return mismatch()
		}
		if reflect.TypeOf(first) != reflect.TypeOf(e) {
			return mismatch()
		}
		// Encode with a 32-bit header, then drop the constructor byte.
		at := len(dst)
		var err error
		switch v := v.(type) {
		case []any:
			if dst, err = appendLong32(dst, v, nil, depth+1); err != nil {
				return dst, err
			}
		case Map:
			if dst, err = appendLong32(dst, nil, v, depth+1); err != nil {
				return dst, err
			}
		case Array:
			if dst, err = appendArray(dst, v, depth+1, true); err != nil {
				return dst, err
			}
		}
		copy(dst[at:], dst[at+1:])
		return dst[:len(dst)-1], nil
	}
	return dst, fmt.Errorf("amqp10: array of %T: %w", e, ErrUnsupported)
}

// appendLong32 appends a list (items) or a map (m) always in the 32-bit
// form, as array elements must be.
func appendLong32(dst []byte, items []any, m Map, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("amqp10: nesting deeper than %d: %w", MaxDepth, ErrUnsupported)
	}
	start := len(dst)
	code, count := byte(codeList32), len(items)
	if m != nil {
		code, count = codeMap32, 2*len(m)
	}
	dst = append(dst, code, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	for _, e := range items {
		if dst, err = appendValue(dst, e, depth+1); err != nil {
			return dst, err
		}
	}
	for _, e := range m {
		if dst, err = appendValue(dst, e.Key, depth+1); err != nil {
			return dst, err
		}
		if dst, err = appendValue(dst, e.Value, depth+1); err != nil {
			return dst, err
		}
	}
	binary.BigEndian.PutUint32(dst[start+1:], uint32(len(dst)-start-5))
	binary.BigEndian.PutUint32(dst[start+5:], uint32(count))
	return dst, nil
}
