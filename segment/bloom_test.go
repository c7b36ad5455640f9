package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/spaolacci/murmur3"
)

// bloomOf returns the Bloom bytes (FilterV2) of size bytes holding values;
// a nil value is an unfiltered entry.
func bloomOf(size int, values ...[]byte) []byte {
	var b Bloom
	b.Reset(size)
	for _, v := range values {
		b.Add(v)
	}
	return bytes.Clone(b.Bytes())
}

// v1BloomOf returns a FilterV1 filter of size bytes holding values, as the
// code before the filter change wrote it, through the kept v1Positions; a
// nil value is an unfiltered entry.
func v1BloomOf(size int, values ...[]byte) []byte {
	b := make([]byte, size)
	for _, v := range values {
		if len(v) == 0 {
			b[0] |= 0x80
			continue
		}
		h1, h2 := v1Positions(v, size*8)
		b[h1>>3] |= 0x80 >> (h1 & 7)
		b[h2>>3] |= 0x80 >> (h2 & 7)
	}
	return b
}

// filterOf returns a filter of format and size holding values.
func filterOf(format FilterFormat, size int, values ...[]byte) []byte {
	if format == FilterV1 {
		return v1BloomOf(size, values...)
	}
	return bloomOf(size, values...)
}

func vals(s ...string) [][]byte {
	var out [][]byte
	for _, v := range s {
		out = append(out, []byte(v))
	}
	return out
}

// v2Positions computes the bit positions of value in a FilterV2 filter of
// nbits bits without the bloom package, as the package doc describes them:
// murmur3 (x64, 128 bits, seed 0) of the value gives h0, h1 and of the
// value followed by a 0x01 byte h2, h3; position i is
// h[i%2] + i*h[2+((i+i%2)%4)/2] modulo nbits.
func v2Positions(value []byte, nbits uint64) []uint64 {
	var h [4]uint64
	h[0], h[1] = murmur3.Sum128(value)
	h[2], h[3] = murmur3.Sum128(append(bytes.Clone(value), 1))
	var out []uint64
	for i := uint64(0); i < FilterHashes; i++ {
		out = append(out, (h[i%2]+i*h[2+((i+i%2)%4)/2])%nbits)
	}
	return out
}

// v2Has reports whether bit i (least significant first) of bloom is set.
func v2Has(bloom []byte, i uint64) bool { return bloom[i>>3]&(1<<(i&7)) != 0 }

// v2Holds reports, without the Matcher, whether a FilterV2 filter has all
// bits of value.
func v2Holds(bloom []byte, value []byte) bool {
	for _, p := range v2Positions(value, uint64(len(bloom))*8) {
		if !v2Has(bloom, p) {
			return false
		}
	}
	return true
}

// v1Holds reports, without the Matcher, whether a FilterV1 filter has both
// bits of value.
func v1Holds(bloom []byte, value []byte) bool {
	h1, h2 := v1Positions(value, len(bloom)*8)
	return bloom[h1>>3]&(0x80>>(h1&7)) != 0 && bloom[h2>>3]&(0x80>>(h2&7)) != 0
}

// holds reports, without the Matcher, whether a filter of format has all
// bits of value.
func holds(format FilterFormat, bloom, value []byte) bool {
	if format == FilterV1 {
		return v1Holds(bloom, value)
	}
	return v2Holds(bloom, value)
}

// Ensure the FilterV2 bytes for fixed values never change: the hash, the
// number of hash functions and the bit order are part of the on-disk
// format (a new bits-and-blooms release that hashed otherwise would fail
// here). The positions agree with v2Positions, computed with another
// murmur3 implementation.
func TestBloomGolden(t *testing.T) {
	tests := []struct {
		name   string
		values [][]byte
		want   []byte
	}{
		{"warren", vals("warren"), []byte{
			0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, // bits 5, 63
			0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // bit 69
		}},
		{"unfiltered", [][]byte{nil}, []byte{
			0x21, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // bits 0, 5, 10: the empty value
			0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		}},
		{"warren and unfiltered", [][]byte{[]byte("warren"), {}}, []byte{
			0x21, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, // bits 0, 5 (both), 10, 63
			0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // bit 69
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bloomOf(16, tt.values...)
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("Bloom:\n got % x\nwant % x", got, tt.want)
			}
			want := make([]byte, 16)
			for _, v := range tt.values {
				for _, p := range v2Positions(v, 128) {
					want[p>>3] |= 1 << (p & 7)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Bloom differs from v2Positions:\n got % x\nwant % x", got, want)
			}
		})
	}
}

