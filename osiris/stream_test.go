package osiris

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Ensure appended messages come back in order with consecutive offsets.
func TestAppendAndReadFirst(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{}, Options{})
	r1 := mustAppend(t, s, "", msgs("a", 0, 3)...)
	r2 := mustAppend(t, s, "", msgs("b", 0, 2)...)
	if r1.Written != 3 || r1.LastOffset != 2 || r2.Written != 2 || r2.LastOffset != 4 {
		t.Fatalf("results %+v %+v", r1, r2)
	}
	got := readAll(t, s, First(), ReaderOptions{})
	want := []record{{0, "a-0"}, {1, "a-1"}, {2, "a-2"}, {3, "b-0"}, {4, "b-1"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	st := s.Stats()
	if st.FirstOffset != 0 || st.NextOffset != 5 || st.LastChunkID != 3 || st.CommittedChunkID != 3 || st.Segments != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Ensure an empty stream answers every spec with "next" and a reader there
// sees the first append.
func TestEmptyStreamSpecs(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{}, Options{})
	for _, spec := range []OffsetSpec{First(), Last(), Next(), AtOffset(0), AtOffset(10), AtTimestamp(0), AtTimestamp(1 << 62)} {
		if got := readAll(t, s, spec, ReaderOptions{}); len(got) != 0 {
			t.Fatalf("%v: got %v", spec, got)
		}
		r, err := s.NewReader(spec, ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.NextOffset() != 0 {
			t.Fatalf("%v: next offset %d", spec, r.NextOffset())
		}
		r.Close()
	}
	st := s.Stats()
	if st.LastChunkID != -1 || st.CommittedChunkID != -1 || st.NextOffset != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Ensure every offset spec starts at the chunk the reference describes.
func TestOffsetSpecs(t *testing.T) {
	clk := newFakeClock()
	s := mustCreate(t, t.TempDir(), Config{}, Options{Now: clk.Now})
	// Chunks: [0,1,2] ts=T0, [3,4] ts=T0+10s, [5] ts=T0+20s
	t0 := clk.Now().UnixMilli()
	mustAppend(t, s, "", msgs("a", 0, 3)...)
	clk.Advance(10 * time.Second)
	mustAppend(t, s, "", msgs("b", 0, 2)...)
	clk.Advance(10 * time.Second)
	mustAppend(t, s, "", msgs("c", 0, 1)...)

	first := func(recs []record) string {
		if len(recs) == 0 {
			return "<none>"
		}
		return fmt.Sprintf("%d:%s", recs[0].offset, recs[0].body)
	}
	tests := []struct {
		spec OffsetSpec
		want string
		n    int
	}{
		{First(), "0:a-0", 6},
		{Last(), "5:c-0", 1},
		{Next(), "<none>", 0},
		{AtOffset(0), "0:a-0", 6},
		{AtOffset(2), "0:a-0", 6}, // the chunk holding 2 starts at 0
		{AtOffset(3), "3:b-0", 3},
		{AtOffset(4), "3:b-0", 3},
		{AtOffset(5), "5:c-0", 1},
		{AtOffset(6), "<none>", 0},
		{AtOffset(1000), "<none>", 0},
		{AtTimestamp(t0 - 1), "0:a-0", 6},
		{AtTimestamp(t0), "0:a-0", 6},
		{AtTimestamp(t0 + 1), "3:b-0", 3},
		{AtTimestamp(t0 + 10_000), "3:b-0", 3},
		{AtTimestamp(t0 + 20_000), "5:c-0", 1},
		{AtTimestamp(t0 + 20_001), "<none>", 0},
	}
	for _, tc := range tests {
		got := readAll(t, s, tc.spec, ReaderOptions{})
		if first(got) != tc.want || len(got) != tc.n {
			t.Errorf("%v: got first %s and %d records, want %s and %d", tc.spec, first(got), len(got), tc.want, tc.n)
		}
	}
	if _, err := s.NewReader(OffsetSpec{Kind: 9}, ReaderOptions{}); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("bad spec: %v", err)
	}
}

// Ensure a reader at the end blocks until the writer commits, and that
// cancelling its context or closing the stream releases it.
func TestReaderWaitsForData(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{}, Options{})
	r, err := s.NewReader(Next(), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan string, 1)
	go func() {
		c, err := r.Next(context.Background())
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := c.ReadData(nil)
		got <- string(b[4:])
	}()
	mustAppend(t, s, "", msg("hello"))
	if g := <-got; g != "hello" {
		t.Fatalf("got %q", g)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with cancelled ctx: %v", err)
	}

	done := make(chan error, 1)
	go func() { _, err := r.Next(context.Background()); done <- err }()
	s.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if err := s.Submit(&Batch{Messages: msgs("x", 0, 1)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after close: %v", err)
	}
}

// Ensure data, positions and tracking survive a close and reopen.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, Config{MaxSegmentSize: 4096}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 150; i++ {
		mustAppend(t, s, "p1", Message{Entry: msg(fmt.Sprintf("m-%d", i)).Entry, PublishingID: uint64(i + 1)})
	}
	if err := s.StoreOffset("consumer-a", 17); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "", msg("tail"))
	before := readAll(t, s, First(), ReaderOptions{})
	stBefore := s.Stats()
	if stBefore.Segments < 2 {
		t.Fatalf("expected several segments, got %+v", stBefore)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir, Config{}, Options{}); !errors.Is(err, ErrExists) {
		t.Fatalf("Create over a stream: %v", err)
	}

	s = mustOpen(t, dir, Options{})
	after := readAll(t, s, First(), ReaderOptions{})
	if !slices.Equal(before, after) || len(after) != 151 {
		t.Fatalf("after reopen got %d records, want %d equal ones", len(after), len(before))
	}
	if st := s.Stats(); st.NextOffset != stBefore.NextOffset || st.Segments != stBefore.Segments {
		t.Fatalf("stats after reopen %+v, before %+v", st, stBefore)
	}
	if o, ok := s.QueryOffset("consumer-a"); !ok || o != 17 {
		t.Fatalf("QueryOffset = %d, %v", o, ok)
	}
	if seq := s.PublisherSequence("p1"); seq != 150 {
		t.Fatalf("PublisherSequence = %d", seq)
	}
	r := mustAppend(t, s, "", msg("after"))
	if r.LastOffset != stBefore.NextOffset {
		t.Fatalf("append after reopen at %d, want %d", r.LastOffset, stBefore.NextOffset)
	}
}

