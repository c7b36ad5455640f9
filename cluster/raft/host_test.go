package raft

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// Ensure three hosts elect one leader and apply proposals made on any
// of them in one order on all three, also when links delay and reorder.
func TestThreeHostsCommitInOrder(t *testing.T) {
	for _, delayed := range []bool{false, true} {
		t.Run(fmt.Sprintf("delayed=%v", delayed), func(t *testing.T) {
			c := newTestCluster(t, 3, Config{})
			if delayed {
				for _, a := range c.ids {
					for _, b := range c.ids {
						c.net.setDelay(a, b, time.Duration(a+2*b)*time.Millisecond)
					}
				}
			}
			c.startGroupAll(1)
			lead := c.waitLeader(1)

			// Sequential proposals from every node: the log order is the
			// proposal order.
			var want []string
			for i := range 30 {
				id := c.ids[i%3]
				v := fmt.Sprintf("seq-%d-from-%d", i, id)
				c.propose(id, 1, v)
				want = append(want, v)
			}
			c.checkSame(1, c.ids, want)

			// Concurrent proposals: one order, the same on every node,
			// each value once.
			var wg sync.WaitGroup
			for _, id := range c.ids {
				wg.Go(func() {
					for i := range 20 {
						if _, err := c.tryPropose(id, 1, fmt.Sprintf("conc-%d-from-%d", i, id)); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			got := c.values(lead, 1)
			if len(got) != 90 {
				t.Fatalf("leader %d applied %d values, want 90", lead, len(got))
			}
			seen := make(map[string]int)
			for _, v := range got {
				seen[v]++
			}
			for _, id := range c.ids {
				for i := range 20 {
					if v := fmt.Sprintf("conc-%d-from-%d", i, id); seen[v] != 1 {
						t.Fatalf("%q applied %d times, want 1", v, seen[v])
					}
				}
			}
			c.checkSame(1, c.ids, got)
		})
	}
}

// Ensure that when the leader is cut off, the others elect a new one and
// go on committing, the old leader's proposal fails with
// ErrProposalDropped once the new leader's log replaces it, and the
// healed node catches up.
func TestLeaderIsolated(t *testing.T) {
	c := newTestCluster(t, 3, Config{})
	c.startGroupAll(1)
	old := c.waitLeader(1)
	var want []string
	for i := range 5 {
		v := fmt.Sprintf("before-%d", i)
		c.propose(old, 1, v)
		want = append(want, v)
	}
	c.checkSame(1, c.ids, want)

	old = c.waitLeader(1) // still, unless an election intervened
	c.net.setDown(old, true)
	lost := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		_, err := c.hosts[old].Propose(ctx, 1, []byte("lost"))
		lost <- err
	}()
	rest := others(c.ids, old)
	lead := c.waitLeader(1, rest...)
	for i := range 10 {
		v := fmt.Sprintf("after-%d", i)
		c.propose(rest[i%2], 1, v)
		want = append(want, v)
	}
	c.checkSame(1, rest, want)
	if got := c.values(old, 1); len(got) != 5 {
		t.Fatalf("isolated old leader applied %d values, want 5: %q", len(got), got)
	}

	c.net.setDown(old, false)
	err := c.recvErr(lost, old, 1, "old leader's proposal")
	t.Logf("old leader's proposal: %v", err)
	if !errors.Is(err, ErrProposalDropped) {
		t.Fatalf("old leader's proposal: %v, want ErrProposalDropped", err)
	}
	c.checkSame(1, c.ids, want)
	if l := c.waitLeader(1); l != lead {
		t.Logf("leader moved from %d to %d after the heal", lead, l)
	}
}

// Ensure a minority never commits: neither an isolated leader (cut both
// ways, or only its outgoing messages) nor an isolated follower
// applies a proposal made on its side, while the majority goes on.
func TestMinorityNeverCommits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		leader   bool // cut the leader rather than a follower
		oneWay   bool // cut only the minority's outgoing messages
		wantDrop bool // the minority's proposal must end ErrProposalDropped after the heal
	}{
		{name: "leader", leader: true, wantDrop: true},
		{name: "leader-outgoing", leader: true, oneWay: true, wantDrop: true},
		{name: "follower"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, 3, Config{})
			c.startGroupAll(1)
			lead := c.waitLeader(1)
			c.propose(lead, 1, "first")
			c.checkSame(1, c.ids, []string{"first"})

			minor := lead
			if !tc.leader {
				minor = others(c.ids, lead)[0]
			}
			major := others(c.ids, minor)
			if tc.oneWay {
				for _, id := range major {
					c.net.setCut(minor, id, true)
				}
			} else {
				c.net.partition([]uint64{minor}, major, true)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := make(chan error, 1)
			go func() {
				_, err := c.hosts[minor].Propose(ctx, 1, []byte("minority"))
				res <- err
			}()
			newLead := c.waitLeader(1, major...)
			want := []string{"first"}
			for i := range 10 {
				v := fmt.Sprintf("majority-%d", i)
				c.propose(newLead, 1, v)
				want = append(want, v)
			}
			c.checkSame(1, major, want)
			// The proposal may have ended already (a follower that lost
			// its leader ends a forwarded proposal), but not applied.
			var minorErr error
			ended := false
			select {
			case minorErr = <-res:
				ended = true
				if minorErr == nil {
					t.Fatal("the minority's proposal was applied")
				}
			default:
			}
			if got := c.values(minor, 1); !slices.Equal(got, []string{"first"}) {
				t.Fatalf("minority node %d applied %q, want only %q", minor, got, "first")
			}

			// Heal: the minority catches up without its proposal.
			if tc.oneWay {
				for _, id := range major {
					c.net.setCut(minor, id, false)
				}
			} else {
				c.net.partition([]uint64{minor}, major, false)
			}
			if !tc.wantDrop {
				// The follower forwarded it into the cut link: it ends
				// when the follower sees its leader change, else by its
				// context.
				cancel()
			}
			if !ended {
				minorErr = c.recvErr(res, minor, 1, "minority's proposal")
			}
			switch {
			case tc.wantDrop && !errors.Is(minorErr, ErrProposalDropped):
				t.Fatalf("minority's proposal: %v, want ErrProposalDropped", minorErr)
			case !tc.wantDrop && !errors.Is(minorErr, ErrProposalUnknown) && !errors.Is(minorErr, context.Canceled):
				t.Fatalf("minority's proposal: %v, want ErrProposalUnknown or context.Canceled", minorErr)
			}
			t.Logf("minority's proposal: %v", minorErr)
			c.checkSame(1, c.ids, want)
		})
	}
}

