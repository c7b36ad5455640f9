package amqptab

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
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
// An empty table or array decodes to nil. When a key repeats, the first
// value wins, as RabbitMQ's table lookups find the first.
//
// AppendTable writes the same types (L is written as l), plus int
// (as l), uint64 (as l when it is at most math.MaxInt64) and
// map[string]any (as F).
type Table map[string]any

// Decimal is a field-table decimal ('D'): Value × 10^-Scale. RabbitMQ
// reads Value unsigned.
//
// The queues catalog persists Decimal with gob under a registered name,
// so renaming the type or its fields changes what old catalogs decode
// to; see queues/table.go.
type Decimal struct {
	Scale uint8  // number of decimal digits
	Value uint32 // unscaled value
}

// MaxDepth bounds the nesting of tables and arrays (a top-level table is
// depth 1). Deeper data is malformed when read and unencodable when
// written.
const MaxDepth = 64

// ValueSize returns the encoded size of a value of tag at the start of
// b, -1 when b is too short, -2 for an unknown tag. For S, x, A and F
// the size includes the u32 length.
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

func valueErr(where string, tag byte, size int) error {
	if size == -2 {
		return fmt.Errorf("amqptab: %s: unknown field tag %q: %w", where, tag, ErrMalformed)
	}
	return fmt.Errorf("amqptab: %s: truncated value of tag %q: %w", where, tag, ErrMalformed)
}

// nextEntry parses the table entry at body[off:]: key, tag and the raw
// value (including the length prefix of S, x, A and F values).
func nextEntry(body []byte, off int) (key []byte, tag byte, value []byte, next int, err error) {
	klen := int(body[off])
	off++
	if len(body)-off < klen+1 {
		return nil, 0, nil, 0, fmt.Errorf("amqptab: table entry at offset %d: truncated key or tag: %w", off-1, ErrMalformed)
	}
	key = body[off : off+klen]
	off += klen
	tag = body[off]
	off++
	n := ValueSize(tag, body[off:])
	if n < 0 {
		return nil, 0, nil, 0, valueErr(fmt.Sprintf("table key %q", key), tag, n)
	}
	return key, tag, body[off : off+n], off + n, nil
}

// nextElem parses the array element at body[off:].
func nextElem(body []byte, off int) (tag byte, value []byte, next int, err error) {
	tag = body[off]
	off++
	n := ValueSize(tag, body[off:])
	if n < 0 {
		return 0, nil, 0, valueErr(fmt.Sprintf("array element at offset %d", off-1), tag, n)
	}
	return tag, body[off : off+n], off + n, nil
}

// lengthPrefixed returns the body of a u32-length-prefixed table or array
// at the start of b and the total size.
func lengthPrefixed(b []byte, what string) ([]byte, int, error) {
	if len(b) < 4 {
		return nil, 0, fmt.Errorf("amqptab: %s: truncated length: %w", what, ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, 0, fmt.Errorf("amqptab: %s: length %d exceeds the %d bytes left: %w", what, n, len(b)-4, ErrMalformed)
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
		return nil, fmt.Errorf("amqptab: %s: %d trailing bytes: %w", what, len(b)-n, ErrMalformed)
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
	if depth > MaxDepth {
		return nil, fmt.Errorf("amqptab: table nested deeper than %d: %w", MaxDepth, ErrMalformed)
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
	if depth > MaxDepth {
		return nil, fmt.Errorf("amqptab: array nested deeper than %d: %w", MaxDepth, ErrMalformed)
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

// readValue decodes a value whose size ValueSize has checked; depth is
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
	return nil, fmt.Errorf("amqptab: unknown field tag %q: %w", tag, ErrMalformed)
}

// DecodeValue decodes one value as ScanTable or ScanArray report it: the
// tag and its raw bytes, which must be exactly one value.
func DecodeValue(tag byte, value []byte) (any, error) {
	n := ValueSize(tag, value)
	if n < 0 {
		return nil, valueErr("decode value", tag, n)
	}
	if n != len(value) {
		return nil, fmt.Errorf("amqptab: decode value of tag %q: %d trailing bytes: %w", tag, len(value)-n, ErrMalformed)
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

// CheckTable validates the u32-length-prefixed table at the start of b
// through every nesting level, as ReadTable would decode it, and returns
// the number of bytes it occupies. It allocates nothing unless it fails:
// it is the deep check of a message's headers on the publish path.
func CheckTable(b []byte) (int, error) {
	body, n, err := lengthPrefixed(b, "table")
	if err != nil {
		return 0, err
	}
	return n, checkEntries(body, 1)
}

func checkEntries(body []byte, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("amqptab: table nested deeper than %d: %w", MaxDepth, ErrMalformed)
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
	if depth > MaxDepth {
		return fmt.Errorf("amqptab: array nested deeper than %d: %w", MaxDepth, ErrMalformed)
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

// LongStr returns the string of an 'S' value as ScanTable reports it.
func LongStr(tag byte, value []byte) (string, bool) {
	if tag != 'S' || len(value) < 4 {
		return "", false
	}
	return string(value[4:]), true
}

// Int returns an integer value of any integer tag (and of 'T', seconds).
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