// Ensure a producer's re-sent ids are dropped, counted and still confirmed.
func TestDeduplication(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{}, Options{})
	pm := func(id uint64) Message {
		return Message{Entry: msg(fmt.Sprintf("id-%d", id)).Entry, PublishingID: id}
	}
	r := mustAppend(t, s, "prod", pm(1), pm(2), pm(3))
	if r.Written != 3 || r.Duplicates != 0 {
		t.Fatalf("first batch %+v", r)
	}
	r = mustAppend(t, s, "prod", pm(2), pm(3), pm(4), pm(4), pm(7))
	if r.Written != 2 || r.Duplicates != 3 {
		t.Fatalf("second batch %+v", r)
	}
	// Another producer and the anonymous one are independent.
	mustAppend(t, s, "other", pm(1))
	mustAppend(t, s, "", pm(1))
	got := bodies(readAll(t, s, First(), ReaderOptions{}))
	want := []string{"id-1", "id-2", "id-3", "id-4", "id-7", "id-1", "id-1"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if seq := s.PublisherSequence("prod"); seq != 7 {
		t.Fatalf("sequence %d", seq)
	}
	if seq := s.PublisherSequence("nobody"); seq != 0 {
		t.Fatalf("unknown sequence %d", seq)
	}
	if d := s.Stats().Duplicates; d != 3 {
		t.Fatalf("duplicates %d", d)
	}
}

// Ensure an invalid entry fails its whole batch and nothing else.
func TestInvalidEntryFailsBatch(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{}, Options{})
	_, err := s.Append(context.Background(), "", msg("ok"), Message{Entry: []byte{0, 0, 0, 9, 1}})
	if err == nil {
		t.Fatal("invalid entry accepted")
	}
	mustAppend(t, s, "", msg("later"))
	if got := bodies(readAll(t, s, First(), ReaderOptions{})); !slices.Equal(got, []string{"later"}) {
		t.Fatalf("got %v", got)
	}
}