// Ensure a host reopened on its directory keeps its log and term, does
// not apply again what its state machine recorded, and catches up; and
// that a whole cluster restarts.
func TestRestartFromStorage(t *testing.T) {
	c := newTestCluster(t, 3, Config{})
	c.startGroupAll(1)
	lead := c.waitLeader(1)
	var want []string
	for i := range 20 {
		v := fmt.Sprintf("v%d", i)
		c.propose(lead, 1, v)
		want = append(want, v)
	}
	c.checkSame(1, c.ids, want)

	down := others(c.ids, lead)[0]
	st, err := c.hosts[down].Status(1)
	if err != nil {
		t.Fatal(err)
	}
	smApplied := c.sms[down][1].Applied()
	c.close(down)
	rest := others(c.ids, down)
	for i := range 10 {
		v := fmt.Sprintf("w%d", i)
		c.propose(rest[i%2], 1, v)
		want = append(want, v)
	}

	// Reopen cut off: the log and hard state are the ones it had.
	c.net.setDown(down, true)
	c.open(down)
	c.startGroup(down, 1)
	st2, err := c.hosts[down].Status(1)
	if err != nil {
		t.Fatal(err)
	}
	if st2.GetTerm() < st.GetTerm() || st2.GetCommit() < st.GetCommit() {
		t.Fatalf("reopened with term %d commit %d, had term %d commit %d", st2.GetTerm(), st2.GetCommit(), st.GetTerm(), st.GetCommit())
	}
	if st2.Applied < smApplied {
		t.Fatalf("reopened with applied %d, state machine recorded %d", st2.Applied, smApplied)
	}
	last, err := c.storage(down, 1).LastIndex()
	if err != nil || last < st.GetCommit() {
		t.Fatalf("reopened with last index %d (%v), had committed %d", last, err, st.GetCommit())
	}
	if got := c.values(down, 1); !slices.Equal(got, want[:20]) { // nothing applied again
		t.Fatalf("reopened node applied %q, want %q", got, want[:20])
	}
	c.net.setDown(down, false)
	c.checkSame(1, c.ids, want) // memSM fails on an entry applied twice

	// Every host restarts; the group elects and goes on.
	for _, id := range c.ids {
		c.close(id)
	}
	for _, id := range c.ids {
		c.open(id)
		c.startGroup(id, 1)
	}
	lead = c.waitLeader(1)
	c.propose(lead, 1, "after-restart")
	want = append(want, "after-restart")
	c.checkSame(1, c.ids, want)

	// A state machine that recorded nothing gets every entry again.
	c.close(down)
	c.sms[down][1] = &memSM{}
	c.open(down)
	c.startGroup(down, 1)
	c.checkSame(1, []uint64{down}, want)
}

