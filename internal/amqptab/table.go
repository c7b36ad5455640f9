package amqptab

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Decimal is a field-table decimal ('D'): Value × 10^-Scale.
type Decimal struct {
	Scale uint8
	Value uint32
}

// MaxDepth bounds the nesting of tables and arrays (a top-level table is
// depth 1).
const MaxDepth = 64

// ValueSize returns the encoded size of a value of tag at the start of b,
// -1 when b is too short, -2 for an unknown tag. amqp/wire uses it too.
func ValueSize(tag byte, b []byte) int {
	n := 0
	switch tag {
	case 'V':
		return 0
	case 't', 'b', 'B':
		n = 1
	case 's', 'u':
		n = 2
	case 'I', 'i', 'f':
		n = 4
	case 'D':
		n = 5
	case 'l', 'L', 'd', 'T':
		n = 8
	case 'S', 'x', 'A', 'F':
		if len(b) < 4 {
			return -1
		}
		l := binary.BigEndian.Uint32(b)
		if uint64(l) > uint64(len(b)-4) {
			return -1
		}
		return 4 + int(l)
	default:
		return -2
	}
	if len(b) < n {
		return -1
	}
	return n
}

func valueErr(tag byte, size int) error {
	if size == -2 {
		return fmt.Errorf("amqptab: unknown field tag %q: %w", tag, ErrMalformed)
	}
	return fmt.Errorf("amqptab: truncated value of tag %q: %w", tag, ErrMalformed)
}

// body returns the contents of exactly one u32-length-prefixed table or
// array.
func body(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("amqptab: truncated length: %w", ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) != uint64(len(b)-4) {
		return nil, fmt.Errorf("amqptab: length %d for %d bytes: %w", n, len(b)-4, ErrMalformed)
	}
	return b[4:], nil
}

