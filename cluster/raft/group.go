package raft

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// group is one raft group on a host. All fields but lead are owned by
// the host's driver goroutine.
type group struct {
	id      uint64
	h       *Host
	rn      *etcdraft.RawNode
	storage *Storage
	sm      StateMachine

	lead atomic.Uint64 // the leader as last seen; read by Host.Leader

	applied   uint64        // last entry applied (state machine or host)
	term      uint64        // raft term as of the last Ready
	leader    uint64        // leader as of the last Ready
	snapIndex uint64        // index of the last snapshot
	conf      *pb.ConfState // configuration as of applied
	confDirty bool          // conf is staged in the round's batch, not yet committed
	// snapDue: a conf change was applied since the last snapshot. etcd
	// raft refuses a snapshot whose ConfState lacks the node it is sent
	// to, so a new member needs one taken after the change that added it.
	snapDue bool
	ticks   uint64

	proposals map[uint64]*proposal // pending, by sequence number
	byIndex   map[uint64]uint64    // log index -> sequence of the proposal seen there
	reads     map[uint64]*readReq  // pending barriers, by sequence number
}

type proposal struct {
	done        chan proposeResult // 1-buffered, written once
	index, term uint64             // where its entry was seen in the log; 0 if not yet
	// onLeader: a configuration change proposed on the leader, which
	// appends it in the same round or drops it (another is pending).
	onLeader bool
}

type proposeResult struct {
	index uint64
	err   error
}

type readReq struct {
	done   chan error // 1-buffered, written once
	rctx   []byte
	index  uint64 // the read index, once known
	known  bool
	issued uint64 // tick of the last ReadIndex call
}

// newGroup loads or bootstraps group id.
//
// REQUIRES: on the driver.
func (h *Host) newGroup(id uint64, peers []uint64, sm StateMachine) (*group, error) {
	storage, err := loadStorage(h.st, id)
	if err != nil {
		return nil, err
	}
	g := &group{
		id:        id,
		h:         h,
		storage:   storage,
		sm:        sm,
		proposals: make(map[uint64]*proposal),
		byIndex:   make(map[uint64]uint64),
		reads:     make(map[uint64]*readReq),
	}
	empty := storage.empty()
	if empty && sm.Applied() > 0 {
		return nil, fmt.Errorf("raft: group %d: state machine applied %d but the raft log is empty: %w", id, sm.Applied(), ErrCorruption)
	}
	if !empty {
		g.applied = sm.Applied()
		if meta := storage.snapshotMeta(); meta != nil {
			g.snapIndex = meta.GetIndex()
			if g.applied < meta.GetIndex() {
				snap, err := storage.Snapshot()
				if err != nil {
					return nil, err
				}
				if err := sm.Restore(snap.GetData()); err != nil {
					return nil, fmt.Errorf("raft: group %d: restore snapshot at %d: %w", id, meta.GetIndex(), err)
				}
				g.applied = meta.GetIndex()
			}
		}
		// The commit index is written without a sync when nothing else
		// changed, so after a power cut it may be behind what the state
		// machine applied; the entries up to it were synced when
		// appended, and were committed, since they were applied.
		if err := storage.raiseCommit(g.applied); err != nil {
			return nil, err
		}
	}
	g.conf = storage.confState()
	hs, _, _ := storage.InitialState()
	g.term = hs.GetTerm()
	cfg := &etcdraft.Config{
		ID:              h.cfg.NodeID,
		ElectionTick:    h.cfg.ElectionTicks,
		HeartbeatTick:   h.cfg.HeartbeatTicks,
		Storage:         storage,
		Applied:         g.applied,
		MaxSizePerMsg:   h.cfg.MaxSizePerMsg,
		MaxInflightMsgs: h.cfg.MaxInflightMsgs,
		CheckQuorum:     true,
		PreVote:         true,
		// A leader removed from the group stops leading it at once.
		StepDownOnRemoval: true,
		Logger:            newRaftLogger(h.cfg.Logger, h.cfg.NodeID, id),
	}
	rn, err := etcdraft.NewRawNode(cfg)
	if err != nil {
		return nil, fmt.Errorf("raft: group %d: %w", id, err)
	}
	if empty && len(peers) > 0 {
		ps := make([]etcdraft.Peer, len(peers))
		for i, p := range peers {
			ps[i] = etcdraft.Peer{ID: p}
		}
		if err := rn.Bootstrap(ps); err != nil {
			return nil, fmt.Errorf("raft: group %d: bootstrap: %w", id, err)
		}
	}
	g.rn = rn
	return g, nil
}

