package raft

import (
	"context"
	"errors"
	"fmt"
	"slices"

	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Membership changes. A group's voters change one at a time through
// raft's configuration changes (pb.ConfChange, one node added or
// removed: no joint consensus is needed for a single change). The
// change's Context carries the proposal's id (the 25-byte header of
// "Entries" in doc.go, without payload), so the proposer can tell when
// it is applied as it does for Propose. Applying it stores the new
// ConfState with the group's state (kindConfState) before any later
// entry is applied, and snapshots carry it, so a restart or a node
// catching up from a snapshot has the configuration of its applied
// index.

// ErrMemberChange is a membership change refused before it was
// proposed: the group would be left without voters.
var ErrMemberChange = errors.New("raft: membership change refused")

// AddMember proposes node as a voter of group and returns once the
// change is applied on this node (nil at once if node already is one).
// The new node starts the group with no peers (StartGroup) and catches
// up from the leader's log or a snapshot. Errors are Propose's; raft
// drops a change proposed while another is pending (ErrProposalDropped
// on the leader, a context error or ErrProposalUnknown on a follower):
// check Members and retry.
func (h *Host) AddMember(ctx context.Context, group, node uint64) error {
	return h.changeMember(ctx, group, pb.ConfChangeAddNode, node)
}

// RemoveMember proposes removing node from group's voters and returns
// once the change is applied on this node (nil at once if node is not
// one). A removed leader steps down (etcd raft's StepDownOnRemoval) and
// the others elect one among themselves. A removed node that still runs
// gets no more messages from the group; stop its group (StopGroup) or
// its host. Errors are AddMember's.
func (h *Host) RemoveMember(ctx context.Context, group, node uint64) error {
	return h.changeMember(ctx, group, pb.ConfChangeRemoveNode, node)
}

// Members returns group's voters as of the last change applied on this
// node, sorted.
func (h *Host) Members(group uint64) ([]uint64, error) {
	var out []uint64
	err := h.exec(func() error {
		g, ok := h.lookup(group)
		if !ok {
			return fmt.Errorf("raft: group %d: %w", group, ErrGroupNotFound)
		}
		out = slices.Sorted(slices.Values(g.conf.GetVoters()))
		return nil
	})
	return out, err
}

func (h *Host) changeMember(ctx context.Context, group uint64, typ pb.ConfChangeType, node uint64) error {
	if node == 0 {
		return fmt.Errorf("raft: group %d: member 0: %w", group, ErrMemberChange)
	}
	p := &proposal{done: make(chan proposeResult, 1)}
	var seq uint64
	noop := false
	err := h.exec(func() error {
		g, ok := h.lookup(group)
		if !ok {
			return fmt.Errorf("raft: group %d: %w", group, ErrGroupNotFound)
		}
		voters := g.conf.GetVoters()
		switch {
		case typ == pb.ConfChangeAddNode && slices.Contains(voters, node),
			typ == pb.ConfChangeRemoveNode && !slices.Contains(voters, node):
			noop = true
			return nil
		case typ == pb.ConfChangeRemoveNode && len(voters) == 1:
			return fmt.Errorf("raft: group %d: remove %x, its only voter: %w", group, node, ErrMemberChange)
		}
		h.seq++
		seq = h.seq
		cc := &pb.ConfChange{
			Type:    typ.Enum(),
			NodeId:  new(node),
			Context: appendEntryData(nil, proposalID{h.cfg.NodeID, h.incarnation, seq}, nil),
		}
		if err := g.rn.ProposeConfChange(cc); err != nil {
			if errors.Is(err, etcdraft.ErrProposalDropped) {
				return fmt.Errorf("raft: group %d: %w", group, ErrProposalDropped)
			}
			return fmt.Errorf("raft: group %d: propose conf change: %w", group, err)
		}
		// The leader appends at once, or replaces the change by an empty
		// entry when another is pending: noteAppended tells.
		p.onLeader = g.rn.BasicStatus().RaftState == etcdraft.StateLeader
		g.proposals[seq] = p
		return nil
	})
	if err != nil || noop {
		return err
	}
	_, err = h.await(ctx, group, seq, p)
	return err
}

// entryProposalID returns the id of the proposal e carries: from its
// data (a normal entry) or its Context (a configuration change; zero
// for those raft makes itself, the bootstrap's).
func entryProposalID(e *pb.Entry) (proposalID, error) {
	switch e.GetType() {
	case pb.EntryConfChange, pb.EntryConfChangeV2:
		cc, err := decodeConfChange(e)
		if err != nil {
			return proposalID{}, err
		}
		id, _, err := decodeEntryData(cc.context)
		return id, err
	}
	id, _, err := decodeEntryData(e.GetData())
	return id, err
}

// confChange is a decoded configuration change entry.
type confChange struct {
	cc      pb.ConfChangeI
	context []byte
}

func decodeConfChange(e *pb.Entry) (confChange, error) {
	if e.GetType() == pb.EntryConfChange {
		c := &pb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), c); err != nil {
			return confChange{}, fmt.Errorf("conf change at %d: %w: %v", e.GetIndex(), ErrCorruption, err)
		}
		return confChange{c, c.GetContext()}, nil
	}
	c := &pb.ConfChangeV2{}
	if err := proto.Unmarshal(e.GetData(), c); err != nil {
		return confChange{}, fmt.Errorf("conf change at %d: %w: %v", e.GetIndex(), ErrCorruption, err)
	}
	return confChange{c, c.GetContext()}, nil
}
