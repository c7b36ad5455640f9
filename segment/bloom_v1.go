package segment

import "github.com/cespare/xxhash/v2"

// The filter of format-version-1 segments (FilterV1), kept so that chunks
// written before the filters came from bits-and-blooms still filter. Warren
// no longer writes it.
//
// A filter of size bytes has size*8 bits, numbered most significant bit
// first across the bytes. A filtered entry with value V sets two bits in
// 1..bits-1: the low and the high 32 bits of xxhash64(V), each modulo
// bits-1, plus one. An unfiltered entry sets bit 0.

// v1Positions returns the two bit positions of value in a FilterV1 filter
// of nbits bits, both in 1..nbits-1.
func v1Positions(value []byte, nbits int) (uint32, uint32) {
	h := xxhash.Sum64(value)
	m := uint32(nbits - 1)
	return uint32(h)%m + 1, uint32(h>>32)%m + 1
}

// v1Cache holds the matcher's bit positions for one FilterV1 filter size,
// since a stream's filter size can change between chunks.
type v1Cache struct {
	size      int
	positions [][2]uint32
}

// matchV1 tests a FilterV1 filter.
func (m *Matcher) matchV1(bloom []byte) bool {
	if m.matchUnfiltered && bloom[0]&0x80 != 0 {
		return true
	}
	c := &m.v1
	if c.size != len(bloom) {
		c.size = len(bloom)
		c.positions = c.positions[:0]
		for _, v := range m.values {
			h1, h2 := v1Positions(v, len(bloom)*8)
			c.positions = append(c.positions, [2]uint32{h1, h2})
		}
	}
	for _, p := range c.positions {
		if bloom[p[0]>>3]&(0x80>>(p[0]&7)) != 0 && bloom[p[1]>>3]&(0x80>>(p[1]&7)) != 0 {
			return true
		}
	}
	return false
}
