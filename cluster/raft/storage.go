package raft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Key layout, part of the on-disk format (see doc.go); do not change
// without bumping formatVersion.
const (
	keyPrefix     = 'R' // every group key: 'R' | group u64 | kind [| index u64]
	kindEntry     = 'e' // + index u64: one pb.Entry
	kindHardState = 'h' // pb.HardState
	kindConfState = 'c' // pb.ConfState as of the last applied conf change or snapshot
	kindSnapshot  = 's' // pb.Snapshot: metadata and the state machine's bytes
	kindTruncated = 't' // u64 index | u64 term of the last compacted entry

	formatVersion = 1
)

// formatKey holds the format version, one byte.
var formatKey = []byte("V/raft-format")

// Compile-time checks that the kinds sort as doc.go draws them.
const (
	_ = uint(kindEntry - kindConfState)
	_ = uint(kindHardState - kindEntry)
	_ = uint(kindTruncated - kindSnapshot)
)

// entryCacheSize is how many recent entries a group keeps in memory, so
// Term, LastIndex and the leader's appends to followers don't read pebble.
const entryCacheSize = 512

func groupKey(group uint64, kind byte) []byte {
	k := make([]byte, 0, 18)
	k = append(k, keyPrefix)
	k = binary.BigEndian.AppendUint64(k, group)
	return append(k, kind)
}

func entryKey(group, index uint64) []byte {
	return binary.BigEndian.AppendUint64(groupKey(group, kindEntry), index)
}

// store is the pebble database a Host keeps every group's log in.
type store struct {
	db *pebble.DB
}

func openStore(dir string, log *slog.Logger, fs vfs.FS) (*store, error) {
	opts := &pebble.Options{Logger: pebbleLogger{log}}
	if fs != nil {
		opts.FS = fs
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("raft: open storage %s: %w", dir, err)
	}
	v, closer, err := db.Get(formatKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if err := db.Set(formatKey, []byte{formatVersion}, pebble.Sync); err != nil {
			db.Close()
			return nil, fmt.Errorf("raft: storage %s: write format: %w", dir, err)
		}
	case err != nil:
		db.Close()
		return nil, fmt.Errorf("raft: storage %s: read format: %w", dir, err)
	default:
		ok := len(v) == 1 && v[0] == formatVersion
		closer.Close()
		if !ok {
			db.Close()
			return nil, fmt.Errorf("raft: storage %s: format %x, want %d: %w", dir, v, formatVersion, ErrCorruption)
		}
	}
	return &store{db: db}, nil
}

// get unmarshals the value at key into m; false when there is none.
func (s *store) get(key []byte, m proto.Message) (bool, error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	if err := proto.Unmarshal(v, m); err != nil {
		return false, fmt.Errorf("key %x: %w: %v", key, ErrCorruption, err)
	}
	return true, nil
}

// Storage is one group's raft log in the host's pebble database; it
// implements etcd raft's Storage. Its methods are safe to call from any
// goroutine, but only the host's driver goroutine changes it.
type Storage struct {
	st    *store
	group uint64

	mu struct {
		sync.Mutex
		hard      *pb.HardState
		conf      *pb.ConfState
		snapMeta  *pb.SnapshotMetadata // nil: no snapshot
		truncIdx  uint64               // last compacted index; first index is truncIdx+1
		truncTerm uint64
		last      uint64
		// cache holds the entries [cacheFirst, last], at most entryCacheSize.
		cache      []*pb.Entry
		cacheFirst uint64
	}
}

var _ etcdraft.Storage = (*Storage)(nil)