func (g *group) tick() {
	g.ticks++
	g.rn.Tick()
	// A read index request is lost when there is no leader or a message
	// is: ask again after an election timeout.
	for _, r := range g.reads {
		if !r.known && g.ticks-r.issued >= uint64(g.h.cfg.ElectionTicks) {
			r.issued = g.ticks
			g.rn.ReadIndex(r.rctx)
		}
	}
}

// noteAppended records where this host's pending proposals landed in
// the log just persisted.
func (g *group) noteAppended(ents []*pb.Entry) {
	if len(g.proposals) == 0 {
		return
	}
	for _, e := range ents {
		id, err := entryProposalID(e)
		if err != nil || id.node != g.h.cfg.NodeID || id.incarnation != g.h.incarnation {
			continue
		}
		p, ok := g.proposals[id.seq]
		if !ok {
			continue
		}
		p.index, p.term = e.GetIndex(), e.GetTerm()
		g.byIndex[p.index] = id.seq
	}
	// A configuration change the leader did not append was replaced by
	// an empty entry: another change is pending.
	for seq, p := range g.proposals {
		if p.onLeader && p.index == 0 {
			g.resolve(seq, 0, fmt.Errorf("raft: group %d: configuration change refused while another is pending: %w", g.id, ErrProposalDropped))
		}
	}
}

// noteLeader records the leader and term of a Ready. A proposal this
// node forwarded whose entry it has not seen in its log when the leader
// or the term changes may have been lost with the old leader, or may
// still be committed: it ends with ErrProposalUnknown rather than wait
// for its context. (A proposal made on the leader was appended in the
// round it was made, so its index is known and apply settles it.)
func (g *group) noteLeader(rd *etcdraft.Ready) {
	changed := false
	if rd.SoftState != nil && rd.SoftState.Lead != g.leader {
		g.leader = rd.SoftState.Lead
		g.lead.Store(g.leader)
		changed = true
	}
	if t := rd.HardState.GetTerm(); t > g.term {
		g.term = t
		changed = true
	}
	if !changed {
		return
	}
	for seq, p := range g.proposals {
		if p.index == 0 {
			g.resolve(seq, 0, fmt.Errorf("raft: group %d: leader changed before the forwarded proposal reached this node's log: %w", g.id, ErrProposalUnknown))
		}
	}
}

// noteReadStates records the read indexes raft answered.
func (g *group) noteReadStates(rss []etcdraft.ReadState) {
	for _, rs := range rss {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		if r, ok := g.reads[binary.BigEndian.Uint64(rs.RequestCtx)]; ok {
			r.index, r.known = rs.Index, true
		}
	}
}

// completeReads ends the barriers whose read index is applied.
func (g *group) completeReads() {
	for seq, r := range g.reads {
		if r.known && r.index <= g.applied {
			r.done <- nil
			delete(g.reads, seq)
		}
	}
}

// restore restores rd's snapshot, if any, into the state machine.
func (g *group) restore(rd *etcdraft.Ready) error {
	if etcdraft.IsEmptySnap(rd.Snapshot) {
		return nil
	}
	meta := rd.Snapshot.GetMetadata()
	if err := g.sm.Restore(rd.Snapshot.GetData()); err != nil {
		return fmt.Errorf("restore snapshot at %d: %w", meta.GetIndex(), err)
	}
	g.applied, g.snapIndex = meta.GetIndex(), meta.GetIndex()
	g.conf = meta.GetConfState()
	// The entries at or before the snapshot are gone: a pending
	// proposal there cannot be checked.
	for i, seq := range g.byIndex {
		if i > meta.GetIndex() {
			continue
		}
		err := ErrProposalUnknown
		if p := g.proposals[seq]; p != nil && p.term > meta.GetTerm() {
			err = ErrProposalDropped // no committed entry before the snapshot has a later term
		}
		g.resolve(seq, 0, fmt.Errorf("raft: group %d: %w", g.id, err))
		delete(g.byIndex, i)
	}
	return nil
}

