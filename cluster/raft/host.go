package raft

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Host runs every raft group of one node from one driver goroutine.
type Host struct {
	// Static after Open.
	cfg         Config
	st          *store
	incarnation uint64        // random per Open; part of proposal ids
	wake        chan struct{} // 1-buffered: reqs or inbox not empty
	stop        chan struct{} // closed by Close
	done        chan struct{} // closed when the driver has exited

	mu struct {
		sync.Mutex
		closed bool
		reqs   []func()          // run by the driver, in order
		inbox  []inbound         // received messages
		groups map[uint64]*group // for Leader, read without the driver
	}

	// Owned by the driver goroutine.
	groups map[uint64]*group
	// touched are the groups a tick, message or request reached since
	// the last round, or that had more to do after it: the only ones a
	// round asks for a Ready.
	touched map[uint64]*group
	seq     uint64 // last proposal or read sequence number
	err     error  // sticky storage error; the driver stopped on it
}

type inbound struct {
	from uint64
	envs []Envelope
}

// Open opens the pebble directory cfg.Dir and starts the host's driver.
func Open(cfg Config) (*Host, error) {
	cfg = cfg.ensureDefaults()
	if cfg.NodeID == 0 {
		return nil, errors.New("raft: Config.NodeID is 0")
	}
	if cfg.Transport == nil {
		return nil, errors.New("raft: Config.Transport is nil")
	}
	st, err := openStore(cfg.Dir, cfg.Logger, cfg.FS)
	if err != nil {
		return nil, err
	}
	var inc [8]byte
	_, _ = rand.Read(inc[:])
	h := &Host{
		cfg:         cfg,
		st:          st,
		incarnation: binary.BigEndian.Uint64(inc[:]),
		wake:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		groups:      make(map[uint64]*group),
		touched:     make(map[uint64]*group),
	}
	h.mu.groups = make(map[uint64]*group)
	labels := pprof.Labels("warren", "raft-host", "node", fmt.Sprint(cfg.NodeID))
	go pprof.Do(context.Background(), labels, func(context.Context) { h.run() })
	return h, nil
}

// NodeID returns the host's node id.
func (h *Host) NodeID() uint64 { return h.cfg.NodeID }

// Close stops the driver, fails every pending call with ErrClosed and
// closes the storage. The groups' state stays on disk for the next Open.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		<-h.done
		return nil
	}
	h.mu.closed = true
	h.mu.Unlock()
	close(h.stop)
	<-h.done
	if err := h.st.db.Close(); err != nil {
		return fmt.Errorf("raft: close storage %s: %w", h.cfg.Dir, err)
	}
	return nil
}

// enqueue hands fn to the driver; false once the host is closed.
func (h *Host) enqueue(fn func()) bool {
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return false
	}
	h.mu.reqs = append(h.mu.reqs, fn)
	h.mu.Unlock()
	h.signal()
	return true
}

func (h *Host) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// exec runs fn on the driver and returns its error.
func (h *Host) exec(fn func() error) error {
	ch := make(chan error, 1)
	if !h.enqueue(func() {
		if h.err != nil {
			ch <- h.err
			return
		}
		ch <- fn()
	}) {
		return ErrClosed
	}
	select {
	case err := <-ch:
		return err
	case <-h.done:
		select {
		case err := <-ch:
			return err
		default:
			return ErrClosed
		}
	}
}

// Receive hands the host messages that node from sent, and the host
// keeps them. It does not block on the driver and does not bound what
// waits for it; messages for groups not started here, or not addressed
// to this node from node from, are dropped.
func (h *Host) Receive(from uint64, envs []Envelope) {
	if len(envs) == 0 {
		return
	}
	h.mu.Lock()
	if h.mu.closed {
		h.mu.Unlock()
		return
	}
	h.mu.inbox = append(h.mu.inbox, inbound{from: from, envs: envs})
	h.mu.Unlock()
	h.signal()
}

// ReportUnreachable tells every group that node did not get a message
// sent to it, so their leaders stop streaming appends to it and probe.
func (h *Host) ReportUnreachable(node uint64) {
	h.enqueue(func() {
		for _, g := range h.groups {
			g.rn.ReportUnreachable(node)
			h.touch(g)
		}
	})
}