// Ensure a host down while the others snapshot and compact their logs
// gets a snapshot, restores it and applies what follows it.
func TestSnapshotCatchUp(t *testing.T) {
	c := newTestCluster(t, 3, Config{SnapshotEntries: 20, CatchUpEntries: 5})
	c.startGroupAll(1)
	lead := c.waitLeader(1)
	var want []string
	for i := range 10 {
		v := fmt.Sprintf("a%d", i)
		c.propose(lead, 1, v)
		want = append(want, v)
	}
	c.checkSame(1, c.ids, want)

	down := others(c.ids, lead)[0]
	c.close(down)
	rest := others(c.ids, down)
	for i := range 100 {
		v := fmt.Sprintf("b%d", i)
		c.propose(rest[i%2], 1, v)
		want = append(want, v)
	}
	for _, id := range rest {
		c.barrier(id, 1)
		first, _ := c.storage(id, 1).FirstIndex()
		if first <= 20 {
			t.Fatalf("node %d: first index %d after 110 entries, want a compacted log", id, first)
		}
	}

	c.open(down)
	c.startGroup(down, 1)
	c.checkSame(1, c.ids, want)
	if _, restores, _ := c.sms[down][1].snapshot(); restores == 0 {
		t.Fatalf("node %d caught up without restoring a snapshot", down)
	}
	for i := range 5 {
		v := fmt.Sprintf("c%d", i)
		c.propose(down, 1, v)
		want = append(want, v)
	}
	c.checkSame(1, c.ids, want)
}

// Ensure one driver goroutine per host runs 200 groups: all elect and
// commit, and starting them starts no goroutine.
func TestManyGroups(t *testing.T) {
	const groups = 200
	c := newTestCluster(t, 3, Config{TickInterval: 20 * time.Millisecond})
	start := time.Now()
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup // the test's own goroutines, done before counting
	for _, id := range c.ids {
		sms := make(map[uint64]*memSM)
		for g := uint64(1); g <= groups; g++ {
			sms[g] = &memSM{}
		}
		c.sms[id] = sms
		for g := uint64(1); g <= groups; g++ {
			wg.Go(func() {
				if err := c.hosts[id].StartGroup(g, c.ids, sms[g]); err != nil {
					t.Errorf("node %d: start group %d: %v", id, g, err)
				}
			})
		}
	}
	wg.Wait()
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Fatalf("starting %d groups on 3 hosts went from %d to %d goroutines", groups, before, after)
	}
	t.Logf("started in %v", time.Since(start))
	eventually(t, fmt.Sprintf("all %d groups to elect", groups), func() bool {
		for g := uint64(1); g <= groups; g++ {
			lead := c.hosts[1].Leader(g)
			if lead == 0 || c.hosts[2].Leader(g) != lead || c.hosts[3].Leader(g) != lead {
				return false
			}
		}
		return true
	})
	t.Logf("elected in %v", time.Since(start))
	for g := uint64(1); g <= groups; g++ {
		wg.Go(func() {
			if _, err := c.tryPropose(c.ids[g%3], g, fmt.Sprintf("group-%d", g)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("proposals applied in %v", time.Since(start))
	for g := uint64(1); g <= groups; g++ {
		for _, id := range c.ids {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), waitFor)
				defer cancel()
				if err := c.hosts[id].Barrier(ctx, g); err != nil {
					t.Errorf("node %d: barrier on group %d: %v", id, g, err)
				}
			})
		}
	}
	wg.Wait()
	for g := uint64(1); g <= groups; g++ {
		for _, id := range c.ids {
			if got, want := c.values(id, g), []string{fmt.Sprintf("group-%d", g)}; !slices.Equal(got, want) {
				t.Fatalf("node %d group %d applied %q, want %q", id, g, got, want)
			}
		}
	}
	t.Logf("checked in %v", time.Since(start))
}

