package amqp10

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// Decoding reads from a slice with a bounds-checked, sticky-error
// decoder. Untrusted input (a stream record from disk or from a client)
// cannot make it allocate much more than the input's size: every list,
// map or array count is checked against the bytes that must hold its
// items, and slices grow as items are decoded rather than by the count
// announced, so nested compounds cannot multiply a claim. Arrays of
// zero-width elements (null, true, false, uint0, ulong0, list0) have no
// bytes to check a count against; a fixed budget per decode bounds them.

// MaxZeroWidthItems bounds the elements of zero-width arrays one decode
// accepts.
const MaxZeroWidthItems = 1 << 16

// preallocItems caps the capacity allocated for a compound's announced
// count before its items are read.
const preallocItems = 32

// Decode decodes the first value of b and returns it with the number of
// bytes it took. binary values alias b; strings and symbols are copies.
func Decode(b []byte) (v any, n int, err error) {
	var budget int
	d := newDecoder(b, &budget)
	v = d.value(1)
	if d.err != nil {
		return nil, 0, d.err
	}
	return v, d.off, nil
}

// DecodeBudget is Decode with a budget of zero-width array elements that
// the caller keeps: the elements decoded are taken from *budget, and a
// value with more than are left is malformed. Successive calls sharing a
// budget bound the elements of all their values together, where Decode
// gives each call MaxZeroWidthItems.
func DecodeBudget(b []byte, budget *int) (v any, n int, err error) {
	d := decoder{b: b, budget: budget}
	v = d.value(1)
	if d.err != nil {
		return nil, 0, d.err
	}
	return v, d.off, nil
}

// decoder reads values from b. After an error every read returns zero
// values and err stays the first error.
type decoder struct {
	b      []byte
	off    int
	base   int  // position of b in the outermost input, for errors
	budget *int // zero-width array elements left, shared with sub-decoders
	err    error
}

// newDecoder returns a decoder over b whose zero-width element budget
// is *budget, which it sets.
func newDecoder(b []byte, budget *int) decoder {
	*budget = MaxZeroWidthItems
	return decoder{b: b, budget: budget}
}

// sub returns a decoder over the next n bytes, which d skips.
func (d *decoder) sub(n int) decoder {
	start := d.off
	region := d.take(n)
	return decoder{b: region, base: d.base + start, budget: d.budget, err: d.err}
}

func (d *decoder) failf(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("amqp10: at byte %d: %s: %w", d.base+d.off, fmt.Sprintf(format, args...), ErrMalformed)
	}
}

