package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"github.com/warren-mq/warren/internal/amqptab"
	"maps"
	"math"
	"slices"
	"time"
)

// Table is an AMQP field table, as in method arguments, the headers
// property and connection properties. Decoded values have these Go types
// (by tag):
//
//	t bool        b int8     B uint8    s int16    u uint16
//	I int32       i uint32   l int64    L int64    f float32
//	d float64     D Decimal  S string   x []byte   A []any
//	F Table       T time.Time (UTC, whole seconds)  V nil
//
// The tags are RabbitMQ's (the 0-9-1 errata), not the 0-9-1 grammar's:
// 's' is a signed 16-bit integer, not a shortstr. An empty table or
// array decodes to nil. When a key repeats, the first value wins, as
// RabbitMQ's table lookups find the first.
//
// AppendTable writes the same types (L is written as l), plus int
// (as l), uint64 (as l when it is at most math.MaxInt64) and
// map[string]any (as F).
type Table map[string]any

// Decimal is a field-table decimal ('D'): Value × 10^-Scale. RabbitMQ
// reads Value unsigned.
type Decimal struct {
	Scale uint8  // number of decimal digits
	Value uint32 // unscaled value
}

// MaxTableDepth bounds the nesting of tables and arrays (a top-level table
// is depth 1). Deeper data is malformed when read and unencodable when
// written.
const MaxTableDepth = 64

// valueSize returns the encoded size of the value of a tag at the start
// of b, or -1 if b is too short, or -2 for an unknown tag.
func valueSize(tag byte, b []byte) int { return amqptab.ValueSize(tag, b) }

func valueErr(where string, tag byte, size int) error {
	if size == -2 {
		return fmt.Errorf("amqp/wire: %s: unknown field tag %q: %w", where, tag, ErrMalformed)
	}
	return fmt.Errorf("amqp/wire: %s: truncated value of tag %q: %w", where, tag, ErrMalformed)
}

// nextEntry parses the table entry at body[off:]: key, tag and the raw
// value (including the length prefix of S, x, A and F values).
func nextEntry(body []byte, off int) (key []byte, tag byte, value []byte, next int, err error) {
	klen := int(body[off])
	off++
	if len(body)-off < klen+1 {
		return nil, 0, nil, 0, fmt.Errorf("amqp/wire: table entry at offset %d: truncated key or tag: %w", off-1, ErrMalformed)
	}
	key = body[off : off+klen]
	off += klen
	tag = body[off]
	off++
	n := valueSize(tag, body[off:])
	if n < 0 {
		return nil, 0, nil, 0, valueErr(fmt.Sprintf("table key %q", key), tag, n)
	}
	return key, tag, body[off : off+n], off + n, nil
}

// nextElem parses the array element at body[off:].
func nextElem(body []byte, off int) (tag byte, value []byte, next int, err error) {
	tag = body[off]
	off++
	n := valueSize(tag, body[off:])
	if n < 0 {
		return 0, nil, 0, valueErr(fmt.Sprintf("array element at offset %d", off-1), tag, n)
	}
	return tag, body[off : off+n], off + n, nil
}