// Ensure the stored bytes are the bits-and-blooms filter's bits, for every
// filter size (sizes not a multiple of 8 end inside a 64-bit word).
func TestBloomIsLibraryFilter(t *testing.T) {
	for _, size := range []int{16, 17, 24, 100, 255} {
		values := filterValues("lib", 12)
		got := bloomOf(size, append(values, nil)...)
		lib := bloom.New(uint(size*8), FilterHashes)
		for _, v := range values {
			lib.Add(v)
		}
		lib.Add(nil)
		for i := uint(0); i < uint(size*8); i++ {
			if v2Has(got, uint64(i)) != lib.BitSet().Test(i) {
				t.Fatalf("size %d: bit %d is %v, the library's %v", size, i, v2Has(got, uint64(i)), lib.BitSet().Test(i))
			}
		}
		for _, v := range values {
			if !v2Holds(got, v) {
				t.Fatalf("size %d: %q not at the v2Positions", size, v)
			}
		}
	}
}

// Ensure the FilterV1 reader keeps the positions the code before the
// filter change wrote: checked with an independent XXH64, xxhash64("warren")
// gives bits 47 and 10 of 128.
func TestV1BloomGolden(t *testing.T) {
	want := []byte{
		0x80, 0x20, // bits 0 (an unfiltered entry) and 10
		0x00, 0x00, 0x00, 0x01, // bit 47
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	}
	if got := v1BloomOf(16, []byte("warren"), nil); !bytes.Equal(got, want) {
		t.Fatalf("v1 Bloom:\n got % x\nwant % x", got, want)
	}
	if h1, h2 := v1Positions([]byte("warren"), 255*8); h1 != 1932 || h2 != 1461 {
		t.Fatalf("positions of warren in 2040 bits = %d, %d; want 1932, 1461", h1, h2)
	}
	for size := MinBloomSize; size <= MaxBloomSize; size++ {
		nbits := uint32(size * 8)
		for i := range 50 {
			h1, h2 := v1Positions(fmt.Appendf(nil, "value-%d", i), int(nbits))
			if h1 < 1 || h1 >= nbits || h2 < 1 || h2 >= nbits {
				t.Fatalf("size %d, value %d: positions %d, %d outside 1..%d", size, i, h1, h2, nbits-1)
			}
		}
	}
}

// Ensure Reset clears all bits, also beyond a smaller new size, and Add
// of nil and of an empty value are the same.
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
	b.Reset(MinBloomSize)
	for i := range 100 {
		b.Add(fmt.Appendf(nil, "v%d", i))
	}
	b.Reset(MinBloomSize)
	if got := b.Bytes(); !bytes.Equal(got, make([]byte, MinBloomSize)) {
		t.Fatalf("after Reset at the same size: % x", got)
	}
	if !bytes.Equal(bloomOf(16, nil), bloomOf(16, []byte{})) {
		t.Fatal("nil and empty values give different filters")
	}
}

// Ensure runs of one value, repeats after other values and unfiltered
// entries anywhere give the filter of the set of values, and Bytes can be
// called twice.
func TestBloomRuns(t *testing.T) {
	var b Bloom
	b.Reset(16)
	for _, v := range [][]byte{[]byte("a"), []byte("a"), nil, []byte("b"), []byte("a"), {}, []byte("b"), []byte("b")} {
		b.Add(v)
	}
	got := bytes.Clone(b.Bytes())
	lib := bloom.New(128, FilterHashes)
	lib.Add([]byte("a")).Add([]byte("b")).Add(nil)
	if want := libBytes(lib, 16); !bytes.Equal(got, want) {
		t.Fatalf("Bloom:\n got % x\nwant % x", got, want)
	}
	if again := b.Bytes(); !bytes.Equal(again, got) {
		t.Fatalf("second Bytes:\n got % x\nwant % x", again, got)
	}
	b.Reset(16)
	b.Add([]byte("a"))
	lib = bloom.New(128, FilterHashes)
	lib.Add([]byte("a"))
	if got, want := b.Bytes(), libBytes(lib, 16); !bytes.Equal(got, want) {
		t.Fatalf("after Reset, unfiltered flag kept:\n got % x\nwant % x", got, want)
	}
}

// libBytes returns the stored form of a bits-and-blooms filter of size
// bytes.
func libBytes(f *bloom.BloomFilter, size int) []byte {
	var out []byte
	for _, w := range f.BitSet().Words() {
		out = binary.LittleEndian.AppendUint64(out, w)
	}
	return out[:size]
}

