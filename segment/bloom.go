package segment

import "github.com/cespare/xxhash/v2"

// Bloom is a chunk's filter: size*8 bits, numbered most significant bit first
// across the bytes (Osiris's bit order). A filtered entry with value V sets
// two bits in 1..bits-1 derived from xxhash64(V); an unfiltered entry sets
// bit 0. The hash is Warren's own (Osiris uses Erlang's phash2), so filters
// written by RabbitMQ cannot be read here, nor ours by RabbitMQ.
type Bloom struct {
	bits [MaxBloomSize]byte
	size int
}

// Reset clears the filter and sets its size in bytes.
func (b *Bloom) Reset(size int) {
	b.size = size
	clear(b.bits[:])
}

// Add records a filter value; nil or empty means an unfiltered entry.
func (b *Bloom) Add(value []byte) {
	if len(value) == 0 {
		b.bits[0] |= 0x80
		return
	}
	h1, h2 := bloomPositions(value, b.size*8)
	b.bits[h1>>3] |= 0x80 >> (h1 & 7)
	b.bits[h2>>3] |= 0x80 >> (h2 & 7)
}

// Bytes returns the filter's bytes, valid until the next Reset or Add.
func (b *Bloom) Bytes() []byte { return b.bits[:b.size] }

// bloomPositions returns the two bit positions of value in a filter of
// nbits bits, both in 1..nbits-1.
func bloomPositions(value []byte, nbits int) (uint32, uint32) {
	h := xxhash.Sum64(value)
	m := uint32(nbits - 1)
	return uint32(h)%m + 1, uint32(h>>32)%m + 1
}

// Matcher answers whether a chunk may hold entries a filtered reader wants.
// The zero Matcher (no values) matches every chunk.
type Matcher struct {
	values          [][]byte
	matchUnfiltered bool
	// positions caches bit positions per filter size, since a stream's
	// filter size can change between chunks.
	cacheSize int
	positions [][2]uint32
}

// NewMatcher returns a matcher for the given filter values. With
// matchUnfiltered, chunks holding entries without a filter value match too.
func NewMatcher(values [][]byte, matchUnfiltered bool) *Matcher {
	m := &Matcher{matchUnfiltered: matchUnfiltered}
	for _, v := range values {
		m.values = append(m.values, append([]byte(nil), v...))
	}
	return m
}

// Active reports whether the matcher filters at all.
func (m *Matcher) Active() bool { return m != nil && len(m.values) > 0 }

// Match reports whether a chunk with the given Bloom bytes may hold a wanted
// entry. A chunk without Bloom bytes holds only unfiltered entries.
func (m *Matcher) Match(bloom []byte) bool {
	if !m.Active() {
		return true
	}
	if len(bloom) == 0 {
		return m.matchUnfiltered
	}
	if m.matchUnfiltered && bloom[0]&0x80 != 0 {
		return true
	}
	if m.cacheSize != len(bloom) {
		m.cacheSize = len(bloom)
		m.positions = m.positions[:0]
		for _, v := range m.values {
			h1, h2 := bloomPositions(v, len(bloom)*8)
			m.positions = append(m.positions, [2]uint32{h1, h2})
		}
	}
	for _, p := range m.positions {
		if bloom[p[0]>>3]&(0x80>>(p[0]&7)) != 0 && bloom[p[1]>>3]&(0x80>>(p[1]&7)) != 0 {
			return true
		}
	}
	return false
}