// applyEntries applies committed entries from the start of ents and
// returns how many. Configuration changes go to the RawNode and their
// ConfState into b; it stops before a normal entry that follows one, so
// that the caller commits b first: a restart resumes after the state
// machine's applied index, past the change, and needs it stored.
func (g *group) applyEntries(ents []*pb.Entry, b *pebble.Batch) (int, error) {
	var batch []Entry
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := g.sm.Apply(batch)
		batch = nil // the state machine may keep the slice
		return err
	}
	ids := make([]proposalID, 0, len(ents)) // ids[i] is the id of ents[i]
	for _, e := range ents {
		if e.GetType() == pb.EntryNormal && g.confDirty {
			break
		}
		var id proposalID
		switch e.GetType() {
		case pb.EntryNormal:
			var payload []byte
			var err error
			id, payload, err = decodeEntryData(e.GetData())
			if err != nil {
				return 0, fmt.Errorf("entry %d: %w", e.GetIndex(), err)
			}
			if len(e.GetData()) > 0 {
				batch = append(batch, Entry{Index: e.GetIndex(), Term: e.GetTerm(), Data: payload})
			}
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			if err := flush(); err != nil {
				return 0, err
			}
			cc, err := decodeConfChange(e)
			if err != nil {
				return 0, err
			}
			if id, _, err = decodeEntryData(cc.context); err != nil {
				return 0, fmt.Errorf("conf change at %d: %w", e.GetIndex(), err)
			}
			if err := g.applyConfChange(cc.cc, len(cc.context) > 0, b); err != nil {
				return 0, err
			}
		}
		ids = append(ids, id)
	}
	if err := flush(); err != nil {
		return 0, err
	}
	for i, id := range ids {
		g.resolveApplied(ents[i].GetIndex(), id)
	}
	if len(ids) > 0 {
		g.applied = ents[len(ids)-1].GetIndex()
	}
	return len(ids), nil
}

// applyConfChange applies the conf change cc and stages the resulting
// ConfState into b. proposed is false for the bootstrap's changes,
// which need no snapshot (every first member has them in its log).
func (g *group) applyConfChange(cc pb.ConfChangeI, proposed bool, b *pebble.Batch) error {
	cs := g.rn.ApplyConfChange(cc)
	if err := g.storage.stageConfState(b, cs); err != nil {
		return err
	}
	g.h.cfg.Logger.Info("raft: configuration changed", "group", g.id, "voters", cs.GetVoters())
	g.conf = cs
	g.confDirty = true
	g.snapDue = g.snapDue || proposed
	return nil
}

// resolveApplied ends the proposal the entry at index carries, and the
// one seen at index before if another entry was committed there.
func (g *group) resolveApplied(index uint64, id proposalID) {
	if seq, ok := g.byIndex[index]; ok {
		delete(g.byIndex, index)
		if id.node != g.h.cfg.NodeID || id.incarnation != g.h.incarnation || id.seq != seq {
			g.resolve(seq, 0, fmt.Errorf("raft: group %d: another entry committed at %d: %w", g.id, index, ErrProposalDropped))
		}
	}
	if id.node == g.h.cfg.NodeID && id.incarnation == g.h.incarnation {
		g.resolve(id.seq, index, nil)
	}
}

func (g *group) resolve(seq, index uint64, err error) {
	p, ok := g.proposals[seq]
	if !ok {
		return
	}
	delete(g.proposals, seq)
	if p.index != 0 && g.byIndex[p.index] == seq {
		delete(g.byIndex, p.index)
	}
	p.done <- proposeResult{index: index, err: err}
}

func (g *group) forgetProposal(seq uint64) {
	if p, ok := g.proposals[seq]; ok {
		delete(g.proposals, seq)
		if p.index != 0 && g.byIndex[p.index] == seq {
			delete(g.byIndex, p.index)
		}
	}
}

// maybeSnapshot takes a snapshot and compacts the log once
// SnapshotEntries entries were applied since the last one, or a
// configuration change was.
func (g *group) maybeSnapshot() error {
	cfg := &g.h.cfg
	if g.applied < g.snapIndex+cfg.SnapshotEntries && !(g.snapDue && g.applied > g.snapIndex) {
		return nil
	}
	data, err := g.sm.Snapshot()
	if err != nil {
		return fmt.Errorf("state machine snapshot at %d: %w", g.applied, err)
	}
	term, err := g.storage.Term(g.applied)
	if err != nil {
		return fmt.Errorf("term of %d: %w", g.applied, err)
	}
	snap := &pb.Snapshot{
		Data: data,
		Metadata: &pb.SnapshotMetadata{
			ConfState: proto.CloneOf(g.conf),
			Index:     new(g.applied),
			Term:      new(term),
		},
	}
	if err := g.storage.saveSnapshot(snap); err != nil {
		return err
	}
	g.snapIndex = g.applied
	g.snapDue = false
	if g.applied > cfg.CatchUpEntries {
		if err := g.storage.compact(g.applied - cfg.CatchUpEntries); err != nil && err != etcdraft.ErrCompacted {
			return err
		}
	}
	return nil
}

// failAll ends every pending call with err.
func (g *group) failAll(err error) {
	for seq := range g.proposals {
		g.resolve(seq, 0, err)
	}
	for seq, r := range g.reads {
		r.done <- err
		delete(g.reads, seq)
	}
}