// Ensure Matcher follows the reference semantics (osiris_bloom) for both
// filter formats: see the cases.
func TestMatcher(t *testing.T) {
	const added, absent = "orders-eu", "orders-us"
	for _, format := range []FilterFormat{FilterV1, FilterV2} {
		t.Run(fmt.Sprintf("format=%d", format), func(t *testing.T) {
			b16 := filterOf(format, 16, []byte(added))
			// The test depends on absent not being a false positive.
			if holds(format, b16, []byte(absent)) {
				t.Fatalf("test setup: %q is a false positive in % x", absent, b16)
			}
			withUnfiltered := filterOf(format, 16, []byte(added), nil)
			if holds(format, withUnfiltered, []byte(absent)) {
				t.Fatalf("test setup: %q is a false positive in % x", absent, withUnfiltered)
			}
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
				{"absent, no unfiltered entry, match unfiltered", vals(absent), true, b16, false},
				{"absent, unfiltered entry", vals(absent), false, withUnfiltered, false},
				{"absent, unfiltered entry, match unfiltered", vals(absent), true, withUnfiltered, true},
				{"present, unfiltered entry", vals(added), false, withUnfiltered, true},
				{"all bits of the value but one", vals(absent), false, allButOneBit(format, absent, 16), false},
				{"all bits set", vals(absent), false, bytes.Repeat([]byte{0xff}, 16), true},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					m := NewMatcher(tt.values, tt.matchUnfiltered)
					if got := m.Active(); got != (len(tt.values) > 0) {
						t.Errorf("Active = %v with %d values", got, len(tt.values))
					}
					if got := m.Match(format, tt.bloom); got != tt.want {
						t.Fatalf("Match(% x) = %v, want %v", tt.bloom, got, tt.want)
					}
				})
			}
			var zero *Matcher
			if zero.Active() || !zero.Match(format, b16) || !zero.Match(format, nil) {
				t.Errorf("nil Matcher: Active %v, Match %v, %v; want false, true, true",
					zero.Active(), zero.Match(format, b16), zero.Match(format, nil))
			}
		})
	}
	// A format this code does not know rules nothing out.
	if !NewMatcher(vals(absent), false).Match(FilterFormat(9), make([]byte, 16)) {
		t.Error("unknown format: no match")
	}
}

// allButOneBit returns a filter of format and size with all of v's bits
// set but the last.
func allButOneBit(format FilterFormat, v string, size int) []byte {
	b := make([]byte, size)
	if format == FilterV1 {
		h1, h2 := v1Positions([]byte(v), size*8)
		if h1 == h2 {
			panic("test setup: both positions equal")
		}
		b[h1>>3] |= 0x80 >> (h1 & 7)
		return b
	}
	ps := v2Positions([]byte(v), uint64(size)*8)
	for _, p := range ps[:len(ps)-1] {
		if p == ps[len(ps)-1] {
			panic("test setup: positions equal")
		}
		b[p>>3] |= 1 << (p & 7)
	}
	return b
}

// Ensure one Matcher handles chunks of both formats and different filter
// sizes in any order: a stream's filter size can change between chunks,
// and a stream written before the filter change has chunks of both
// formats (in different segments).
func TestMatcherSizeAndFormatChange(t *testing.T) {
	m := NewMatcher(vals("alpha"), false)
	steps := []struct {
		format FilterFormat
		size   int
	}{
		{FilterV1, 16}, {FilterV2, 16}, {FilterV1, 255}, {FilterV2, 255}, {FilterV2, 16},
		{FilterV1, 64}, {FilterV1, 16}, {FilterV2, 64}, {FilterV1, 255},
	}
	for i, st := range steps {
		with := filterOf(st.format, st.size, []byte("alpha"))
		without := filterOf(st.format, st.size, []byte("beta"))
		if holds(st.format, without, []byte("alpha")) {
			t.Fatalf("test setup: alpha is a false positive at format %d, size %d", st.format, st.size)
		}
		if !m.Match(st.format, with) {
			t.Fatalf("step %d, format %d, size %d: no match for a Bloom holding the value", i, st.format, st.size)
		}
		if m.Match(st.format, without) {
			t.Fatalf("step %d, format %d, size %d: match for a Bloom without the value", i, st.format, st.size)
		}
	}
}