// StartGroup starts group id with state machine sm. A group with state
// in storage restarts from it (peers is then ignored); otherwise the
// group is bootstrapped with peers as its voters, which must be the same
// on every node; with no peers an empty group starts, which joins when a
// leader that has it in its configuration sends it a snapshot.
func (h *Host) StartGroup(id uint64, peers []uint64, sm StateMachine) error {
	return h.exec(func() error {
		if _, ok := h.groups[id]; ok {
			return fmt.Errorf("raft: group %d: %w", id, ErrGroupExists)
		}
		g, err := h.newGroup(id, peers, sm)
		if err != nil {
			return err
		}
		h.groups[id] = g
		h.touch(g)
		h.mu.Lock()
		h.mu.groups[id] = g
		h.mu.Unlock()
		return nil
	})
}

// StopGroup stops driving group id on this host; its pending proposals
// and barriers fail with ErrGroupStopped. Its state stays in storage.
func (h *Host) StopGroup(id uint64) error {
	return h.exec(func() error {
		g, ok := h.lookup(id)
		if !ok {
			return fmt.Errorf("raft: group %d: %w", id, ErrGroupNotFound)
		}
		h.removeGroup(g, fmt.Errorf("raft: group %d: %w", id, ErrGroupStopped))
		return nil
	})
}

// lookup returns group id and marks it touched.
//
// REQUIRES: on the driver.
func (h *Host) lookup(id uint64) (*group, bool) {
	g, ok := h.groups[id]
	if ok {
		h.touch(g)
	}
	return g, ok
}

// REQUIRES: on the driver.
func (h *Host) touch(g *group) { h.touched[g.id] = g }

// REQUIRES: on the driver.
func (h *Host) removeGroup(g *group, err error) {
	delete(h.groups, g.id)
	delete(h.touched, g.id)
	h.mu.Lock()
	delete(h.mu.groups, g.id)
	h.mu.Unlock()
	g.failAll(err)
}

// Propose proposes data to group and returns the entry's index once it
// is applied on this node. Proposals made on a follower are forwarded to
// the leader. ErrProposalDropped says the entry was not and will not be
// applied (retry); a context error, ErrProposalUnknown or ErrClosed
// leave the outcome open. ctx should have a deadline: a forwarded
// proposal lost on the way, with no leader change, is ended by it only.
func (h *Host) Propose(ctx context.Context, group uint64, data []byte) (uint64, error) {
	p := &proposal{done: make(chan proposeResult, 1)}
	var seq uint64
	err := h.exec(func() error {
		g, ok := h.lookup(group)
		if !ok {
			return fmt.Errorf("raft: group %d: %w", group, ErrGroupNotFound)
		}
		h.seq++
		seq = h.seq
		d := appendEntryData(nil, proposalID{h.cfg.NodeID, h.incarnation, seq}, data)
		if err := g.rn.Propose(d); err != nil {
			if errors.Is(err, etcdraft.ErrProposalDropped) {
				return fmt.Errorf("raft: group %d: %w", group, ErrProposalDropped)
			}
			return fmt.Errorf("raft: group %d: propose: %w", group, err)
		}
		g.proposals[seq] = p
		return nil
	})
	if err != nil {
		return 0, err
	}
	return h.await(ctx, group, seq, p)
}

// await waits for proposal p, number seq of group, to be settled, or
// for ctx; then the driver forgets it.
func (h *Host) await(ctx context.Context, group, seq uint64, p *proposal) (uint64, error) {
	select {
	case r := <-p.done:
		return r.index, r.err
	case <-ctx.Done():
		h.enqueue(func() {
			if g, ok := h.lookup(group); ok {
				g.forgetProposal(seq)
			}
		})
		return 0, fmt.Errorf("raft: group %d: proposal: %w", group, ctx.Err())
	}
}

// Barrier returns once this node has applied every entry the leader of
// group had committed when Barrier was called (raft's ReadIndex): reads
// of the local state machine after it are linearizable.
func (h *Host) Barrier(ctx context.Context, group uint64) error {
	r := &readReq{done: make(chan error, 1)}
	var seq uint64
	err := h.exec(func() error {
		g, ok := h.lookup(group)
		if !ok {
			return fmt.Errorf("raft: group %d: %w", group, ErrGroupNotFound)
		}
		h.seq++
		seq = h.seq
		r.rctx = binary.BigEndian.AppendUint64(nil, seq)
		r.issued = g.ticks
		g.reads[seq] = r
		g.rn.ReadIndex(r.rctx)
		return nil
	})
	if err != nil {
		return err
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		h.enqueue(func() {
			if g, ok := h.lookup(group); ok {
				delete(g.reads, seq)
			}
		})
		return fmt.Errorf("raft: group %d: barrier: %w", group, ctx.Err())
	}
}

