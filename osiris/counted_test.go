package osiris

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// Ensure SubmitCounted tells each batch the offsets it gets, under
// concurrent submitters, across segment rolls and a reopen, and that a
// stream with tracking refuses it.
func TestSubmitCounted(t *testing.T) {
	dir := t.TempDir()
	s := mustCreate(t, dir, Config{MaxSegmentSize: 4 << 10}, Options{})
	type sub struct {
		first uint64
		n     int
		res   chan Result
	}
	var mu sync.Mutex
	var subs []sub
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				n := 1 + (g+i)%3
				res := make(chan Result, 1)
				b := &Batch{Messages: msgs(fmt.Sprintf("g%d-%d", g, i), 0, n), Done: func(r Result) { res <- r }}
				first, err := s.SubmitCounted(b)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				subs = append(subs, sub{first, n, res})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	want := map[uint64]bool{}
	for _, sb := range subs {
		r := <-sb.res
		if r.Err != nil || r.Written != sb.n || r.LastOffset != sb.first+uint64(sb.n)-1 {
			t.Fatalf("batch told %d+%d got %+v", sb.first, sb.n, r)
		}
		for o := sb.first; o < sb.first+uint64(sb.n); o++ {
			if want[o] {
				t.Fatalf("offset %d given twice", o)
			}
			want[o] = true
		}
	}
	if st := s.Stats(); st.Segments < 2 || st.NextOffset != uint64(len(want)) {
		t.Fatalf("stats %+v, %d records", st, len(want))
	}
	if s.FirstSegmentBase() != 0 {
		t.Fatalf("first segment base %d", s.FirstSegmentBase())
	}
	if _, err := s.TruncateBefore(s.Stats().NextOffset); err != nil {
		t.Fatal(err)
	}
	if b := s.FirstSegmentBase(); b == 0 || b >= s.Stats().NextOffset {
		t.Fatalf("first segment base after truncation %d", b)
	}
	next := s.Stats().NextOffset
	s.Close()

	s = mustOpen(t, dir, Options{})
	first, err := s.SubmitCounted(&Batch{Messages: msgs("after", 0, 2), Done: func(Result) {}})
	if err != nil || first != next {
		t.Fatalf("after reopen: first %d, %v; want %d", first, err, next)
	}
	if err := s.StoreOffset("c", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SubmitCounted(&Batch{Messages: msgs("x", 0, 1)}); !errors.Is(err, ErrNotPlain) {
		t.Fatalf("with tracking: %v", err)
	}
	if _, err := s.SubmitCounted(&Batch{Producer: "p", Messages: msgs("x", 0, 1)}); !errors.Is(err, ErrNotPlain) {
		t.Fatalf("with a producer: %v", err)
	}
}

// Ensure a NoSync batch is confirmed without an fsync under FsyncAlways,
// and that Sync, or the next batch that wants one, syncs it.
func TestNoSyncBatch(t *testing.T) {
	s := mustCreate(t, t.TempDir(), Config{Fsync: FsyncAlways}, Options{})
	dirty := func() bool {
		var d bool
		if err := s.do(func() { d = s.w.dirty }); err != nil {
			t.Fatal(err)
		}
		return d
	}
	res := make(chan Result, 1)
	if err := s.Submit(&Batch{Messages: msgs("n", 0, 3), NoSync: true, Done: func(r Result) { res <- r }}); err != nil {
		t.Fatal(err)
	}
	if r := <-res; r.Err != nil || r.Written != 3 {
		t.Fatalf("NoSync batch: %+v", r)
	}
	if !dirty() {
		t.Fatal("a NoSync batch was synced")
	}
	if err := s.Sync(); err != nil || dirty() {
		t.Fatalf("Sync: %v, dirty %v", err, dirty())
	}
	if err := s.Submit(&Batch{Messages: msgs("n", 3, 4), NoSync: true, Done: func(r Result) { res <- r }}); err != nil {
		t.Fatal(err)
	}
	<-res
	mustAppend(t, s, "", msgs("s", 0, 1)...) // wants a sync: covers the earlier one
	if dirty() {
		t.Fatal("a syncing batch left the stream dirty")
	}
	if got := readAll(t, s, First(), ReaderOptions{}); len(got) != 5 {
		t.Fatalf("read %d records", len(got))
	}
}