// loadStorage reads group's state from s.
func loadStorage(s *store, group uint64) (*Storage, error) {
	gs := &Storage{st: s, group: group}
	m := &gs.mu
	hs := &pb.HardState{}
	ok, err := s.get(groupKey(group, kindHardState), hs)
	if err != nil {
		return nil, fmt.Errorf("raft: group %d: load hard state: %w", group, err)
	}
	if ok {
		m.hard = hs
	}
	cs := &pb.ConfState{}
	if _, err := s.get(groupKey(group, kindConfState), cs); err != nil {
		return nil, fmt.Errorf("raft: group %d: load conf state: %w", group, err)
	}
	m.conf = pb.EnsureConfState(cs)
	snap := &pb.Snapshot{}
	ok, err = s.get(groupKey(group, kindSnapshot), snap)
	if err != nil {
		return nil, fmt.Errorf("raft: group %d: load snapshot: %w", group, err)
	}
	if ok {
		m.snapMeta = pb.EnsureSnapshotMetadata(snap.GetMetadata())
	}
	v, closer, err := s.db.Get(groupKey(group, kindTruncated))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("raft: group %d: load truncated state: %w", group, err)
	default:
		if len(v) != 16 {
			closer.Close()
			return nil, fmt.Errorf("raft: group %d: truncated state of %d bytes: %w", group, len(v), ErrCorruption)
		}
		m.truncIdx, m.truncTerm = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
		closer.Close()
	}
	// The last entry: the greatest entry key of the group.
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: entryKey(group, 0),
		UpperBound: groupKey(group, kindEntry+1),
	})
	if err != nil {
		return nil, fmt.Errorf("raft: group %d: scan log: %w", group, err)
	}
	m.last = m.truncIdx
	if it.Last() {
		m.last = binary.BigEndian.Uint64(it.Key()[10:])
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("raft: group %d: scan log: %w", group, err)
	}
	if m.last < m.truncIdx {
		return nil, fmt.Errorf("raft: group %d: last entry %d before truncation %d: %w", group, m.last, m.truncIdx, ErrCorruption)
	}
	m.cacheFirst = m.last + 1
	return gs, nil
}

// empty reports whether the group has never persisted anything.
func (gs *Storage) empty() bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.mu.hard == nil && gs.mu.snapMeta == nil && gs.mu.last == 0
}

// InitialState implements etcd raft's Storage.
func (gs *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var hs *pb.HardState
	if gs.mu.hard != nil {
		hs = proto.CloneOf(gs.mu.hard)
	}
	return hs, proto.CloneOf(gs.mu.conf), nil
}

// Entries implements etcd raft's Storage: [lo, hi) up to maxSize bytes
// but at least one entry.
func (gs *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	m := &gs.mu
	if lo <= m.truncIdx {
		return nil, etcdraft.ErrCompacted
	}
	if hi > m.last+1 || lo > hi {
		return nil, fmt.Errorf("raft: group %d: entries [%d, %d) beyond last %d: %w", gs.group, lo, hi, m.last, etcdraft.ErrUnavailable)
	}
	if lo == hi {
		return nil, nil
	}
	var out []*pb.Entry
	var size uint64
	if lo >= m.cacheFirst {
		for _, e := range m.cache[lo-m.cacheFirst : hi-m.cacheFirst] {
			size += uint64(proto.Size(e))
			if len(out) > 0 && size > maxSize {
				break
			}
			out = append(out, e)
		}
		return out, nil
	}
	it, err := gs.st.db.NewIter(&pebble.IterOptions{
		LowerBound: entryKey(gs.group, lo),
		UpperBound: entryKey(gs.group, hi),
	})
	if err != nil {
		return nil, fmt.Errorf("raft: group %d: read entries: %w", gs.group, err)
	}
	defer it.Close()
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("raft: group %d: read entry %d: %w", gs.group, want, err)
		}
		e := &pb.Entry{}
		if err := proto.Unmarshal(v, e); err != nil || e.GetIndex() != want {
			return nil, fmt.Errorf("raft: group %d: entry %d (got %d): %w", gs.group, want, e.GetIndex(), ErrCorruption)
		}
		size += uint64(len(v))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
		want++
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("raft: group %d: read entries: %w", gs.group, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("raft: group %d: entry %d missing: %w", gs.group, lo, etcdraft.ErrUnavailable)
	}
	return out, nil
}

// raiseCommit raises the stored commit index to applied, the index a
// state machine applied, if it is behind; applied must be in the log.
func (gs *Storage) raiseCommit(applied uint64) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	m := &gs.mu
	if applied <= m.hard.GetCommit() {
		return nil
	}
	if applied > m.last {
		return fmt.Errorf("raft: group %d: state machine applied %d past the last entry %d: %w", gs.group, applied, m.last, ErrCorruption)
	}
	hs := proto.CloneOf(m.hard)
	if hs == nil {
		hs = &pb.HardState{}
	}
	hs.Commit = new(applied)
	m.hard = hs
	return nil
}