// Leader returns the leader of group as this node knows it, 0 if none
// or the group is not started here.
func (h *Host) Leader(group uint64) uint64 {
	h.mu.Lock()
	g := h.mu.groups[group]
	h.mu.Unlock()
	if g == nil {
		return 0
	}
	return g.lead.Load()
}

// Status returns etcd raft's status of group on this node.
func (h *Host) Status(group uint64) (etcdraft.Status, error) {
	var st etcdraft.Status
	err := h.exec(func() error {
		g, ok := h.lookup(group)
		if !ok {
			return fmt.Errorf("raft: group %d: %w", group, ErrGroupNotFound)
		}
		st = g.rn.Status()
		return nil
	})
	return st, err
}

// TransferLeadership asks group's leader, which should be this node, to
// hand leadership to node to. It returns at once; watch Leader.
func (h *Host) TransferLeadership(group, to uint64) error {
	return h.exec(func() error {
		g, ok := h.lookup(group)
		if !ok {
			return fmt.Errorf("raft: group %d: %w", group, ErrGroupNotFound)
		}
		g.rn.TransferLeader(to)
		return nil
	})
}

// Compact deletes group's log entries up to and including index, which
// must not pass the group's last snapshot (ErrNotSnapshotted). The host
// compacts on its own after each automatic snapshot.
func (h *Host) Compact(group, index uint64) error {
	return h.exec(func() error {
		g, ok := h.lookup(group)
		if !ok {
			return fmt.Errorf("raft: group %d: %w", group, ErrGroupNotFound)
		}
		return g.storage.compact(index)
	})
}

// run is the driver loop: ticks, requests and messages in, then one
// round of Ready handling for every group.
func (h *Host) run() {
	defer close(h.done)
	t := time.NewTicker(h.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			h.shutdown()
			return
		case <-t.C:
			if h.err == nil {
				for _, g := range h.groups {
					g.tick()
					h.touch(g)
				}
			}
		case <-h.wake:
		}
		h.drain()
		if h.err != nil {
			continue
		}
		if more := h.handleReady(); more {
			h.signal()
		}
	}
}

// drain runs the queued requests and steps the received messages.
func (h *Host) drain() {
	h.mu.Lock()
	reqs, inbox := h.mu.reqs, h.mu.inbox
	h.mu.reqs, h.mu.inbox = nil, nil
	h.mu.Unlock()
	for _, fn := range reqs {
		fn()
	}
	if h.err != nil {
		return
	}
	for _, in := range inbox {
		for _, env := range in.envs {
			g, ok := h.groups[env.Group]
			m := env.Msg
			if !ok || m == nil || m.GetTo() != h.cfg.NodeID || m.GetFrom() != in.from {
				continue
			}
			h.touch(g)
			if err := g.rn.Step(m); err != nil {
				h.cfg.Logger.Debug("raft: step", "group", g.id, "from", in.from, "type", m.GetType().String(), "err", err)
			}
		}
	}
}

func (h *Host) shutdown() {
	h.drain()
	for _, g := range h.groups {
		h.removeGroup(g, ErrClosed)
	}
}

// readyGroup is one group's Ready in a round.
type readyGroup struct {
	g      *group
	rd     etcdraft.Ready
	w      pendingWrite
	pos    int  // committed entries applied so far
	failed bool // the group was stopped in this round
}