// Ensure NewMatcher copies the values it is given.
func TestMatcherCopiesValues(t *testing.T) {
	v := []byte("alpha")
	m := NewMatcher([][]byte{v}, false)
	copy(v, "gamma")
	for _, format := range []FilterFormat{FilterV1, FilterV2} {
		if !m.Match(format, filterOf(format, 16, []byte("alpha"))) {
			t.Fatalf("format %d: matcher changed with the caller's slice", format)
		}
	}
}

// Ensure the Matcher agrees with the bits-and-blooms filter over the same
// bits for many values and sizes.
func TestMatcherAgreesWithLibrary(t *testing.T) {
	for _, size := range []int{16, 31, 64, 255} {
		filter := bloomOf(size, filterValues("in", 30)...)
		lib := libFilter(filter)
		for _, v := range append(filterValues("in", 30), filterValues("probe", 300)...) {
			if got, want := NewMatcher([][]byte{v}, false).Match(FilterV2, filter), lib.Test(v); got != want {
				t.Fatalf("size %d, %q: Match %v, library Test %v", size, v, got, want)
			}
		}
	}
}

// libFilter returns the bits-and-blooms filter whose bits are the FilterV2
// bytes b.
func libFilter(b []byte) *bloom.BloomFilter {
	words := make([]uint64, (len(b)+7)/8)
	padded := make([]byte, len(words)*8)
	copy(padded, b)
	for i := range words {
		words[i] = binary.LittleEndian.Uint64(padded[i*8:])
	}
	return bloom.FromWithM(words, uint(len(b)*8), FilterHashes)
}

// Ensure testing a chunk's filter allocates nothing, for either format and
// as the filter size changes, and building one allocates nothing at a
// steady size.
func TestFilterAllocs(t *testing.T) {
	v1s := [][]byte{v1BloomOf(16, []byte("x")), v1BloomOf(255, []byte("y"))}
	v2s := [][]byte{bloomOf(16, []byte("x")), bloomOf(255, []byte("y"))}
	for _, unfiltered := range []bool{false, true} {
		m := NewMatcher(vals("a", "b", "c"), unfiltered)
		n := testing.AllocsPerRun(100, func() {
			for i := range v1s {
				m.Match(FilterV1, v1s[i])
				m.Match(FilterV2, v2s[i])
			}
		})
		if n != 0 {
			t.Errorf("Match (match unfiltered %v) allocs = %v, want 0", unfiltered, n)
		}
	}
	var b Bloom
	values := filterValues("v", 20)
	n := testing.AllocsPerRun(100, func() {
		b.Reset(16)
		for _, v := range values {
			b.Add(v)
		}
		b.Add(nil)
		b.Bytes()
	})
	if n != 0 {
		t.Errorf("Bloom build allocs = %v, want 0", n)
	}
}

// Measure the false-positive rate of 16-byte filters of both formats with
// 1, 5, 20 and 50 values, next to the estimate (1-e^(-kn/m))^k; assert
// only that there is no false negative. Run with -v to see the table.
func TestFilterFalsePositiveRate(t *testing.T) {
	const (
		size    = 16
		filters = 1000
		probes  = 1000
	)
	matchers := make([]*Matcher, probes)
	for i := range matchers {
		matchers[i] = NewMatcher([][]byte{fmt.Appendf(nil, "probe-%d", i)}, false)
	}
	t.Logf("16-byte filters, %d filters x %d absent probes each:", filters, probes)
	t.Logf("%7s %10s %10s %10s %10s", "values", "v1 (old)", "v1 est.", "v2 (new)", "v2 est.")
	for _, n := range []int{1, 5, 20, 50} {
		var rate [3]float64
		for _, format := range []FilterFormat{FilterV1, FilterV2} {
			fp := 0
			for f := range filters {
				values := filterValues(fmt.Sprintf("f%d-n%d", f, n), n)
				b := filterOf(format, size, values...)
				for _, v := range values {
					if !NewMatcher([][]byte{v}, false).Match(format, b) {
						t.Fatalf("format %d: false negative for %q", format, v)
					}
				}
				for _, m := range matchers {
					if m.Match(format, b) {
						fp++
					}
				}
			}
			rate[format] = float64(fp) / float64(filters*probes)
		}
		// FilterV1: 2 bits of 127; FilterV2: FilterHashes bits of 128.
		est1 := math.Pow(1-math.Exp(-2*float64(n)/127), 2)
		est2 := math.Pow(1-math.Exp(-FilterHashes*float64(n)/128), FilterHashes)
		t.Logf("%7d %10.5f %10.5f %10.5f %10.5f", n, rate[FilterV1], est1, rate[FilterV2], est2)
	}
}
