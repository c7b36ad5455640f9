package osiris

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/warren-mq/warren/segment"
)

// Ensure concurrent appenders are all confirmed exactly once, every message
// is stored once, each appender's order is kept, and batches share chunks
// (group commit).
func TestGroupCommit(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncNone, FsyncInterval, FsyncAlways} {
		t.Run(string(policy), func(t *testing.T) {
			s := mustCreate(t, t.TempDir(), Config{Fsync: policy, MaxSegmentSize: 64 << 10}, Options{})
			const appenders, batches, perBatch = 8, 50, 10
			var wg sync.WaitGroup
			var mu sync.Mutex
			confirmed := map[string]int{}
			for a := 0; a < appenders; a++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var inflight sync.WaitGroup
					for b := 0; b < batches; b++ {
						var ms []Message
						for m := 0; m < perBatch; m++ {
							ms = append(ms, msg(fmt.Sprintf("a%d-%04d", a, b*perBatch+m)))
						}
						inflight.Add(1)
						key := fmt.Sprintf("a%d-b%d", a, b)
						err := s.Submit(&Batch{Messages: ms, Done: func(r Result) {
							mu.Lock()
							if r.Err == nil && r.Written == perBatch {
								confirmed[key]++
							}
							mu.Unlock()
							inflight.Done()
						}})
						if err != nil {
							t.Error(err)
							inflight.Done()
						}
					}
					inflight.Wait()
				}()
			}
			wg.Wait()
			if len(confirmed) != appenders*batches {
				t.Fatalf("%d batches confirmed, want %d", len(confirmed), appenders*batches)
			}
			for k, n := range confirmed {
				if n != 1 {
					t.Fatalf("batch %s confirmed %d times", k, n)
				}
			}
			got := readAll(t, s, First(), ReaderOptions{})
			if len(got) != appenders*batches*perBatch {
				t.Fatalf("%d records stored", len(got))
			}
			per := map[string][]string{}
			for _, r := range got {
				per[r.body[:2]] = append(per[r.body[:2]], r.body)
			}
			for a, list := range per {
				if !slices.IsSorted(list) || len(list) != batches*perBatch {
					t.Fatalf("appender %s: %d records, sorted=%v", a, len(list), slices.IsSorted(list))
				}
			}
			chunks := 0
			r, _ := s.NewReader(First(), ReaderOptions{})
			for {
				_, ok, err := r.TryNext()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				chunks++
			}
			r.Close()
			t.Logf("%d batches in %d chunks", appenders*batches, chunks)
		})
	}
}

// Ensure chunks are cut at MaxChunkBytes and at the segment size, and that
// a single entry larger than the chunk limit still gets a chunk.
func TestChunkLimits(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{MaxSegmentSize: 1 << 20}, Options{MaxChunkBytes: 1000})
	var ms []Message
	for i := 0; i < 100; i++ {
		ms = append(ms, msg(fmt.Sprintf("%03d-%s", i, string(make([]byte, 96)))))
	}
	big := msg(string(make([]byte, 5000)))
	mustAppend(t, s, "", append(ms, big)...)
	r, _ := s.NewReader(First(), ReaderOptions{})
	defer r.Close()
	var sizes []uint32
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		sizes = append(sizes, c.Header.DataLen)
	}
	// 104-byte entries: 9 fit in 1000 bytes, so 100 make 11 full chunks and
	// one of 1; the big entry gets its own.
	if len(sizes) != 13 {
		t.Fatalf("chunk data sizes %v, want 12 chunks and one big", sizes)
	}
	for i, n := range sizes[:12] {
		if want := uint32(9 * 104); i == 11 && n != 104 || i < 11 && n != want {
			t.Fatalf("chunk %d has %d bytes: %v", i, n, sizes)
		}
	}
	if sizes[12] != 5004 {
		t.Fatalf("big entry chunk %d bytes", sizes[10])
	}
}