// Term implements etcd raft's Storage.
func (gs *Storage) Term(i uint64) (uint64, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	m := &gs.mu
	switch {
	case i < m.truncIdx:
		return 0, etcdraft.ErrCompacted
	case i == m.truncIdx:
		return m.truncTerm, nil
	case i > m.last:
		return 0, etcdraft.ErrUnavailable
	case i >= m.cacheFirst:
		return m.cache[i-m.cacheFirst].GetTerm(), nil
	}
	e := &pb.Entry{}
	ok, err := gs.st.get(entryKey(gs.group, i), e)
	if err != nil {
		return 0, fmt.Errorf("raft: group %d: term of %d: %w", gs.group, i, err)
	}
	if !ok {
		return 0, etcdraft.ErrUnavailable
	}
	return e.GetTerm(), nil
}

// LastIndex implements etcd raft's Storage.
func (gs *Storage) LastIndex() (uint64, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.mu.last, nil
}

// FirstIndex implements etcd raft's Storage.
func (gs *Storage) FirstIndex() (uint64, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.mu.truncIdx + 1, nil
}

// Snapshot implements etcd raft's Storage: the last snapshot saved,
// with its data.
func (gs *Storage) Snapshot() (*pb.Snapshot, error) {
	gs.mu.Lock()
	has := gs.mu.snapMeta != nil
	gs.mu.Unlock()
	snap := &pb.Snapshot{}
	if has {
		if _, err := gs.st.get(groupKey(gs.group, kindSnapshot), snap); err != nil {
			return nil, fmt.Errorf("raft: group %d: read snapshot: %w", gs.group, err)
		}
	}
	return pb.EnsureSnapshot(snap), nil
}

// snapshotMeta returns the last snapshot's metadata; nil if none.
func (gs *Storage) snapshotMeta() *pb.SnapshotMetadata {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.mu.snapMeta
}

// confState returns the stored configuration.
func (gs *Storage) confState() *pb.ConfState {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.mu.conf
}

// pendingWrite is what a Ready adds to a group's storage: staged into
// the host's batch, then published in memory once the batch committed.
type pendingWrite struct {
	snap    *pb.Snapshot // non-empty snapshot or nil
	entries []*pb.Entry
	hard    *pb.HardState // nil: unchanged
}

// stage adds w to b.
func (gs *Storage) stage(b *pebble.Batch, w pendingWrite) error {
	gs.mu.Lock()
	last := gs.mu.last
	gs.mu.Unlock()
	if w.snap != nil {
		meta := w.snap.GetMetadata()
		raw, err := proto.Marshal(w.snap)
		if err != nil {
			return fmt.Errorf("raft: group %d: encode snapshot: %w", gs.group, err)
		}
		cs, err := proto.Marshal(meta.GetConfState())
		if err != nil {
			return fmt.Errorf("raft: group %d: encode conf state: %w", gs.group, err)
		}
		_ = b.Set(groupKey(gs.group, kindSnapshot), raw, nil)
		_ = b.Set(groupKey(gs.group, kindConfState), cs, nil)
		_ = b.Set(groupKey(gs.group, kindTruncated), truncValue(meta.GetIndex(), meta.GetTerm()), nil)
		// The snapshot replaces the whole log.
		_ = b.DeleteRange(entryKey(gs.group, 0), groupKey(gs.group, kindEntry+1), nil)
		last = meta.GetIndex()
	}
	if len(w.entries) > 0 {
		first := w.entries[0].GetIndex()
		if first <= last {
			// Entries from first on are replaced.
			_ = b.DeleteRange(entryKey(gs.group, first), entryKey(gs.group, last+1), nil)
		}
		for _, e := range w.entries {
			raw, err := proto.Marshal(e)
			if err != nil {
				return fmt.Errorf("raft: group %d: encode entry %d: %w", gs.group, e.GetIndex(), err)
			}
			_ = b.Set(entryKey(gs.group, e.GetIndex()), raw, nil)
		}
	}
	if w.hard != nil {
		raw, err := proto.Marshal(w.hard)
		if err != nil {
			return fmt.Errorf("raft: group %d: encode hard state: %w", gs.group, err)
		}
		_ = b.Set(groupKey(gs.group, kindHardState), raw, nil)
	}
	return nil
}

