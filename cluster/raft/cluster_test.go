package raft

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/warren-mq/warren/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if leaks := testutil.LeakedGoroutines("cluster/raft."); leaks != "" {
		fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaks)
		code = 1
	}
	os.Exit(code)
}

// testCluster is hosts 1..n on a memNet, each with its own pebble
// directory and one memSM per group.
type testCluster struct {
	t     *testing.T
	net   *memNet
	ids   []uint64
	dirs  map[uint64]string
	fs    map[uint64]vfs.FS // nil: the OS's
	hosts map[uint64]*Host
	sms   map[uint64]map[uint64]*memSM // node -> group -> sm
	cfg   Config
}

// testTick is the tick of the tests: elections take ten of them.
const testTick = 10 * time.Millisecond

// waitFor bounds every wait of these tests; reaching it is a failure,
// not a measurement.
const waitFor = 20 * time.Second

func newTestCluster(t *testing.T, n int, cfg Config) *testCluster {
	t.Helper()
	return newTestClusterFS(t, n, cfg, nil)
}

// newTestClusterFS is newTestCluster with node id's pebble on fsFor(id).
func newTestClusterFS(t *testing.T, n int, cfg Config, fsFor func(id uint64) vfs.FS) *testCluster {
	t.Helper()
	if cfg.TickInterval == 0 {
		cfg.TickInterval = testTick
	}
	c := &testCluster{
		t:     t,
		net:   newMemNet(t),
		dirs:  make(map[uint64]string),
		fs:    make(map[uint64]vfs.FS),
		hosts: make(map[uint64]*Host),
		sms:   make(map[uint64]map[uint64]*memSM),
		cfg:   cfg,
	}
	root := t.TempDir()
	for i := 1; i <= n; i++ {
		id := uint64(i)
		c.ids = append(c.ids, id)
		c.dirs[id] = filepath.Join(root, fmt.Sprintf("n%d", id))
		c.sms[id] = make(map[uint64]*memSM)
		if fsFor != nil {
			c.fs[id] = fsFor(id)
		}
		c.open(id)
	}
	t.Cleanup(func() {
		for _, id := range c.ids {
			c.close(id)
		}
		c.net.wait()
	})
	return c
}

// open opens node id's host on its directory.
func (c *testCluster) open(id uint64) *Host {
	c.t.Helper()
	cfg := c.cfg
	cfg.NodeID = id
	cfg.Dir = c.dirs[id]
	cfg.FS = c.fs[id]
	cfg.Transport = c.net.transport(id)
	h, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("open host %d: %v", id, err)
	}
	c.hosts[id] = h
	c.net.attach(h)
	return h
}

// close closes node id's host, if open.
func (c *testCluster) close(id uint64) {
	c.t.Helper()
	h := c.hosts[id]
	if h == nil {
		return
	}
	c.net.detach(id)
	if err := h.Close(); err != nil {
		c.t.Errorf("close host %d: %v", id, err)
	}
	delete(c.hosts, id)
}

// startGroup starts group on node id with voters every node, with the
// node's memSM for the group (a new one the first time).
func (c *testCluster) startGroup(id, group uint64) {
	c.t.Helper()
	sm := c.sms[id][group]
	if sm == nil {
		sm = &memSM{}
		c.sms[id][group] = sm
	}
	if err := c.hosts[id].StartGroup(group, c.ids, sm); err != nil {
		c.t.Fatalf("node %d: start group %d: %v", id, group, err)
	}
}

func (c *testCluster) startGroupAll(group uint64) {
	for _, id := range c.ids {
		c.startGroup(id, group)
	}
}

// waitLeader waits until the nodes of among agree on a leader in among
// and returns it.
func (c *testCluster) waitLeader(group uint64, among ...uint64) uint64 {
	c.t.Helper()
	if len(among) == 0 {
		among = c.ids
	}
	var lead uint64
	eventually(c.t, fmt.Sprintf("a leader of group %d among %v", group, among), func() bool {
		lead = c.hosts[among[0]].Leader(group)
		if !slices.Contains(among, lead) {
			return false
		}
		for _, id := range among[1:] {
			if c.hosts[id].Leader(group) != lead {
				return false
			}
		}
		return true
	})
	return lead
}