// lengthPrefixed returns the body of a u32-length-prefixed table or array
// at the start of b and the total size.
func lengthPrefixed(b []byte, what string) ([]byte, int, error) {
	if len(b) < 4 {
		return nil, 0, fmt.Errorf("amqp/wire: %s: truncated length: %w", what, ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, 0, fmt.Errorf("amqp/wire: %s: length %d exceeds the %d bytes left: %w", what, n, len(b)-4, ErrMalformed)
	}
	return b[4 : 4+n], 4 + int(n), nil
}

// exact checks that a length-prefixed value fills b.
func exact(b []byte, what string) ([]byte, error) {
	body, n, err := lengthPrefixed(b, what)
	if err != nil {
		return nil, err
	}
	if n != len(b) {
		return nil, fmt.Errorf("amqp/wire: %s: %d trailing bytes: %w", what, len(b)-n, ErrMalformed)
	}
	return body, nil
}

// ReadTable decodes the u32-length-prefixed table at the start of b and
// returns it with the number of bytes it occupies. Strings, byte slices
// and keys are copied; nothing aliases b.
func ReadTable(b []byte) (Table, int, error) {
	body, n, err := lengthPrefixed(b, "table")
	if err != nil {
		return nil, 0, err
	}
	t, err := readEntries(body, 1)
	return t, n, err
}

func readEntries(body []byte, depth int) (Table, error) {
	if depth > MaxTableDepth {
		return nil, fmt.Errorf("amqp/wire: table nested deeper than %d: %w", MaxTableDepth, ErrMalformed)
	}
	var t Table
	for off := 0; off < len(body); {
		key, tag, value, next, err := nextEntry(body, off)
		if err != nil {
			return nil, err
		}
		off = next
		v, err := readValue(tag, value, depth)
		if err != nil {
			return nil, err
		}
		if t == nil {
			t = make(Table)
		}
		if _, dup := t[string(key)]; !dup {
			t[string(key)] = v
		}
	}
	return t, nil
}

func readElems(body []byte, depth int) ([]any, error) {
	if depth > MaxTableDepth {
		return nil, fmt.Errorf("amqp/wire: array nested deeper than %d: %w", MaxTableDepth, ErrMalformed)
	}
	var a []any
	for off := 0; off < len(body); {
		tag, value, next, err := nextElem(body, off)
		if err != nil {
			return nil, err
		}
		off = next
		v, err := readValue(tag, value, depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
	return a, nil
}

// readValue decodes a value whose size valueSize has checked; depth is
// that of the table or array holding it.
func readValue(tag byte, v []byte, depth int) (any, error) {
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
		return readElems(v[4:], depth+1)
	case 'F':
		return readEntries(v[4:], depth+1)
	}
	return nil, fmt.Errorf("amqp/wire: unknown field tag %q: %w", tag, ErrMalformed)
}

// DecodeValue decodes one value as ScanTable or ScanArray report it: the
// tag and its raw bytes, which must be exactly one value.
func DecodeValue(tag byte, value []byte) (any, error) {
	n := valueSize(tag, value)
	if n < 0 {
		return nil, valueErr("decode value", tag, n)
	}
	if n != len(value) {
		return nil, fmt.Errorf("amqp/wire: decode value of tag %q: %d trailing bytes: %w", tag, len(value)-n, ErrMalformed)
	}
	return readValue(tag, value, 1)
}

// ScanTable calls fn for each entry of the table b, which must hold
// exactly one u32-length-prefixed table, without allocating. value is
// the raw encoding after the tag: for S, x, A and F it includes the u32
// length (so an F value can go to ReadTable or ScanTable and an A value
// to ScanArray). The framing of every entry is checked, the content of
// nested tables and arrays is not. An error from fn stops the scan and is
// returned as is. The slices alias b.
func ScanTable(b []byte, fn func(key []byte, tag byte, value []byte) error) error {
	body, err := exact(b, "scan table")
	if err != nil {
		return err
	}
	for off := 0; off < len(body); {
		key, tag, value, next, err := nextEntry(body, off)
		if err != nil {
			return err
		}
		off = next
		if err := fn(key, tag, value); err != nil {
			return err
		}
	}
	return nil
}

// ScanArray is ScanTable for a u32-length-prefixed array (the value of an
// 'A' entry), e.g. to read the CC header's routing keys without
// allocating.
func ScanArray(b []byte, fn func(tag byte, value []byte) error) error {
	body, err := exact(b, "scan array")
	if err != nil {
		return err
	}
	for off := 0; off < len(body); {
		tag, value, next, err := nextElem(body, off)
		if err != nil {
			return err
		}
		off = next
		if err := fn(tag, value); err != nil {
			return err
		}
	}
	return nil
}

// TableSorted reports whether the keys of the table b (exactly one
// u32-length-prefixed table) are strictly ascending, bytewise: sorted and
// without duplicates, as AppendTable writes and RabbitMQ 4.x delivers
// headers. Malformed framing is an error.
func TableSorted(b []byte) (bool, error) {
	var prev []byte
	sorted, first := true, true
	err := ScanTable(b, func(key []byte, _ byte, _ []byte) error {
		if !first && bytes.Compare(prev, key) >= 0 {
			sorted = false
		}
		prev, first = key, false
		return nil
	})
	if err != nil {
		return false, err
	}
	return sorted, nil
}

// checkTable validates a u32-length-prefixed table body deeply (every
// nested table and array) without allocating unless it fails.
func checkEntries(body []byte, depth int) error {
	if depth > MaxTableDepth {
		return fmt.Errorf("amqp/wire: table nested deeper than %d: %w", MaxTableDepth, ErrMalformed)
	}
	for off := 0; off < len(body); {
		_, tag, value, next, err := nextEntry(body, off)
		if err != nil {
			return err
		}
		off = next
		if err := checkValue(tag, value, depth); err != nil {
			return err
		}
	}
	return nil
}

func checkElems(body []byte, depth int) error {
	if depth > MaxTableDepth {
		return fmt.Errorf("amqp/wire: array nested deeper than %d: %w", MaxTableDepth, ErrMalformed)
	}
	for off := 0; off < len(body); {
		tag, value, next, err := nextElem(body, off)
		if err != nil {
			return err
		}
		off = next
		if err := checkValue(tag, value, depth); err != nil {
			return err
		}
	}
	return nil
}

func checkValue(tag byte, value []byte, depth int) error {
	switch tag {
	case 'F':
		return checkEntries(value[4:], depth+1)
	case 'A':
		return checkElems(value[4:], depth+1)
	}
	return nil
}

// AppendTable appends t as a u32-length-prefixed table with its keys in
// ascending bytewise order. Values must have the Go types Table lists; a
// value of another type, a uint64 above math.MaxInt64, a key longer than
// 255 bytes or nesting deeper than MaxTableDepth gives an error wrapping
// ErrFieldType, and dst is returned unchanged. A nil or empty table is
// written as its 4-byte zero length.
func AppendTable(dst []byte, t Table) ([]byte, error) {
	out, err := appendTable(dst, t, 1, false)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// appendTable writes a table at depth. In lossy mode (method arguments,
// which cannot fail) it never returns an error: unencodable values are
// written as void and long keys are truncated.
func appendTable(dst []byte, t map[string]any, depth int, lossy bool) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	keys := slices.Sorted(maps.Keys(t))
	for _, k := range keys {
		if len(k) > MaxShortstr {
			if !lossy {
				return dst, fmt.Errorf("amqp/wire: table key %.20q...: %d bytes exceeds 255: %w", k, len(k), ErrFieldType)
			}
			k = clampShortstr(k)
		}
		dst = append(dst, byte(len(k)))
		dst = append(dst, k...)
		var err error
		if dst, err = appendValue(dst, t[k], depth, lossy); err != nil {
			return dst, fmt.Errorf("amqp/wire: table key %q: %w", k, err)
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
			return dst, fmt.Errorf("amqp/wire: array element %d: %w", i, err)
		}
	}
	return finishLength(dst, start, lossy)
}

// finishLength fills in the u32 length reserved at dst[start:].
func finishLength(dst []byte, start int, lossy bool) ([]byte, error) {
	n := len(dst) - start - 4
	if uint64(n) > math.MaxUint32 {
		if !lossy {
			return dst, fmt.Errorf("amqp/wire: table or array of %d bytes exceeds the u32 length: %w", n, ErrFieldType)
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
			return append(appendLongstrLen(append(dst, 'S'), len(v)), v...), nil
		}
	case []byte:
		if uint64(len(v)) <= math.MaxUint32 {
			return append(appendLongstrLen(append(dst, 'x'), len(v)), v...), nil
		}
	case []any:
		if depth < MaxTableDepth {
			return appendArray(append(dst, 'A'), v, depth+1, lossy)
		}
	case Table:
		if depth < MaxTableDepth {
			return appendTable(append(dst, 'F'), v, depth+1, lossy)
		}
	case map[string]any:
		if depth < MaxTableDepth {
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
		return fmt.Errorf("amqp/wire: uint64 %d exceeds math.MaxInt64: %w", v, ErrFieldType)
	case string, []byte:
		return fmt.Errorf("amqp/wire: %T longer than math.MaxUint32 bytes: %w", v, ErrFieldType)
	case []any, Table, map[string]any:
		return fmt.Errorf("amqp/wire: %T at depth %d nests deeper than %d: %w", v, depth+1, MaxTableDepth, ErrFieldType)
	}
	return fmt.Errorf("amqp/wire: value of type %T has no field-table tag: %w", v, ErrFieldType)
}

func appendLongstrLen(dst []byte, n int) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}