// Ensure a filtered reader skips chunks whose Bloom filter excludes its
// values, and match-unfiltered brings back chunks without filter values.
func TestFilteredReader(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{FilterSize: 32}, Options{})
	fm := func(body, filter string) Message {
		m := msg(body)
		if filter != "" {
			m.Filter = []byte(filter)
		}
		return m
	}
	mustAppend(t, s, "", fm("red-1", "red"), fm("red-2", "red"))
	mustAppend(t, s, "", fm("blue-1", "blue"))
	mustAppend(t, s, "", fm("plain-1", ""))
	mustAppend(t, s, "", fm("green-1", "green"), fm("plain-2", ""))

	read := func(values []string, unfiltered bool) []string {
		var vs [][]byte
		for _, v := range values {
			vs = append(vs, []byte(v))
		}
		return bodies(readAll(t, s, First(), ReaderOptions{Filter: segment.NewMatcher(vs, unfiltered)}))
	}
	tests := []struct {
		values     []string
		unfiltered bool
		want       []string
	}{
		{nil, false, []string{"red-1", "red-2", "blue-1", "plain-1", "green-1", "plain-2"}},
		{[]string{"red"}, false, []string{"red-1", "red-2"}},
		{[]string{"blue", "green"}, false, []string{"blue-1", "green-1", "plain-2"}},
		{[]string{"blue"}, true, []string{"blue-1", "plain-1", "green-1", "plain-2"}},
		{[]string{"yellow"}, false, nil},
	}
	for _, tc := range tests {
		if got := read(tc.values, tc.unfiltered); !slices.Equal(got, tc.want) {
			t.Errorf("filter %v unfiltered=%v: got %v, want %v", tc.values, tc.unfiltered, got, tc.want)
		}
	}
}

// Ensure stored offsets are visible at once, survive reopening, and are
// written as a tracking delta when nothing else is written; the reader
// only sees tracking chunks when it asks for all chunks.
func TestStoreOffset(t *testing.T) {
	dir := t.TempDir()
	s := mustCreate(t, dir, Config{}, Options{})
	mustAppend(t, s, "", msgs("m", 0, 3)...)
	if err := s.StoreOffset("c1", 2); err != nil {
		t.Fatal(err)
	}
	if o, ok := s.QueryOffset("c1"); !ok || o != 2 {
		t.Fatalf("QueryOffset = %d %v", o, ok)
	}
	if _, ok := s.QueryOffset("c2"); ok {
		t.Fatal("unknown reference has an offset")
	}
	long := string(make([]byte, 256))
	if err := s.StoreOffset(long, 1); err != ErrReferenceTooLong {
		t.Fatalf("long reference: %v", err)
	}
	// With nothing else queued the offset is written as a tracking delta.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "", msg("after"))
	var types []segment.ChunkType
	r, _ := s.NewReader(First(), ReaderOptions{AllChunks: true})
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		types = append(types, c.Header.Type)
	}
	r.Close()
	want := []segment.ChunkType{segment.ChunkUser, segment.ChunkTrackingDelta, segment.ChunkUser}
	if !slices.Equal(types, want) {
		t.Fatalf("chunk types %v, want %v", types, want)
	}
	if got := readAll(t, s, First(), ReaderOptions{}); len(got) != 4 || got[3] != (record{4, "after"}) {
		t.Fatalf("user records %v (the delta uses offset 3)", got)
	}
	s.StoreOffset("c1", 4)
	s.Close()
	s = mustOpen(t, dir, Options{})
	if o, ok := s.QueryOffset("c1"); !ok || o != 4 {
		t.Fatalf("after reopen QueryOffset = %d %v", o, ok)
	}
}

// Ensure Delete removes the directory and later calls fail cleanly.
func TestDelete(t *testing.T) {
	dir := t.TempDir() + "/s"
	s, err := Create(dir, Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "", msg("x"))
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("opened a deleted stream")
	}
	if _, err := s.Append(context.Background(), "", msg("y")); err != ErrClosed {
		t.Fatalf("append after delete: %v", err)
	}
}

