package raft

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

func openTestStore(t *testing.T, dir string) *store {
	t.Helper()
	st, err := openStore(dir, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func ents(lo, hi, term uint64) []*pb.Entry {
	var out []*pb.Entry
	for i := lo; i < hi; i++ {
		out = append(out, &pb.Entry{Index: new(i), Term: new(term), Data: fmt.Appendf(nil, "%d@%d", i, term)})
	}
	return out
}

func write(t *testing.T, st *store, gs *Storage, w pendingWrite) {
	t.Helper()
	b := st.db.NewBatch()
	defer b.Close()
	if err := gs.stage(b, w); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	gs.publish(w)
}

// checkLog checks gs's first and last index and that every entry in
// between has the data ents wrote for its term, read through Entries
// (from the cache and from pebble) and Term.
func checkLog(t *testing.T, gs *Storage, first, last uint64, termOf func(uint64) uint64) {
	t.Helper()
	if f, _ := gs.FirstIndex(); f != first {
		t.Fatalf("first index %d, want %d", f, first)
	}
	if l, _ := gs.LastIndex(); l != last {
		t.Fatalf("last index %d, want %d", l, last)
	}
	got, err := gs.Entries(first, last+1, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(got)) != last+1-first {
		t.Fatalf("%d entries, want %d", len(got), last+1-first)
	}
	for i, e := range got {
		idx := first + uint64(i)
		want := fmt.Sprintf("%d@%d", idx, termOf(idx))
		if e.GetIndex() != idx || string(e.GetData()) != want {
			t.Fatalf("entry %d: index %d data %q, want %q", idx, e.GetIndex(), e.GetData(), want)
		}
		if term, err := gs.Term(idx); err != nil || term != termOf(idx) {
			t.Fatalf("term of %d: %d %v, want %d", idx, term, err, termOf(idx))
		}
	}
}

func TestStorageLog(t *testing.T) {
	dir := t.TempDir()
	st := openTestStore(t, dir)
	gs, err := loadStorage(st, 5)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := loadStorage(st, 6)
	write(t, st, other, pendingWrite{entries: ents(1, 10, 1)})

	// 1000 entries: the first ones only in pebble, the last 512 cached.
	write(t, st, gs, pendingWrite{entries: ents(1, 1001, 1), hard: &pb.HardState{Term: new(uint64(1)), Commit: new(uint64(900))}})
	checkLog(t, gs, 1, 1000, func(uint64) uint64 { return 1 })
	// maxSize: at least one entry, then as many as fit.
	if got, _ := gs.Entries(10, 20, 1); len(got) != 1 {
		t.Fatalf("Entries with maxSize 1: %d entries, want 1", len(got))
	}
	if _, err := gs.Entries(10, 1002, 1<<40); !errors.Is(err, etcdraft.ErrUnavailable) {
		t.Fatalf("Entries past the last: %v, want ErrUnavailable", err)
	}

	// A new leader's entries replace the tail from 301 on, in pebble
	// (before the cache) and in the cache.
	write(t, st, gs, pendingWrite{entries: ents(301, 311, 2)})
	termOf := func(i uint64) uint64 {
		if i > 300 {
			return 2
		}
		return 1
	}
	checkLog(t, gs, 1, 310, termOf)

	// Compaction needs a snapshot at or past it.
	if err := gs.compact(100); !errors.Is(err, ErrNotSnapshotted) {
		t.Fatalf("compact without snapshot: %v, want ErrNotSnapshotted", err)
	}
	snap := &pb.Snapshot{Data: []byte("sm"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(305)), Term: new(uint64(2)), ConfState: &pb.ConfState{Voters: []uint64{1, 2}}}}
	if err := gs.saveSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	if err := gs.compact(302); err != nil {
		t.Fatal(err)
	}
	checkLog(t, gs, 303, 310, termOf)
	if _, err := gs.Entries(302, 305, 1<<40); !errors.Is(err, etcdraft.ErrCompacted) {
		t.Fatalf("Entries before the first: %v, want ErrCompacted", err)
	}
	if term, err := gs.Term(302); err != nil || term != 2 {
		t.Fatalf("term of the last compacted entry: %d %v, want 2", term, err)
	}

	// Reopened, the log, hard state and snapshot are the same, and the
	// other group was left alone.
	if err := st.db.Close(); err != nil {
		t.Fatal(err)
	}
	st = openTestStore(t, dir)
	defer st.db.Close()
	gs, err = loadStorage(st, 5)
	if err != nil {
		t.Fatal(err)
	}
	checkLog(t, gs, 303, 310, termOf)
	hs, _, _ := gs.InitialState()
	if hs.GetCommit() != 900 || hs.GetTerm() != 1 {
		t.Fatalf("hard state %v", hs)
	}
	got, err := gs.Snapshot()
	if err != nil || string(got.GetData()) != "sm" || got.GetMetadata().GetIndex() != 305 {
		t.Fatalf("snapshot %v %v", got, err)
	}
	other, _ = loadStorage(st, 6)
	checkLog(t, other, 1, 9, func(uint64) uint64 { return 1 })

	// A received snapshot replaces the whole log.
	recv := &pb.Snapshot{Data: []byte("leader's"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(500)), Term: new(uint64(3)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
	write(t, st, gs, pendingWrite{snap: recv, entries: ents(501, 503, 3)})
	checkLog(t, gs, 501, 502, func(uint64) uint64 { return 3 })
	if _, cs, _ := gs.InitialState(); len(cs.GetVoters()) != 3 {
		t.Fatalf("conf state after a snapshot: %v", cs)
	}
	gs, _ = loadStorage(st, 5)
	checkLog(t, gs, 501, 502, func(uint64) uint64 { return 3 })
}

// Ensure a commit index that a power cut left behind what the state
// machine applied is raised to it, and one past the log is refused.
func TestStorageRaiseCommit(t *testing.T) {
	st := openTestStore(t, t.TempDir())
	defer st.db.Close()
	gs, _ := loadStorage(st, 1)
	write(t, st, gs, pendingWrite{entries: ents(1, 11, 1), hard: &pb.HardState{Term: new(uint64(1)), Commit: new(uint64(4))}})
	if err := gs.raiseCommit(8); err != nil {
		t.Fatal(err)
	}
	if hs, _, _ := gs.InitialState(); hs.GetCommit() != 8 || hs.GetTerm() != 1 {
		t.Fatalf("hard state %v, want commit 8 term 1", hs)
	}
	if err := gs.raiseCommit(11); !errors.Is(err, ErrCorruption) {
		t.Fatalf("raise past the log: %v, want ErrCorruption", err)
	}
}
