package segment

import (
	"fmt"
	"testing"
)

// Run with: go test -run=^$ -bench=Bloom -count=6 ./segment/
//
// The chunk filter costs the writer one build per chunk and a filtered
// reader one test per chunk; the test runs for every chunk a filtered
// subscription passes over, so it must not allocate.

// benchFilterSizes are the default and the largest filter size in bytes.
var benchFilterSizes = []int{MinBloomSize, MaxBloomSize}

// filterValues returns n distinct filter values with the given prefix.
func filterValues(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s-%d", prefix, i)
	}
	return out
}

// BenchmarkBloomBuild builds one chunk's filter, as the Builder does: a
// reset, one add per entry and the bytes to store. Values are distinct.
func BenchmarkBloomBuild(b *testing.B) {
	for _, size := range benchFilterSizes {
		for _, n := range []int{1, 5, 20, 50} {
			values := filterValues("value", n)
			b.Run(fmt.Sprintf("size=%d/values=%d", size, n), func(b *testing.B) {
				var f Bloom
				var sink int
				b.ReportAllocs()
				for b.Loop() {
					f.Reset(size)
					for _, v := range values {
						f.Add(v)
					}
					sink += len(f.Bytes())
				}
				if sink == 0 {
					b.Fatal("no filter bytes")
				}
			})
		}
	}
}

// BenchmarkBloomBuildChunk builds the filter of a chunk of 100 entries
// (16 bytes), as publishers fill one: runs of 20 entries with one value
// (5 values), one value throughout, no value at all (every stream has a
// filter size, so unfiltered streams pay this per entry too).
func BenchmarkBloomBuildChunk(b *testing.B) {
	const entries = 100
	five := filterValues("run", 5)
	cases := []struct {
		name  string
		value func(i int) []byte
	}{
		{"runs", func(i int) []byte { return five[i/20] }},
		{"one-value", func(int) []byte { return five[0] }},
		{"unfiltered", func(int) []byte { return nil }},
	}
	for _, c := range cases {
		values := make([][]byte, entries)
		for i := range values {
			values[i] = c.value(i)
		}
		b.Run(c.name, func(b *testing.B) {
			var f Bloom
			var sink int
			b.ReportAllocs()
			for b.Loop() {
				f.Reset(MinBloomSize)
				for _, v := range values {
					f.Add(v)
				}
				sink += len(f.Bytes())
			}
			if sink == 0 {
				b.Fatal("no filter bytes")
			}
		})
	}
}

// BenchmarkBloomMatch tests a chunk filter holding 5 values against a
// reader's wanted values: hit (the last wanted value is in the chunk) and
// miss (none is).
func BenchmarkBloomMatch(b *testing.B) {
	for _, size := range benchFilterSizes {
		var f Bloom
		f.Reset(size)
		for _, v := range filterValues("chunk", 5) {
			f.Add(v)
		}
		filter := append([]byte(nil), f.Bytes()...)
		for _, wanted := range []int{1, 5} {
			for _, hit := range []bool{true, false} {
				values := filterValues("absent", wanted)
				name := "miss"
				if hit {
					values[wanted-1] = []byte("chunk-3")
					name = "hit"
				}
				m := NewMatcher(values, false)
				b.Run(fmt.Sprintf("size=%d/wanted=%d/%s", size, wanted, name), func(b *testing.B) {
					matched := 0
					b.ReportAllocs()
					for b.Loop() {
						if m.Match(FilterV2, filter) {
							matched++
						}
					}
					if hit && matched == 0 {
						b.Fatal("a filter holding the value did not match")
					}
				})
			}
		}
	}
}