// Ensure configs out of range are refused.
func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{FilterSize: 15}, {FilterSize: 256}, {MaxSegmentSize: 10}, {MaxSegmentSize: 4_000_000_000},
		{MaxLengthBytes: -1}, {Fsync: "sometimes"},
	} {
		if _, err := Create(t.TempDir(), c, Options{}); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

// Ensure a segment starts with a tracking snapshot only when there is
// tracking, as in Osiris: a stream without any uses one offset per
// message however many segments it rolls through, and one with tracking
// keeps it across rolls, retention and a reopen (recovery replays the
// last segment alone).
func TestSnapshotOnlyWithTracking(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{MaxSegmentSize: 4096}
	s := mustCreate(t, dir, cfg, Options{MaxChunkBytes: 512})
	pad := strings.Repeat("x", 100)
	for i := range 40 {
		mustAppend(t, s, "", msgs(fmt.Sprint("a", i, pad), 0, 5)...)
	}
	st := s.Stats()
	if st.NextOffset != 200 || st.Segments < 5 {
		t.Fatalf("200 messages without tracking: next offset %d in %d segments, want 200 in several", st.NextOffset, st.Segments)
	}
	chunkTypes := func() map[segment.ChunkType]int {
		n := map[segment.ChunkType]int{}
		for _, h := range chunkHeaders(t, s, First(), true) {
			n[h.Type]++
		}
		return n
	}
	if n := chunkTypes(); n[segment.ChunkTrackingSnapshot] != 0 || n[segment.ChunkTrackingDelta] != 0 {
		t.Fatalf("chunk types %v, want user chunks only", n)
	}

	// With a stored offset and a producer, every later segment starts with
	// a snapshot.
	if err := s.StoreOffset("c1", 150); err != nil {
		t.Fatal(err)
	}
	before := s.Stats().Segments
	for i := range 40 {
		mustAppend(t, s, "p1", Message{Entry: segment.AppendSimpleEntry(nil, []byte(fmt.Sprint("b", i))), PublishingID: uint64(i + 1)})
		mustAppend(t, s, "", msgs(fmt.Sprint("b", i, pad), 0, 4)...)
	}
	rolled := s.Stats().Segments - before
	if n := chunkTypes(); rolled < 3 || n[segment.ChunkTrackingSnapshot] != rolled {
		t.Fatalf("%d rolls with tracking, %d snapshots (chunk types %v)", rolled, n[segment.ChunkTrackingSnapshot], n)
	}
	if err := s.SetRetention(8192, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, dir, Options{MaxChunkBytes: 512})
	if o, ok := s.QueryOffset("c1"); !ok || o != 150 {
		t.Fatalf("after retention and reopen QueryOffset = %d %v, want 150", o, ok)
	}
	if seq := s.PublisherSequence("p1"); seq != 40 {
		t.Fatalf("after reopen publisher sequence %d, want 40", seq)
	}
}

// Ensure chunk sizes follow the load as RabbitMQ's writer batches do: a
// burst on a new stream forms chunks of 32, 64, 128, ... entries; a chunk
// that fills doubles the bound (to 8192), and a cycle that brings fewer
// than a quarter of the bound halves it (to 32).
func TestAdaptiveChunkSizes(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{}, Options{})
	records := func(from uint64) []uint32 {
		var out []uint32
		for _, h := range chunkHeaders(t, s, AtOffset(from), false) {
			out = append(out, h.NumRecords)
		}
		return out
	}
	mustAppend(t, s, "", msgs("a", 0, 500)...)
	if got, want := records(0), []uint32{32, 64, 128, 256, 20}; !slices.Equal(got, want) {
		t.Fatalf("a burst of 500: chunks of %v, want %v", got, want)
	}
	// The bound is 512 now, and a cycle of 600 fills one chunk of it.
	mustAppend(t, s, "", msgs("b", 0, 600)...)
	if got, want := records(500), []uint32{512, 88}; !slices.Equal(got, want) {
		t.Fatalf("a burst of 600 after it: chunks of %v, want %v", got, want)
	}
	// Sustained load: the bound doubles to 8192 and stays.
	mustAppend(t, s, "", msgs("c", 0, 40000)...)
	got := records(1100)
	if got[len(got)-2] != 8192 || slices.Max(got) != 8192 {
		t.Fatalf("40000 messages: chunks of %v, want them to reach 8192 and no more", got)
	}
	// Single messages: each cycle halves the bound, down to 32.
	for i := range 10 {
		mustAppend(t, s, "", msg(fmt.Sprint("d", i)))
	}
	next := s.Stats().NextOffset
	mustAppend(t, s, "", msgs("e", 0, 100)...)
	if got, want := records(next), []uint32{32, 64, 4}; !slices.Equal(got, want) {
		t.Fatalf("a burst of 100 after single messages: chunks of %v, want %v", got, want)
	}
}
