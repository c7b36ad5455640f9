package osiris

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/warren-mq/warren/segment"
)

// storeState stores blob and waits for its done.
func storeState(t *testing.T, s *Stream, blob []byte) {
	t.Helper()
	ch := make(chan error, 1)
	if err := s.StoreState(blob, func(err error) { ch <- err }); err != nil {
		t.Fatalf("StoreState: %v", err)
	}
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("StoreState done: %v", err)
		}
	case <-time.After(replicaWait):
		t.Fatal("StoreState done not called")
	}
}

// Ensure a stored state is State at once after done, survives a reopen,
// takes a tracking-delta chunk of its own, and that the newest of several
// queued before the writer runs wins, with every done called.
func TestStoreStateReopen(t *testing.T) {
	dir := t.TempDir()
	s := mustCreate(t, dir, Config{}, Options{RetentionInterval: -1})
	if st := s.State(); st != nil {
		t.Fatalf("new stream: State %q, want nil", st)
	}
	mustAppend(t, s, "", msgs("m", 0, 3)...)
	storeState(t, s, []byte("one"))
	if got := s.State(); string(got) != "one" {
		t.Fatalf("State %q, want one", got)
	}
	hs := chunkHeaders(t, s, First(), true)
	if n := len(hs); n != 2 || hs[1].Type != segment.ChunkTrackingDelta || hs[1].ChunkID != 3 {
		t.Fatalf("chunks %+v, want a user chunk and a delta at 3", hs)
	}

	// Several queued while the writer is busy: one chunk, the newest.
	release := make(chan struct{})
	busy := make(chan struct{})
	if err := s.Submit(&Batch{Messages: msgs("b", 0, 1), Done: func(Result) { close(busy); <-release }}); err != nil {
		t.Fatal(err)
	}
	<-busy
	dones := make(chan error, 3)
	for _, v := range []string{"a", "b", "c"} {
		if err := s.StoreState([]byte(v), func(err error) { dones <- err }); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	for range 3 {
		if err := <-dones; err != nil {
			t.Fatal(err)
		}
	}
	if got := s.State(); string(got) != "c" {
		t.Fatalf("State %q, want c", got)
	}
	if n := len(chunkHeaders(t, s, First(), true)); n != 4 {
		t.Fatalf("%d chunks, want 4 (one delta for the three states)", n)
	}
	if _, err := s.SubmitCounted(&Batch{Messages: msgs("x", 0, 1)}); err != ErrNotPlain {
		t.Fatalf("SubmitCounted after StoreState: %v, want ErrNotPlain", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreState([]byte("late"), nil); err != ErrClosed {
		t.Fatalf("StoreState after Close: %v, want ErrClosed", err)
	}

	s = mustOpen(t, dir, Options{RetentionInterval: -1})
	if got := s.State(); string(got) != "c" {
		t.Fatalf("reopened: State %q, want c", got)
	}
	storeState(t, s, []byte{}) // empty, but a state
	s.Close()
	s = mustOpen(t, dir, Options{RetentionInterval: -1})
	if got := s.State(); got == nil || len(got) != 0 {
		t.Fatalf("reopened: State %q (nil %v), want empty", got, got == nil)
	}
}

// Ensure the newest state survives many segment rolls and the deletion
// of the old segments (TruncateBefore, retention), because every
// snapshot carries it, and that a crash that tore the snapshot starting
// the last segment loses no state either.
func TestStoreStateRollTruncate(t *testing.T) {
	dir := t.TempDir()
	opts := Options{RetentionInterval: -1}
	s := mustCreate(t, dir, Config{MaxSegmentSize: 4 << 10}, opts)
	var last []byte
	for i := range 200 {
		mustAppend(t, s, "", msgs(fmt.Sprint("m", i), 0, 5)...)
		last = bytes.Repeat(fmt.Appendf(nil, "state-%d;", i), 1+i%7)
		if i%3 == 0 {
			storeState(t, s, last)
		} else if err := s.StoreState(last, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Segments < 10 {
		t.Fatalf("%d segments, want many", st.Segments)
	}
	n, err := s.TruncateBefore(st.NextOffset)
	if err != nil || n != st.Segments-1 {
		t.Fatalf("TruncateBefore: %d, %v; want %d", n, err, st.Segments-1)
	}
	if got := s.State(); !bytes.Equal(got, last) {
		t.Fatalf("State %q, want %q", got, last)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir, opts)
	if got := s.State(); !bytes.Equal(got, last) {
		t.Fatalf("reopened after truncation: State %q, want %q", got, last)
	}
	// The snapshot that starts the only segment carries the state.
	hs := chunkHeaders(t, s, First(), true)
	if len(hs) == 0 || hs[0].Type != segment.ChunkTrackingSnapshot {
		t.Fatalf("first chunk %+v, want a snapshot", hs)
	}

	// Roll once more and tear the new segment's snapshot, as a crash
	// would: Open replays the segment before it.
	for i := 0; s.Stats().Segments < 2; i++ {
		mustAppend(t, s, "", msgs(fmt.Sprint("r", i), 0, 5)...)
	}
	s.Close()
	bases, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	lastBase := bases[len(bases)-1]
	truncateFile(t, filepath.Join(dir, segment.SegmentFileName(lastBase)), segment.FileHeaderSize+10)
	s = mustOpen(t, dir, opts)
	if got := s.State(); !bytes.Equal(got, last) {
		t.Fatalf("reopened after a torn snapshot: State %q, want %q", got, last)
	}
}

// Ensure a replicated leader's StoreState is done only once a replica
// holds it (the commit), that the replica's State follows, that a
// replica refuses StoreState, and that the replica reopened as leader
// (promotion) has the state.
func TestStoreStateReplicated(t *testing.T) {
	root := t.TempDir()
	rdir := filepath.Join(root, "r")
	leader := openMember(t, filepath.Join(root, "l"), 8<<10, leaderOf(2, 1))
	r := openMember(t, rdir, 8<<10, replicaOf("r", 2))
	if err := r.StoreState([]byte("x"), func(error) { t.Error("done called on a replica") }); err != ErrNotLeader {
		t.Fatalf("replica StoreState: %v, want ErrNotLeader", err)
	}
	l := connect(t, leader, r, false)
	publish(t, leader, "p", 1, 100, 10)
	storeState(t, leader, []byte("first"))
	l.stop()

	// No replica: written, not committed, so not done.
	done := make(chan error, 1)
	if err := leader.StoreState([]byte("second"), func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := leader.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := leader.State(); string(got) != "second" {
		t.Fatalf("leader State %q, want second (written)", got)
	}
	select {
	case err := <-done:
		t.Fatalf("StoreState done (%v) without a replica", err)
	case <-time.After(50 * time.Millisecond):
	}
	if got := r.State(); string(got) != "first" {
		t.Fatalf("disconnected replica State %q, want first", got)
	}

	l = connect(t, leader, r, false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(replicaWait):
		t.Fatal("StoreState not done with the replica back")
	}
	waitCommitted(t, r, leader.Stats().LastChunkID)
	if got := r.State(); string(got) != "second" {
		t.Fatalf("replica State %q, want second", got)
	}
	checkSame(t, leader, r)
	l.stop()

	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	p := openMember(t, rdir, 8<<10, leaderOf(2, 2))
	if got := p.State(); string(got) != "second" {
		t.Fatalf("promoted replica State %q, want second", got)
	}
}

// Ensure Close fails a replicated leader's state still waiting for the
// commit, calling its done.
func TestStoreStateCloseUncommitted(t *testing.T) {
	leader := openMember(t, filepath.Join(t.TempDir(), "l"), 8<<10, leaderOf(3, 1))
	done := make(chan error, 1)
	if err := leader.StoreState([]byte("s"), func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := leader.Flush(); err != nil {
		t.Fatal(err)
	}
	leader.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("uncommitted state done without error at Close")
		}
	case <-time.After(replicaWait):
		t.Fatal("done not called at Close")
	}
}
