package raft

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// members returns node id's voters of group.
func (c *testCluster) members(id, group uint64) []uint64 {
	c.t.Helper()
	m, err := c.hosts[id].Members(group)
	if err != nil {
		c.t.Fatalf("node %d: members of group %d: %v", id, group, err)
	}
	return m
}

// changeMember runs change (AddMember or RemoveMember of node on
// proposer's host) until it is applied there, retrying what raft drops.
func (c *testCluster) changeMember(proposer uint64, add bool, node uint64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		var err error
		if add {
			err = c.hosts[proposer].AddMember(actx, 1, node)
		} else {
			err = c.hosts[proposer].RemoveMember(actx, 1, node)
		}
		acancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			c.t.Fatalf("node %d: change member %d (add %v): %v", proposer, node, add, err)
		}
		// Dropped, unknown or timed out: the next try is a no-op if it
		// was applied meanwhile.
		time.Sleep(testTick)
	}
}

// Ensure a member removed from three (its disk lost) leaves a group of
// two that commits with both and not with one; that the membership
// survives restarts; and that a node with a new id added to the group
// catches up from a snapshot and counts for the majority.
func TestRemoveAndAddMember(t *testing.T) {
	c := newTestCluster(t, 3, Config{SnapshotEntries: 5, CatchUpEntries: 1})
	c.startGroupAll(1)
	lead := c.waitLeader(1)
	want := []string{"a"}
	c.propose(lead, 1, "a")

	// A follower's disk is lost: it is removed through the other follower
	// (the change is forwarded to the leader).
	gone := others(c.ids, lead)[0]
	other := others(others(c.ids, lead), gone)[0]
	c.close(gone)
	c.changeMember(other, false, gone)
	two := others(c.ids, gone)
	for _, id := range two {
		c.barrier(id, 1)
		if got := c.members(id, 1); !slices.Equal(got, two) {
			t.Fatalf("node %d: members %v, want %v", id, got, two)
		}
	}
	for _, v := range []string{"b", "c", "d", "e", "f", "g"} {
		c.propose(two[0], 1, v)
		want = append(want, v)
	}
	c.checkSame(1, two, want)

	// Two of two are needed: with one down the other commits nothing.
	c.net.setDown(two[1], true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*c.cfg.TickInterval)
	_, err := c.hosts[two[0]].Propose(ctx, 1, []byte("alone"))
	cancel()
	if err == nil {
		t.Fatal("a group of two committed with one member down")
	}
	c.net.setDown(two[1], false)
	c.waitLeader(1, two...)

	// Restarts keep the membership (stored ConfState, and snapshots).
	for _, id := range two {
		c.close(id)
		c.open(id)
		c.startGroup(id, 1) // peers ignored: the group has state
	}
	c.waitLeader(1, two...)
	for _, id := range two {
		if got := c.members(id, 1); !slices.Equal(got, two) {
			t.Fatalf("node %d after restart: members %v, want %v", id, got, two)
		}
	}
	c.propose(two[1], 1, "h")
	want = append(want, "h")

	// A node under a new id joins empty and catches up.
	const fresh = 4
	c.ids = append(c.ids, fresh)
	c.dirs[fresh] = filepath.Join(t.TempDir(), "n4")
	c.sms[fresh] = map[uint64]*memSM{1: {}}
	c.open(fresh)
	if err := c.hosts[fresh].StartGroup(1, nil, c.sms[fresh][1]); err != nil {
		t.Fatal(err)
	}
	c.changeMember(two[0], true, fresh)
	three := append(slices.Clone(two), fresh)
	slices.Sort(three)
	c.propose(fresh, 1, "i")
	want = append(want, "i")
	for _, id := range three {
		c.barrier(id, 1)
		if got := c.members(id, 1); !slices.Equal(got, three) {
			t.Fatalf("node %d: members %v, want %v", id, got, three)
		}
		got := c.values(id, 1)
		got = slices.DeleteFunc(got, func(v string) bool { return v == "alone" }) // its outcome was left open
		if !slices.Equal(got, want) {
			t.Fatalf("node %d applied %q, want %q", id, got, want)
		}
	}
	if _, restores, _ := c.sms[fresh][1].snapshot(); restores == 0 {
		t.Error("the new member caught up without a snapshot; want one (the log was compacted)")
	}
	// With three again, one down is fine.
	c.net.setDown(two[0], true)
	c.propose(fresh, 1, "j")
	c.net.setDown(two[0], false)
}

// Ensure removing the leader works: it steps down, the others elect a
// leader among themselves and go on committing.
func TestRemoveLeader(t *testing.T) {
	c := newTestCluster(t, 3, Config{})
	c.startGroupAll(1)
	lead := c.waitLeader(1)
	c.propose(lead, 1, "a")
	c.changeMember(lead, false, lead)
	rest := others(c.ids, lead)
	next := c.waitLeader(1, rest...)
	if next == lead {
		t.Fatalf("the removed leader %d still leads", lead)
	}
	c.propose(rest[0], 1, "b")
	c.checkSame(1, rest, []string{"a", "b"})
	if got := c.members(next, 1); !slices.Equal(got, rest) {
		t.Fatalf("members %v, want %v", got, rest)
	}
	if got := c.members(lead, 1); !slices.Equal(got, rest) {
		t.Fatalf("the removed node's members %v, want %v", got, rest)
	}
	if l := c.hosts[lead].Leader(1); l == lead {
		t.Fatalf("the removed node still thinks it leads")
	}
	// Refusals: the last voter, and a no-op.
	if err := c.hosts[next].RemoveMember(context.Background(), 1, 99); err != nil {
		t.Fatalf("removing a non-member: %v, want nil", err)
	}
	single := newTestCluster(t, 1, Config{})
	single.startGroupAll(1)
	single.waitLeader(1)
	if err := single.hosts[1].RemoveMember(context.Background(), 1, 1); !errors.Is(err, ErrMemberChange) {
		t.Fatalf("removing the only voter: %v, want ErrMemberChange", err)
	}
}

// Ensure two changes proposed together on the leader both end: raft
// takes one at a time and replaces the other by an empty entry, which
// the second call reports as ErrProposalDropped rather than waiting for
// its context.
func TestConcurrentMemberChanges(t *testing.T) {
	c := newTestCluster(t, 3, Config{})
	c.startGroupAll(1)
	lead := c.waitLeader(1)
	errs := make(chan error, 2)
	for _, id := range []uint64{4, 5} {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			errs <- c.hosts[lead].AddMember(ctx, 1, id)
		}()
	}
	var dropped int
	for range 2 {
		switch err := c.recvErr(errs, lead, 1, "AddMember"); {
		case errors.Is(err, ErrProposalDropped):
			dropped++
		case err != nil:
			t.Fatalf("AddMember: %v", err)
		}
	}
	m := c.members(lead, 1)
	if want := 5 - dropped; len(m) != want {
		t.Fatalf("members %v after %d dropped, want %d", m, dropped, want)
	}
	t.Logf("%d of 2 changes dropped", dropped)
}
