package segment

import (
	"bytes"
	"encoding/binary"

	"github.com/bits-and-blooms/bloom/v3"
)

// FilterFormat says how a chunk's Bloom bytes were built and how to test
// them. The chunk does not say: its segment file's format version decides
// for all its chunks (see Segment.FilterFormat and the package doc).
type FilterFormat uint8

// These constants are part of the on-disk format and must not be changed.
const (
	// FilterV1 is the filter of format-version-1 segments, written before
	// the filters came from bits-and-blooms. Read only (see bloom_v1.go).
	FilterV1 FilterFormat = 1
	// FilterV2 is the filter of format-version-2 segments: a
	// bits-and-blooms/bloom/v3 filter of size*8 bits and FilterHashes
	// hash functions, its bits stored least significant first.
	FilterV2 FilterFormat = 2

	// FilterHashes is the number of hash functions of a FilterV2 filter:
	// the bits one value sets.
	FilterHashes = 3

	// filterWords is the number of 64-bit words of the largest filter.
	filterWords = (MaxBloomSize*8 + 63) / 64
)

// The stored bytes of the largest filter fit Bloom.out.
const _ = uint(filterWords*8 - MaxBloomSize)

// Bloom builds a chunk's filter in the current format (FilterV2). The zero
// Bloom is ready for Reset; it allocates only when the size changes or a
// value is longer than any before.
//
// Adding a value twice changes nothing, so Add skips hashing a value equal
// to the one before (publishers tend to send runs of one value) and
// records unfiltered entries with one flag: most entries cost a compare.
type Bloom struct {
	f          *bloom.BloomFilter // size*8 bits, FilterHashes hash functions
	size       int                // bytes
	unfiltered bool               // an entry without a filter value was added
	last       []byte             // the last value added, when hasLast
	hasLast    bool
	out        [filterWords * 8]byte
}

// Reset clears the filter and sets its size in bytes
// (MinBloomSize..MaxBloomSize).
func (b *Bloom) Reset(size int) {
	b.size = size
	b.unfiltered = false
	b.hasLast = false
	if b.f == nil || b.f.Cap() != uint(size*8) {
		b.f = bloom.New(uint(size*8), FilterHashes)
		return
	}
	b.f.ClearAll()
}

// Add records a filter value. nil or empty means an unfiltered entry: the
// empty value stands for those (a filter value is never empty).
func (b *Bloom) Add(value []byte) {
	if len(value) == 0 {
		b.unfiltered = true
		return
	}
	if b.hasLast && bytes.Equal(value, b.last) {
		return
	}
	b.f.Add(value)
	b.last = append(b.last[:0], value...)
	b.hasLast = true
}

// Bytes returns the filter's bytes, valid until the next Reset, Add or
// Bytes: bit i of the filter is bit i%8 (least significant first) of byte
// i/8, which is the filter's 64-bit words in little-endian order.
func (b *Bloom) Bytes() []byte {
	if b.unfiltered {
		b.f.Add(nil)
	}
	for i, w := range b.f.BitSet().Words() {
		binary.LittleEndian.PutUint64(b.out[i*8:], w)
	}
	return b.out[:b.size]
}

// Matcher answers whether a chunk may hold entries a filtered reader wants.
// The zero Matcher (no values) matches every chunk. A Matcher is not safe
// for concurrent use; Match does not allocate once it has seen a chunk of
// each filter size (it keeps bit positions for the last size of each
// format, as a stream's filter size can change between chunks).
type Matcher struct {
	values          [][]byte // the wanted values, copied
	matchUnfiltered bool
	// locs holds FilterHashes hash values per wanted value, before their
	// reduction modulo the filter's bits (so for every filter size), for
	// FilterV2 filters; then those of the empty value (unfiltered entries).
	locs []uint64
	v2   v2Cache // locs reduced for the last FilterV2 filter size
	v1   v1Cache // bit positions for FilterV1 filters
}

// v2Cache holds the matcher's bit positions for one FilterV2 filter size,
// so that testing a chunk costs no hashing and no division.
type v2Cache struct {
	size      int
	positions []uint32 // locs modulo size*8
}

// NewMatcher returns a matcher for the given filter values. With
// matchUnfiltered, chunks holding entries without a filter value match too.
func NewMatcher(values [][]byte, matchUnfiltered bool) *Matcher {
	m := &Matcher{matchUnfiltered: matchUnfiltered}
	for _, v := range values {
		m.values = append(m.values, append([]byte(nil), v...))
		m.locs = append(m.locs, bloom.Locations(v, FilterHashes)...)
	}
	m.locs = append(m.locs, bloom.Locations(nil, FilterHashes)...)
	return m
}

// Active reports whether the matcher filters at all.
func (m *Matcher) Active() bool { return m != nil && len(m.values) > 0 }

// Match reports whether a chunk with the given Bloom bytes, of the given
// format, may hold a wanted entry. A chunk without Bloom bytes holds only
// unfiltered entries. A format this code does not know rules nothing out.
func (m *Matcher) Match(format FilterFormat, bloom []byte) bool {
	if !m.Active() {
		return true
	}
	if len(bloom) == 0 {
		return m.matchUnfiltered
	}
	switch format {
	case FilterV2:
		return m.matchV2(bloom)
	case FilterV1:
		return m.matchV1(bloom)
	}
	return true
}

// matchV2 tests a FilterV2 filter: a value may be in it when all its
// FilterHashes bits are set.
func (m *Matcher) matchV2(bloom []byte) bool {
	c := &m.v2
	if c.size != len(bloom) {
		c.size = len(bloom)
		c.positions = c.positions[:0]
		nbits := uint64(len(bloom)) * 8
		for _, l := range m.locs {
			c.positions = append(c.positions, uint32(l%nbits))
		}
	}
	ps := c.positions
	if !m.matchUnfiltered {
		ps = ps[:len(ps)-FilterHashes]
	}
	for ; len(ps) >= FilterHashes; ps = ps[FilterHashes:] {
		if hasBits(bloom, ps[:FilterHashes]) {
			return true
		}
	}
	return false
}

// hasBits reports whether bloom has every bit of positions set.
func hasBits(bloom []byte, positions []uint32) bool {
	for _, i := range positions {
		if bloom[i>>3]&(1<<(i&7)) == 0 {
			return false
		}
	}
	return true
}