// propose proposes value on node id until it is applied there,
// retrying dropped proposals (no leader yet, an election).
func (c *testCluster) propose(id, group uint64, value string) uint64 {
	c.t.Helper()
	index, err := c.tryPropose(id, group, value)
	if err != nil {
		c.t.Fatal(err)
	}
	return index
}

// tryPropose is propose for other goroutines than the test's.
func (c *testCluster) tryPropose(id, group uint64, value string) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for {
		index, err := c.hosts[id].Propose(ctx, group, []byte(value))
		if err == nil {
			return index, nil
		}
		switch {
		case ctx.Err() != nil:
			return 0, fmt.Errorf("node %d: propose %q to group %d: %w", id, value, group, err)
		case errors.Is(err, ErrProposalUnknown):
			// A forwarded proposal met a leader change: applied here once
			// everything committed is, or lost.
			if err := c.hosts[id].Barrier(ctx, group); err != nil {
				return 0, fmt.Errorf("node %d: barrier after %q to group %d: %w", id, value, group, err)
			}
			v, _, _ := c.sms[id][group].snapshot()
			if slices.Contains(v, value) {
				return 0, nil
			}
		case !errors.Is(err, ErrProposalDropped):
			return 0, fmt.Errorf("node %d: propose %q to group %d: %w", id, value, group, err)
		}
		time.Sleep(testTick)
	}
}

// barrier waits until node id has applied what group's leader had
// committed.
func (c *testCluster) barrier(id, group uint64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := c.hosts[id].Barrier(ctx, group); err != nil {
		c.t.Fatalf("node %d: barrier on group %d: %v", id, group, err)
	}
}

// values returns what node id's state machine of group applied, failing
// the test if it applied an entry twice.
func (c *testCluster) values(id, group uint64) []string {
	c.t.Helper()
	v, _, err := c.sms[id][group].snapshot()
	if err != nil {
		c.t.Fatalf("node %d group %d: %v", id, group, err)
	}
	return v
}

// checkSame checks that the nodes' state machines of group applied
// want, in order.
func (c *testCluster) checkSame(group uint64, nodes []uint64, want []string) {
	c.t.Helper()
	for _, id := range nodes {
		c.barrier(id, group)
		if got := c.values(id, group); !slices.Equal(got, want) {
			c.t.Fatalf("node %d group %d applied %d values %q, want %d %q", id, group, len(got), got, len(want), want)
		}
	}
}

// storage returns node id's Storage of group.
func (c *testCluster) storage(id, group uint64) *Storage {
	c.t.Helper()
	h := c.hosts[id]
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.mu.groups[group]
	if g == nil {
		c.t.Fatalf("node %d: no group %d", id, group)
	}
	return g.storage
}

// recvErr receives the error a goroutine of the test sends on ch,
// failing the test with the state of node id's group if it does not
// come.
func (c *testCluster) recvErr(ch <-chan error, id, group uint64, what string) error {
	c.t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(waitFor + 5*time.Second):
	}
	var pending []string
	_ = c.hosts[id].exec(func() error {
		if g := c.hosts[id].groups[group]; g != nil {
			for seq, p := range g.proposals {
				pending = append(pending, fmt.Sprintf("seq %d at %d/%d", seq, p.index, p.term))
			}
		}
		return nil
	})
	st, err := c.hosts[id].Status(group)
	c.t.Fatalf("%s: no answer; node %d: status %v (%v), pending %v", what, id, st, err, pending)
	return nil
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(testTick / 2)
	}
}

func others(ids []uint64, not uint64) []uint64 {
	var out []uint64
	for _, id := range ids {
		if id != not {
			out = append(out, id)
		}
	}
	return out
}