// ScanTable calls fn for each entry of b, exactly one u32-length-prefixed
// table, without allocating. value is the raw encoding after the tag (for
// S, x, A and F with its u32 length). An error from fn stops the scan and
// is returned. The slices alias b.
func ScanTable(b []byte, fn func(key []byte, tag byte, value []byte) error) error {
	bd, err := body(b)
	if err != nil {
		return err
	}
	for off := 0; off < len(bd); {
		klen := int(bd[off])
		off++
		if len(bd)-off < klen+1 {
			return fmt.Errorf("amqptab: table entry: truncated key or tag: %w", ErrMalformed)
		}
		key := bd[off : off+klen]
		off += klen
		tag := bd[off]
		off++
		n := ValueSize(tag, bd[off:])
		if n < 0 {
			return valueErr(tag, n)
		}
		if err := fn(key, tag, bd[off:off+n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// ScanArray is ScanTable for an array (the value of an 'A' entry).
func ScanArray(b []byte, fn func(tag byte, value []byte) error) error {
	bd, err := body(b)
	if err != nil {
		return err
	}
	for off := 0; off < len(bd); {
		tag := bd[off]
		off++
		n := ValueSize(tag, bd[off:])
		if n < 0 {
			return valueErr(tag, n)
		}
		if err := fn(tag, bd[off:off+n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// ReadTable decodes exactly one u32-length-prefixed table. An empty table
// is nil. When a key repeats, the first value wins. Nothing aliases b.
func ReadTable(b []byte) (map[string]any, error) { return readTable(b, 1) }

func readTable(b []byte, depth int) (map[string]any, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("amqptab: table nested deeper than %d: %w", MaxDepth, ErrMalformed)
	}
	var t map[string]any
	err := ScanTable(b, func(key []byte, tag byte, value []byte) error {
		v, err := decode(tag, value, depth)
		if err != nil {
			return err
		}
		if t == nil {
			t = map[string]any{}
		}
		if _, dup := t[string(key)]; !dup {
			t[string(key)] = v
		}
		return nil
	})
	return t, err
}

func readArray(b []byte, depth int) ([]any, error) {
	if depth > MaxDepth {
		return nil, fmt.Errorf("amqptab: array nested deeper than %d: %w", MaxDepth, ErrMalformed)
	}
	var a []any
	err := ScanArray(b, func(tag byte, value []byte) error {
		v, err := decode(tag, value, depth)
		a = append(a, v)
		return err
	})
	return a, err
}

// Decode decodes one value as ScanTable or ScanArray report it.
func Decode(tag byte, value []byte) (any, error) {
	if n := ValueSize(tag, value); n < 0 {
		return nil, valueErr(tag, n)
	} else if n != len(value) {
		return nil, fmt.Errorf("amqptab: value of tag %q: %d trailing bytes: %w", tag, len(value)-n, ErrMalformed)
	}
	return decode(tag, value, 1)
}

// decode decodes a value whose size valueSize checked; depth is that of
// its container.
func decode(tag byte, v []byte, depth int) (any, error) {
	switch tag {
	case 't':
		return v[0] != 0, nil
	case 'b':
		return int8(v[0]), nil
	case 'B':
		return v[0], nil
	case 's':
		return int16(binary.BigEndian.Uint16(v)), nil
	case 'u':
		return binary.BigEndian.Uint16(v), nil
	case 'I':
		return int32(binary.BigEndian.Uint32(v)), nil
	case 'i':
		return binary.BigEndian.Uint32(v), nil
	case 'l', 'L':
		return int64(binary.BigEndian.Uint64(v)), nil
	case 'f':
		return math.Float32frombits(binary.BigEndian.Uint32(v)), nil
	case 'd':
		return math.Float64frombits(binary.BigEndian.Uint64(v)), nil
	case 'D':
		return Decimal{Scale: v[0], Value: binary.BigEndian.Uint32(v[1:])}, nil
	case 'T':
		return time.Unix(int64(binary.BigEndian.Uint64(v)), 0).UTC(), nil
	case 'V':
		return nil, nil
	case 'S':
		return string(v[4:]), nil
	case 'x':
		return bytes.Clone(v[4:]), nil
	case 'A':
		return readArray(v, depth+1)
	case 'F':
		return readTable(v, depth+1)
	}
	return nil, fmt.Errorf("amqptab: unknown field tag %q: %w", tag, ErrMalformed)
}

// LongStr returns the string of an 'S' value as ScanTable reports it.
func LongStr(tag byte, value []byte) (string, bool) {
	if tag != 'S' || len(value) < 4 {
		return "", false
	}
	return string(value[4:]), true
}

// Int returns an integer value of any integer tag.
func Int(tag byte, value []byte) (int64, bool) {
	switch tag {
	case 'b':
		return int64(int8(value[0])), true
	case 'B':
		return int64(value[0]), true
	case 's':
		return int64(int16(binary.BigEndian.Uint16(value))), true
	case 'u':
		return int64(binary.BigEndian.Uint16(value)), true
	case 'I':
		return int64(int32(binary.BigEndian.Uint32(value))), true
	case 'i':
		return int64(binary.BigEndian.Uint32(value)), true
	case 'l', 'L', 'T':
		return int64(binary.BigEndian.Uint64(value)), true
	}
	return 0, false
}

// Encoding: a table or array is built by appending to a byte slice. Begin
// reserves its u32 length, entries or elements follow, End fills in the
// length:
//
//	dst, start := amqptab.Begin(dst)
//	dst = amqptab.AppendKey(dst, "count")
//	dst = amqptab.AppendLong(dst, 1)
//	dst = amqptab.End(dst, start)

// Begin appends the u32 length of a table or array, to be filled in by
// End, and returns where it starts.
func Begin(dst []byte) ([]byte, int) { return append(dst, 0, 0, 0, 0), len(dst) }

// End fills in the length reserved by Begin at start.
func End(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// AppendKey appends a table entry's key (cut at 255 bytes).
func AppendKey(dst []byte, key string) []byte {
	if len(key) > 255 {
		key = key[:255]
	}
	return append(append(dst, byte(len(key))), key...)
}

// AppendLongStr appends an 'S' value.
func AppendLongStr(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(append(dst, 'S'), uint32(len(s)))
	return append(dst, s...)
}

// AppendLong appends an 'l' value.
func AppendLong(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 'l'), uint64(v))
}

// AppendTimestamp appends a 'T' value: seconds since the epoch.
func AppendTimestamp(dst []byte, sec int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 'T'), uint64(sec))
}

// AppendRaw appends a value as ScanTable reports it: tag and raw value.
func AppendRaw(dst []byte, tag byte, value []byte) []byte {
	return append(append(dst, tag), value...)
}