// Ensure leadership moves where TransferLeadership asks, a stopped
// group fails its calls and restarts from storage, and a state machine
// error stops the group on that node only.
func TestTransferStopAndApplyError(t *testing.T) {
	c := newTestCluster(t, 3, Config{})
	c.startGroupAll(1)
	lead := c.waitLeader(1)
	c.propose(lead, 1, "a")

	to := others(c.ids, lead)[1]
	if err := c.hosts[lead].TransferLeadership(1, to); err != nil {
		t.Fatal(err)
	}
	eventually(t, fmt.Sprintf("node %d to lead after the transfer", to), func() bool {
		for _, id := range c.ids {
			if c.hosts[id].Leader(1) != to {
				return false
			}
		}
		return true
	})
	c.propose(lead, 1, "b")

	// Stop and restart a follower's group.
	f := others(c.ids, to)[0]
	if err := c.hosts[f].StopGroup(1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.hosts[f].Propose(context.Background(), 1, []byte("x")); !errors.Is(err, ErrGroupNotFound) {
		t.Fatalf("propose on a stopped group: %v, want ErrGroupNotFound", err)
	}
	if l := c.hosts[f].Leader(1); l != 0 {
		t.Fatalf("leader of a stopped group: %d, want 0", l)
	}
	c.propose(to, 1, "c")
	c.startGroup(f, 1)
	if err := c.hosts[f].StartGroup(1, c.ids, &memSM{}); !errors.Is(err, ErrGroupExists) {
		t.Fatalf("second StartGroup: %v, want ErrGroupExists", err)
	}
	c.checkSame(1, c.ids, []string{"a", "b", "c"})

	// The follower's state machine fails: its group stops there, the
	// others go on.
	c.sms[f][1].mu.Lock()
	c.sms[f][1].failAt = 1
	c.sms[f][1].mu.Unlock()
	c.propose(to, 1, "d")
	eventually(t, "the failed group to stop", func() bool {
		_, err := c.hosts[f].Status(1)
		return errors.Is(err, ErrGroupNotFound)
	})
	c.checkSame(1, others(c.ids, f), []string{"a", "b", "c", "d"})
}

// Ensure a proposal a follower forwarded into a lost link ends with
// ErrProposalUnknown when the leader changes, rather than waiting for
// its context, and that Close ends pending calls with ErrClosed.
func TestForwardedProposalLeaderChange(t *testing.T) {
	c := newTestCluster(t, 3, Config{})
	c.startGroupAll(1)
	lead := c.waitLeader(1)
	c.propose(lead, 1, "a")
	f1, f2 := others(c.ids, lead)[0], others(c.ids, lead)[1]
	c.checkSame(1, c.ids, []string{"a"})

	c.net.setCut(f1, lead, true)
	res := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		_, err := c.hosts[f1].Propose(ctx, 1, []byte("lost"))
		res <- err
	}()
	// Once f1's driver registered the proposal, it went into the cut
	// link.
	eventually(t, "the proposal to be pending", func() bool {
		n := 0
		_ = c.hosts[f1].exec(func() error {
			n = len(c.hosts[f1].groups[1].proposals)
			return nil
		})
		return n == 1
	})
	if err := c.hosts[lead].TransferLeadership(1, f2); err != nil {
		t.Fatal(err)
	}
	if err := c.recvErr(res, f1, 1, "forwarded proposal"); !errors.Is(err, ErrProposalUnknown) {
		t.Fatalf("forwarded proposal: %v, want ErrProposalUnknown", err)
	}
	c.net.setCut(f1, lead, false)
	c.propose(f2, 1, "b")
	c.checkSame(1, c.ids, []string{"a", "b"})

	// Close ends a pending barrier and proposal: f1 keeps hearing the
	// leader, but what it sends is lost.
	for _, id := range others(c.ids, f1) {
		c.net.setCut(f1, id, true)
	}
	errs := make(chan error, 2)
	go func() {
		_, err := c.hosts[f1].Propose(context.Background(), 1, []byte("closed"))
		errs <- err
	}()
	go func() { errs <- c.hosts[f1].Barrier(context.Background(), 1) }()
	eventually(t, "the calls to be pending", func() bool {
		n := 0
		_ = c.hosts[f1].exec(func() error {
			g := c.hosts[f1].groups[1]
			n = len(g.proposals) + len(g.reads)
			return nil
		})
		return n == 2
	})
	c.close(f1)
	for range 2 {
		var err error
		select {
		case err = <-errs:
		case <-time.After(waitFor):
			t.Fatal("pending calls not ended by Close")
		}
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("pending call after Close: %v, want ErrClosed", err)
		}
	}
}