// handleReady collects every group's Ready, persists them all in one
// synced batch, sends their messages batched per node, applies their
// committed entries and advances them. It reports whether a group has
// more to do.
func (h *Host) handleReady() bool {
	var rs []*readyGroup
	for _, g := range h.touched {
		if !g.rn.HasReady() {
			continue
		}
		rd := g.rn.Ready()
		w := pendingWrite{entries: rd.Entries}
		if !etcdraft.IsEmptySnap(rd.Snapshot) {
			w.snap = rd.Snapshot
		}
		if !etcdraft.IsEmptyHardState(rd.HardState) {
			w.hard = rd.HardState
		}
		rs = append(rs, &readyGroup{g: g, rd: rd, w: w})
	}
	clear(h.touched)
	if len(rs) == 0 {
		return false
	}

	// 1. Persist: entries, hard states and snapshots before any message
	// goes out.
	b := h.st.db.NewBatch()
	mustSync, write := false, false
	for _, r := range rs {
		if r.w.snap == nil && len(r.w.entries) == 0 && r.w.hard == nil {
			continue
		}
		write = true
		mustSync = mustSync || r.rd.MustSync || r.w.snap != nil
		if err := r.g.storage.stage(b, r.w); err != nil {
			b.Close()
			h.failStorage(err)
			return false
		}
	}
	if write {
		opt := pebble.NoSync
		if mustSync {
			opt = pebble.Sync
		}
		if err := b.Commit(opt); err != nil {
			b.Close()
			h.failStorage(fmt.Errorf("raft: commit batch: %w", err))
			return false
		}
	}
	b.Close()
	for _, r := range rs {
		r.g.storage.publish(r.w)
		r.g.noteAppended(r.rd.Entries)
	}

	// 2. Send, one Send per destination node.
	out := make(map[uint64][]Envelope)
	type snapSent struct {
		g  *group
		to uint64
	}
	var snaps []snapSent
	for _, r := range rs {
		for _, m := range r.rd.Messages {
			out[m.GetTo()] = append(out[m.GetTo()], Envelope{Group: r.g.id, Msg: m})
			if m.GetType() == pb.MsgSnap {
				snaps = append(snaps, snapSent{r.g, m.GetTo()})
			}
		}
	}
	for _, to := range slices.Sorted(maps.Keys(out)) {
		h.cfg.Transport.Send(to, out[to])
	}
	// The transport does not report delivery: the leader probes the
	// follower again after the snapshot and sends another if it is lost.
	for _, s := range snaps {
		s.g.rn.ReportSnapshot(s.to, etcdraft.SnapshotFinish)
	}

	// 3. Apply. Entries after a configuration change wait until its
	// ConfState is committed; one synced batch per pass serves every
	// group (bootstrapping many groups is a run of conf changes each).
	todo := make([]*readyGroup, 0, len(rs))
	for _, r := range rs {
		g := r.g
		g.noteLeader(&r.rd)
		g.noteReadStates(r.rd.ReadStates)
		if err := g.restore(&r.rd); err != nil {
			h.stopFailed(r, err)
			continue
		}
		if len(r.rd.CommittedEntries) > 0 {
			todo = append(todo, r)
		}
	}
	for len(todo) > 0 {
		cb := h.st.db.NewBatch()
		var dirty []*group
		next := todo[:0]
		for _, r := range todo {
			n, err := r.g.applyEntries(r.rd.CommittedEntries[r.pos:], cb)
			if err != nil {
				h.stopFailed(r, err)
				continue
			}
			r.pos += n
			if r.g.confDirty {
				dirty = append(dirty, r.g)
			}
			if r.pos < len(r.rd.CommittedEntries) {
				next = append(next, r)
			}
		}
		if len(dirty) > 0 {
			if err := cb.Commit(pebble.Sync); err != nil {
				cb.Close()
				h.failStorage(fmt.Errorf("raft: commit conf states: %w", err))
				return false
			}
			for _, g := range dirty {
				g.storage.publishConfState(g.conf)
				g.confDirty = false
			}
		}
		cb.Close()
		todo = next
	}

	// 4. Advance.
	more := false
	for _, r := range rs {
		if r.failed {
			continue
		}
		g := r.g
		g.rn.Advance(r.rd)
		g.completeReads()
		if err := g.maybeSnapshot(); err != nil {
			h.cfg.Logger.Error("raft: snapshot", "group", g.id, "err", err)
		}
		if g.rn.HasReady() {
			h.touch(g)
			more = true
		}
	}
	return more
}

// stopFailed stops r's group after its state machine or log failed.
func (h *Host) stopFailed(r *readyGroup, err error) {
	r.failed = true
	h.cfg.Logger.Error("raft: group stopped", "group", r.g.id, "err", err)
	h.removeGroup(r.g, fmt.Errorf("raft: group %d: %w: %w", r.g.id, ErrGroupStopped, err))
}

// failStorage stops the host on a storage error: raft may not go on
// without its writes.
func (h *Host) failStorage(err error) {
	h.cfg.Logger.Error("raft: storage failed; host stopped", "err", err)
	h.err = err
	for _, g := range h.groups {
		h.removeGroup(g, err)
	}
}
