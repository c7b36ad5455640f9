package amqptab

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
	"unicode/utf8"
)

// MaxShortstr is the longest shortstr (a table key, a shortstr property
// or method field): its length is one octet.
const MaxShortstr = 255

// ClampShortstr cuts s to at most MaxShortstr bytes, at a UTF-8 boundary
// when s is valid UTF-8, so that the result stays valid.
func ClampShortstr(s string) string {
	if len(s) <= MaxShortstr {
		return s
	}
	n := MaxShortstr // s[n] is the first byte cut off
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(s[n]); i++ {
		n--
	}
	if !utf8.RuneStart(s[n]) { // no boundary in reach: not UTF-8 anyway
		n = MaxShortstr
	}
	return s[:n]
}

// AppendTable appends t as a u32-length-prefixed table with its keys in
// ascending bytewise order. Values must have the Go types Table lists; a
// value of another type, a uint64 above math.MaxInt64, a key longer than
// 255 bytes or nesting deeper than MaxDepth gives an error wrapping
// ErrFieldType, and dst is returned unchanged. A nil or empty table is
// written as its 4-byte zero length.
func AppendTable(dst []byte, t Table) ([]byte, error) {
	out, err := appendTable(dst, t, 1, false)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// AppendTableLossy is AppendTable for a method's table argument, which
// cannot fail: a value AppendTable would reject is written as void
// ('V'), a key longer than 255 bytes is cut by ClampShortstr, and a table
// too long for its u32 length is written empty.
func AppendTableLossy(dst []byte, t Table) []byte {
	dst, _ = appendTable(dst, t, 1, true)
	return dst
}

// appendTable writes a table at depth. In lossy mode it never returns an
// error (see AppendTableLossy).
func appendTable(dst []byte, t map[string]any, depth int, lossy bool) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	keys := slices.Sorted(maps.Keys(t))
	for _, k := range keys {
		if len(k) > MaxShortstr {
			if !lossy {
				return dst, fmt.Errorf("amqptab: table key %.20q...: %d bytes exceeds 255: %w", k, len(k), ErrFieldType)
			}
			k = ClampShortstr(k)
		}
		dst = append(dst, byte(len(k)))
		dst = append(dst, k...)
		var err error
		if dst, err = appendValue(dst, t[k], depth, lossy); err != nil {
			return dst, fmt.Errorf("amqptab: table key %q: %w", k, err)
		}
	}
	return finishLength(dst, start, lossy)
}

func appendArray(dst []byte, a []any, depth int, lossy bool) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for i, v := range a {
		var err error
		if dst, err = appendValue(dst, v, depth, lossy); err != nil {
			return dst, fmt.Errorf("amqptab: array element %d: %w", i, err)
		}
	}
	return finishLength(dst, start, lossy)
}

// finishLength fills in the u32 length reserved at dst[start:].
func finishLength(dst []byte, start int, lossy bool) ([]byte, error) {
	n := len(dst) - start - 4
	if uint64(n) > math.MaxUint32 {
		if !lossy {
			return dst, fmt.Errorf("amqptab: table or array of %d bytes exceeds the u32 length: %w", n, ErrFieldType)
		}
		dst, n = dst[:start+4], 0 // an empty table rather than a corrupt frame
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	return dst, nil
}

// appendValue appends tag and value; depth is that of the containing
// table or array.
func appendValue(dst []byte, v any, depth int, lossy bool) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, 'V'), nil
	case bool:
		if v {
			return append(dst, 't', 1), nil
		}
		return append(dst, 't', 0), nil
	case int8:
		return append(dst, 'b', byte(v)), nil
	case uint8:
		return append(dst, 'B', v), nil
	case int16:
		return binary.BigEndian.AppendUint16(append(dst, 's'), uint16(v)), nil
	case uint16:
		return binary.BigEndian.AppendUint16(append(dst, 'u'), v), nil
	case int32:
		return binary.BigEndian.AppendUint32(append(dst, 'I'), uint32(v)), nil
	case uint32:
		return binary.BigEndian.AppendUint32(append(dst, 'i'), v), nil
	case int64:
		return binary.BigEndian.AppendUint64(append(dst, 'l'), uint64(v)), nil
	case int:
		return binary.BigEndian.AppendUint64(append(dst, 'l'), uint64(int64(v))), nil
	case uint64:
		if v <= math.MaxInt64 {
			return binary.BigEndian.AppendUint64(append(dst, 'l'), v), nil
		}
	case float32:
		return binary.BigEndian.AppendUint32(append(dst, 'f'), math.Float32bits(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, 'd'), math.Float64bits(v)), nil
	case Decimal:
		return binary.BigEndian.AppendUint32(append(dst, 'D', v.Scale), v.Value), nil
	case time.Time:
		// Seconds since the epoch as u64; a time before 1970 wraps, which
		// keeps decode → encode bit-exact.
		return binary.BigEndian.AppendUint64(append(dst, 'T'), uint64(v.Unix())), nil
	case string:
		if uint64(len(v)) <= math.MaxUint32 {
			return append(binary.BigEndian.AppendUint32(append(dst, 'S'), uint32(len(v))), v...), nil
		}
	case []byte:
		if uint64(len(v)) <= math.MaxUint32 {
			return append(binary.BigEndian.AppendUint32(append(dst, 'x'), uint32(len(v))), v...), nil
		}
	case []any:
		if depth < MaxDepth {
			return appendArray(append(dst, 'A'), v, depth+1, lossy)
		}
	case Table:
		if depth < MaxDepth {
			return appendTable(append(dst, 'F'), v, depth+1, lossy)
		}
	case map[string]any:
		if depth < MaxDepth {
			return appendTable(append(dst, 'F'), v, depth+1, lossy)
		}
	}
	if lossy {
		return append(dst, 'V'), nil
	}
	return dst, unencodable(v, depth)
}

// unencodable explains why appendValue refused v.
func unencodable(v any, depth int) error {
	switch v := v.(type) {
	case uint64:
		return fmt.Errorf("amqptab: uint64 %d exceeds math.MaxInt64: %w", v, ErrFieldType)
	case string, []byte:
		return fmt.Errorf("amqptab: %T longer than math.MaxUint32 bytes: %w", v, ErrFieldType)
	case []any, Table, map[string]any:
		return fmt.Errorf("amqptab: %T at depth %d nests deeper than %d: %w", v, depth+1, MaxDepth, ErrFieldType)
	}
	return fmt.Errorf("amqptab: value of type %T has no field-table tag: %w", v, ErrFieldType)
}

// Building by hand: where a table is written field by field rather than
// from a Table (the queues rewrite x-death without decoding the rest of
// the headers), Begin reserves the u32 length of a table or array,
// entries or elements follow, and End fills in the length:
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

// AppendKey appends a table entry's key, cut by ClampShortstr.
func AppendKey(dst []byte, key string) []byte {
	key = ClampShortstr(key)
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