// publish makes w, now durable, visible to raft.
func (gs *Storage) publish(w pendingWrite) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	m := &gs.mu
	if w.snap != nil {
		meta := w.snap.GetMetadata()
		m.snapMeta = meta
		m.conf = meta.GetConfState()
		m.truncIdx, m.truncTerm = meta.GetIndex(), meta.GetTerm()
		m.last = meta.GetIndex()
		m.cache, m.cacheFirst = nil, m.last+1
	}
	if len(w.entries) > 0 {
		first := w.entries[0].GetIndex()
		switch {
		case first < m.cacheFirst:
			m.cache, m.cacheFirst = nil, first
		default:
			m.cache = m.cache[:first-m.cacheFirst]
		}
		m.cache = append(m.cache, w.entries...)
		if n := len(m.cache); n > entryCacheSize {
			drop := n - entryCacheSize
			m.cache = append([]*pb.Entry(nil), m.cache[drop:]...)
			m.cacheFirst += uint64(drop)
		}
		m.last = w.entries[len(w.entries)-1].GetIndex()
	}
	if w.hard != nil {
		m.hard = w.hard
	}
}

func truncValue(index, term uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, index), term)
}

// stageConfState adds cs, the configuration after a conf change was
// applied, to b; publishConfState makes it current once b committed.
func (gs *Storage) stageConfState(b *pebble.Batch, cs *pb.ConfState) error {
	raw, err := proto.Marshal(cs)
	if err != nil {
		return fmt.Errorf("raft: group %d: encode conf state: %w", gs.group, err)
	}
	_ = b.Set(groupKey(gs.group, kindConfState), raw, nil)
	return nil
}

func (gs *Storage) publishConfState(cs *pb.ConfState) {
	gs.mu.Lock()
	gs.mu.conf = cs
	gs.mu.Unlock()
}

// saveSnapshot durably records snap, made by this node's state machine
// at an applied index; the log is left alone (see compact).
func (gs *Storage) saveSnapshot(snap *pb.Snapshot) error {
	meta := snap.GetMetadata()
	gs.mu.Lock()
	prev := gs.mu.snapMeta
	gs.mu.Unlock()
	if prev != nil && meta.GetIndex() <= prev.GetIndex() {
		return etcdraft.ErrSnapOutOfDate
	}
	raw, err := proto.Marshal(snap)
	if err != nil {
		return fmt.Errorf("raft: group %d: encode snapshot: %w", gs.group, err)
	}
	if err := gs.st.db.Set(groupKey(gs.group, kindSnapshot), raw, pebble.Sync); err != nil {
		return fmt.Errorf("raft: group %d: save snapshot at %d: %w", gs.group, meta.GetIndex(), err)
	}
	gs.mu.Lock()
	gs.mu.snapMeta = meta
	gs.mu.Unlock()
	return nil
}

// compact deletes the entries up to and including index, which must not
// pass the last snapshot.
func (gs *Storage) compact(index uint64) error {
	gs.mu.Lock()
	trunc, snap := gs.mu.truncIdx, gs.mu.snapMeta
	gs.mu.Unlock()
	if index <= trunc {
		return etcdraft.ErrCompacted
	}
	if snap == nil || index > snap.GetIndex() {
		return fmt.Errorf("raft: group %d: compact to %d past the snapshot: %w", gs.group, index, ErrNotSnapshotted)
	}
	term, err := gs.Term(index)
	if err != nil {
		return fmt.Errorf("raft: group %d: compact to %d: %w", gs.group, index, err)
	}
	b := gs.st.db.NewBatch()
	defer b.Close()
	_ = b.Set(groupKey(gs.group, kindTruncated), truncValue(index, term), nil)
	_ = b.DeleteRange(entryKey(gs.group, 0), entryKey(gs.group, index+1), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("raft: group %d: compact to %d: %w", gs.group, index, err)
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	m := &gs.mu
	m.truncIdx, m.truncTerm = index, term
	if index >= m.cacheFirst {
		m.cache = append([]*pb.Entry(nil), m.cache[index+1-m.cacheFirst:]...)
		m.cacheFirst = index + 1
	}
	return nil
}

// pebbleLogger keeps pebble's informational chatter out of the log and
// passes its errors on.
type pebbleLogger struct{ log *slog.Logger }

func (pebbleLogger) Infof(string, ...any) {}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("raft storage: " + fmt.Sprintf(format, args...))
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error("raft storage: fatal: " + fmt.Sprintf(format, args...))
	panic(fmt.Sprintf("pebble: "+format, args...))
}