// take returns the next n bytes, or nil after an error or when fewer
// are left.
func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.failf("%d bytes needed, %d left", n, len(d.b)-d.off)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) left() int { return len(d.b) - d.off }

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if p := d.take(2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// charge takes n zero-width elements from the budget.
func (d *decoder) charge(n int) bool {
	if d.err != nil {
		return false
	}
	if n > *d.budget {
		d.failf("%d zero-width array elements exceed the %d left of the budget", n, *d.budget)
		return false
	}
	*d.budget -= n
	return true
}

// value reads a constructor and its value.
func (d *decoder) value(depth int) any {
	return d.valueOf(d.u8(), depth)
}

// valueOf reads the value of constructor code (which was read already,
// or is an array's shared constructor).
func (d *decoder) valueOf(code byte, depth int) any {
	if d.err != nil {
		return nil
	}
	if depth > MaxDepth {
		d.failf("nesting deeper than %d", MaxDepth)
		return nil
	}
	switch code {
	case codeDescribed:
		desc := d.value(depth + 1)
		switch desc.(type) {
		case Described, []any, Map, Array:
			d.failf("descriptor of type %T", desc)
			return nil
		}
		v := d.value(depth + 1)
		if d.err != nil {
			return nil
		}
		return Described{Descriptor: desc, Value: v}
	case codeNull:
		return nil
	case codeTrue:
		return true
	case codeFalse:
		return false
	case codeUint0:
		return uint32(0)
	case codeUlong0:
		return uint64(0)
	case codeList0:
		return []any{}
	case codeUbyte:
		return d.u8()
	case codeByte:
		return int8(d.u8())
	case codeSmallUint:
		return uint32(d.u8())
	case codeSmallUlong:
		return uint64(d.u8())
	case codeSmallInt:
		return int32(int8(d.u8()))
	case codeSmallLong:
		return int64(int8(d.u8()))
	case codeBool:
		switch d.u8() {
		case 0:
			return false
		case 1:
			return true
		}
		d.failf("boolean byte is neither 0 nor 1")
		return nil
	case codeUshort:
		return d.u16()
	case codeShort:
		return int16(d.u16())
	case codeUint:
		return d.u32()
	case codeInt:
		return int32(d.u32())
	case codeFloat:
		return math.Float32frombits(d.u32())
	case codeChar:
		return Char(d.u32())
	case codeDecimal32:
		var v Decimal32
		copy(v[:], d.take(4))
		return v
	case codeUlong:
		return d.u64()
	case codeLong:
		return int64(d.u64())
	case codeDouble:
		return math.Float64frombits(d.u64())
	case codeTimestamp:
		return Timestamp(d.u64())
	case codeDecimal64:
		var v Decimal64
		copy(v[:], d.take(8))
		return v
	case codeDecimal128:
		var v Decimal128
		copy(v[:], d.take(16))
		return v
	case codeUUID:
		var v UUID
		copy(v[:], d.take(16))
		return v
	case codeVbin8:
		return d.take(int(d.u8()))
	case codeVbin32:
		return d.take(d.size32())
	case codeStr8, codeStr32:
		var n int
		if code == codeStr8 {
			n = int(d.u8())
		} else {
			n = d.size32()
		}
		p := d.take(n)
		if d.err == nil && !utf8.Valid(p) {
			d.failf("string is not UTF-8")
		}
		return string(p)
	case codeSym8:
		return Symbol(d.take(int(d.u8())))
	case codeSym32:
		return Symbol(d.take(d.size32()))
	case codeList8, codeMap8, codeArray8:
		return d.compound(code, int(d.u8()), 1, depth)
	case codeList32, codeMap32, codeArray32:
		return d.compound(code, d.size32(), 4, depth)
	}
	d.failf("unknown constructor 0x%02x", code)
	return nil
}

// size32 reads a u32 size, bounded by the bytes left.
func (d *decoder) size32() int {
	n := d.u32()
	if d.err == nil && uint64(n) > uint64(d.left()) {
		d.failf("size %d, %d bytes left", n, d.left())
	}
	return int(n)
}

// compound reads a list, map or array of size bytes whose count takes
// width bytes.
func (d *decoder) compound(code byte, size, width, depth int) any {
	s := d.sub(size)
	var count int
	if width == 1 {
		count = int(s.u8())
	} else {
		count = int(s.u32())
	}
	if d.err == nil && s.err != nil {
		d.err = s.err
	}
	var v any
	switch code {
	case codeList8, codeList32:
		v = s.list(count, depth)
	case codeMap8, codeMap32:
		v = s.mapOf(count, depth)
	default:
		v = s.array(count, depth)
	}
	if s.err == nil && s.left() != 0 {
		s.failf("%d bytes after the last of %d items", s.left(), count)
	}
	if s.err != nil {
		if d.err == nil {
			d.err = s.err
		}
		return nil
	}
	return v
}

func (d *decoder) list(count, depth int) []any {
	if count > d.left() {
		d.failf("list of %d items in %d bytes", count, d.left())
		return nil
	}
	out := make([]any, 0, min(count, preallocItems))
	for range count {
		out = append(out, d.value(depth+1))
		if d.err != nil {
			return nil
		}
	}
	return out
}

func (d *decoder) mapOf(count, depth int) Map {
	if count%2 != 0 {
		d.failf("map of an odd number (%d) of items", count)
		return nil
	}
	if count > d.left() {
		d.failf("map of %d items in %d bytes", count, d.left())
		return nil
	}
	out := make(Map, 0, min(count/2, preallocItems))
	for range count / 2 {
		k := d.value(depth + 1)
		v := d.value(depth + 1)
		if d.err != nil {
			return nil
		}
		out = append(out, MapEntry{Key: k, Value: v})
	}
	return out
}

func (d *decoder) array(count, depth int) Array {
	code := d.u8()
	var desc any
	described := code == codeDescribed
	if described {
		desc = d.value(depth + 1)
		switch desc.(type) {
		case Described, []any, Map, Array:
			d.failf("array descriptor of type %T", desc)
			return nil
		}
		code = d.u8()
		if code == codeDescribed {
			d.failf("array of doubly described values")
			return nil
		}
	}
	if d.err != nil {
		return nil
	}
	// Zero-width elements (null, true, false, uint0, ulong0, list0) take
	// no bytes, so only the budget bounds their count.
	zeroWidth := code >= codeNull && code <= codeList0
	if !zeroWidth && count > d.left() {
		d.failf("array of %d items in %d bytes", count, d.left())
		return nil
	}
	if zeroWidth && !d.charge(count) {
		return nil
	}
	out := make(Array, 0, min(count, preallocItems))
	for range count {
		v := d.valueOf(code, depth+1)
		if d.err != nil {
			return nil
		}
		if described {
			v = Described{Descriptor: desc, Value: v}
		}
		out = append(out, v)
	}
	return out
}

// skip passes over one value without decoding it: its constructor and
// size are checked, what a compound holds is not.
func (d *decoder) skip(depth int) {
	code := d.u8()
	if d.err != nil {
		return
	}
	if depth > MaxDepth {
		d.failf("nesting deeper than %d", MaxDepth)
		return
	}
	switch code {
	case codeDescribed:
		d.skip(depth + 1)
		d.skip(depth + 1)
	case codeNull, codeTrue, codeFalse, codeUint0, codeUlong0, codeList0:
	case codeUbyte, codeByte, codeSmallUint, codeSmallUlong, codeSmallInt, codeSmallLong, codeBool:
		d.take(1)
	case codeUshort, codeShort:
		d.take(2)
	case codeUint, codeInt, codeFloat, codeChar, codeDecimal32:
		d.take(4)
	case codeUlong, codeLong, codeDouble, codeTimestamp, codeDecimal64:
		d.take(8)
	case codeDecimal128, codeUUID:
		d.take(16)
	case codeVbin8, codeStr8, codeSym8, codeList8, codeMap8, codeArray8:
		d.take(int(d.u8()))
	case codeVbin32, codeStr32, codeSym32, codeList32, codeMap32, codeArray32:
		d.take(d.size32())
	default:
		d.failf("unknown constructor 0x%02x", code)
	}
}

// Items calls fn with the encoding of each item of the encoded list or
// map v, in order (a map's keys and values alternate), until fn returns
// false; null, like an empty v (an absent section), is an empty list.
// It decodes nothing: an item is checked only as far as its constructor
// and size.
func Items(v []byte, fn func(item []byte) bool) error {
	if len(v) == 0 {
		return nil
	}
	d := decoder{b: v} // skipping charges no budget
	var count int
	switch code := d.u8(); code {
	case codeNull, codeList0:
		return d.err
	case codeList8, codeMap8:
		s := d.sub(int(d.u8()))
		d = s
		count = int(d.u8())
	case codeList32, codeMap32:
		s := d.sub(d.size32())
		d = s
		count = int(d.u32())
	default:
		if d.err == nil {
			d.failf("constructor 0x%02x is not a list or map", code)
		}
		return d.err
	}
	if d.err == nil && count > d.left() {
		d.failf("%d items in %d bytes", count, d.left())
	}
	for i := 0; i < count && d.err == nil; i++ {
		start := d.off
		d.skip(2)
		if d.err == nil && !fn(d.b[start:d.off]) {
			break
		}
	}
	return d.err
}

// StringBytes returns the UTF-8 bytes of an encoded string (str8 or
// str32), aliasing item; false for any other value. It does not check
// that they are UTF-8.
func StringBytes(item []byte) ([]byte, bool) {
	if len(item) == 0 || (item[0] != codeStr8 && item[0] != codeStr32) {
		return nil, false
	}
	return BytesOf(item)
}

// BytesOf returns the bytes of an encoded string, symbol, binary or
// uuid, aliasing item; false for any other value.
func BytesOf(item []byte) ([]byte, bool) {
	if len(item) == 0 {
		return nil, false
	}
	d := decoder{b: item}
	var p []byte
	switch d.u8() {
	case codeStr8, codeSym8, codeVbin8:
		p = d.take(int(d.u8()))
	case codeStr32, codeSym32, codeVbin32:
		p = d.take(d.size32())
	case codeUUID:
		p = d.take(16)
	default:
		return nil, false
	}
	return p, d.err == nil
}

// sectionDescriptor reads a section's descriptor (after the described
// constructor) without decoding it as a value: its code, false when it
// is not a section's.
func (d *decoder) sectionDescriptor() (uint64, bool) {
	var c uint64
	switch d.u8() {
	case codeSmallUlong:
		c = uint64(d.u8())
	case codeUlong:
		c = d.u64()
	case codeSym8:
		c, ok := sectionSymbols[string(d.take(int(d.u8())))]
		return c, ok && d.err == nil
	case codeSym32:
		c, ok := sectionSymbols[string(d.take(d.size32()))]
		return c, ok && d.err == nil
	default:
		return 0, false
	}
	return c, d.err == nil && c >= DescHeader && c <= DescFooter
}
