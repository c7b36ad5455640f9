package segment

import (
	"bytes"
	"fmt"
	"testing"
)

// bloomOf returns the Bloom bytes of size bytes holding values; a nil value
// is an unfiltered entry.
func bloomOf(size int, values ...[]byte) []byte {
	var b Bloom
	b.Reset(size)
	for _, v := range values {
		b.Add(v)
	}
	return bytes.Clone(b.Bytes())
}

func vals(s ...string) [][]byte {
	var out [][]byte
	for _, v := range s {
		out = append(out, []byte(v))
	}
	return out
}

// bitSet reports whether bit i (MSB first) of bloom is set.
func bitSet(bloom []byte, i uint32) bool { return bloom[i>>3]&(0x80>>(i&7)) != 0 }

// Ensure the Bloom bytes for fixed values never change: the hash and bit
// order are part of the on-disk format. The positions were checked with an
// independent XXH64: xxhash64("warren") gives bits 47 and 10 of 128.
func TestBloomGolden(t *testing.T) {
	tests := []struct {
		name   string
		values [][]byte
		want   []byte
	}{
		{"warren", vals("warren"), []byte{
			0x00, 0x20, // bit 10
			0x00, 0x00, 0x00, 0x01, // bit 47
			0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		}},
		{"unfiltered", [][]byte{nil}, []byte{
			0x80, // bit 0: an entry without a filter value
			0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		}},
		{"warren and unfiltered", [][]byte{[]byte("warren"), {}}, []byte{
			0x80, 0x20, // bits 0 and 10
			0x00, 0x00, 0x00, 0x01, // bit 47
			0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bloomOf(16, tt.values...); !bytes.Equal(got, tt.want) {
				t.Fatalf("Bloom:\n got % x\nwant % x", got, tt.want)
			}
		})
	}
	if h1, h2 := bloomPositions([]byte("warren"), 255*8); h1 != 1932 || h2 != 1461 {
		t.Fatalf("positions of warren in 2040 bits = %d, %d; want 1932, 1461", h1, h2)
	}
}

// Ensure both positions of any value lie in 1..bits-1 for every filter size,
// so that bit 0 stays reserved for unfiltered entries.
func TestBloomPositionsInRange(t *testing.T) {
	for size := MinBloomSize; size <= MaxBloomSize; size++ {
		nbits := uint32(size * 8)
		for i := range 200 {
			h1, h2 := bloomPositions(fmt.Appendf(nil, "value-%d", i), int(nbits))
			if h1 < 1 || h1 >= nbits || h2 < 1 || h2 >= nbits {
				t.Fatalf("size %d, value %d: positions %d, %d outside 1..%d", size, i, h1, h2, nbits-1)
			}
		}
	}
}

// Ensure Reset clears all bits, also beyond a smaller new size.
func TestBloomReset(t *testing.T) {
	var b Bloom
	b.Reset(MaxBloomSize)
	for i := range 100 {
		b.Add(fmt.Appendf(nil, "v%d", i))
	}
	b.Reset(MinBloomSize)
	b.Reset(MaxBloomSize)
	if got := b.Bytes(); !bytes.Equal(got, make([]byte, MaxBloomSize)) {
		t.Fatalf("after Reset: % x", got)
	}
}

// Ensure Matcher follows the reference semantics (osiris_bloom): see the
// cases.
func TestMatcher(t *testing.T) {
	const added, absent = "orders-eu", "orders-us"
	b16 := bloomOf(16, []byte(added))
	// The test depends on absent not being a false positive at this size.
	if h1, h2 := bloomPositions([]byte(absent), 128); bitSet(b16, h1) && bitSet(b16, h2) {
		t.Fatalf("test setup: %q is a false positive in % x", absent, b16)
	}
	withUnfiltered := bloomOf(16, []byte(added), nil)
	tests := []struct {
		name            string
		values          [][]byte
		matchUnfiltered bool
		bloom           []byte
		want            bool
	}{
		{"no values, no Bloom", nil, false, nil, true},
		{"no values, Bloom", nil, false, b16, true},
		{"no values, match unfiltered", nil, true, b16, true},
		{"no Bloom bytes", vals(added), false, nil, false},
		{"no Bloom bytes, match unfiltered", vals(added), true, nil, true},
		{"value present", vals(added), false, b16, true},
		{"value absent", vals(absent), false, b16, false},
		{"one of several present", vals(absent, "x", added), false, b16, true},
		{"absent, bit 0 clear, match unfiltered", vals(absent), true, b16, false},
		{"absent, bit 0 set", vals(absent), false, withUnfiltered, false},
		{"absent, bit 0 set, match unfiltered", vals(absent), true, withUnfiltered, true},
		{"present, bit 0 set", vals(added), false, withUnfiltered, true},
		{"only one of the two bits", vals(absent), false, oneBitOf(absent, 16), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMatcher(tt.values, tt.matchUnfiltered)
			if got := m.Active(); got != (len(tt.values) > 0) {
				t.Errorf("Active = %v with %d values", got, len(tt.values))
			}
			if got := m.Match(tt.bloom); got != tt.want {
				t.Fatalf("Match(% x) = %v, want %v", tt.bloom, got, tt.want)
			}
		})
	}
	var zero *Matcher
	if zero.Active() || !zero.Match(b16) || !zero.Match(nil) {
		t.Errorf("nil Matcher: Active %v, Match %v, %v; want false, true, true", zero.Active(), zero.Match(b16), zero.Match(nil))
	}
}

// oneBitOf returns a Bloom of size bytes with only the first of v's bits set.
func oneBitOf(v string, size int) []byte {
	b := make([]byte, size)
	h1, h2 := bloomPositions([]byte(v), size*8)
	if h1 == h2 {
		panic("test setup: both positions equal")
	}
	b[h1>>3] |= 0x80 >> (h1 & 7)
	return b
}

// Ensure one Matcher handles chunks of different filter sizes in any order:
// a stream's filter size can change between chunks, and the matcher caches
// bit positions per size.
func TestMatcherSizeChange(t *testing.T) {
	m := NewMatcher(vals("alpha"), false)
	sizes := []int{16, 255, 255, 16, 64, 16, 255}
	for i, size := range sizes {
		with := bloomOf(size, []byte("alpha"))
		without := bloomOf(size, []byte("beta"))
		if h1, h2 := bloomPositions([]byte("alpha"), size*8); bitSet(without, h1) && bitSet(without, h2) {
			t.Fatalf("test setup: alpha is a false positive at size %d", size)
		}
		if !m.Match(with) {
			t.Fatalf("step %d, size %d: no match for a Bloom holding the value", i, size)
		}
		if m.Match(without) {
			t.Fatalf("step %d, size %d: match for a Bloom without the value", i, size)
		}
	}
}

// Ensure NewMatcher copies the values it is given.
func TestMatcherCopiesValues(t *testing.T) {
	v := []byte("alpha")
	m := NewMatcher([][]byte{v}, false)
	copy(v, "gamma")
	if !m.Match(bloomOf(16, []byte("alpha"))) {
		t.Fatal("matcher changed with the caller's slice")
	}
}
