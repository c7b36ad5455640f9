package raft

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/warren-mq/warren/internal/testutil"
)

// Ensure a node survives power cuts while proposals flow: each cut
// freezes the node's driver between two rounds, keeps its state
// machine's state as of then (as if it were durable at every Apply) and
// a crash clone of its pebble file system (what was synced, and a random
// part of what was not), cuts it off so nothing it does later reaches
// the others, and reopens it on them. The node must open
// (its log holds every entry its state machine applied: entries are
// synced before they are applied), apply nothing twice, and end with
// the others' state; every proposal acknowledged must be applied once.
// With snapshots every 30 entries, a node also restarts from its own
// snapshot, or catches up from the leader's.
func TestPowerCut(t *testing.T) {
	t.Run("log", func(t *testing.T) { testPowerCut(t, Config{}) })
	t.Run("snapshots", func(t *testing.T) { testPowerCut(t, Config{SnapshotEntries: 30, CatchUpEntries: 5}) })
}

func testPowerCut(t *testing.T, cfg Config) {
	seed := testutil.Seed(t, "WARREN_RAFT_POWERCUT_SEED")
	rng := rand.New(rand.NewPCG(seed, 0))
	c := newTestClusterFS(t, 3, cfg, func(uint64) vfs.FS { return vfs.NewCrashableMem() })
	c.startGroupAll(1)
	c.waitLeader(1)

	// A proposer goroutine per node; a node being cut refuses with
	// ErrClosed, an outcome left open, so such values are not retried.
	var mu sync.Mutex
	acked := map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	hosts := func(id uint64) *Host {
		mu.Lock()
		defer mu.Unlock()
		return c.hosts[id]
	}
	for _, id := range c.ids {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				h := hosts(id)
				if h == nil {
					time.Sleep(testTick)
					continue
				}
				v := fmt.Sprintf("n%d-%d", id, i)
				pctx, pcancel := context.WithTimeout(ctx, waitFor)
				_, err := h.Propose(pctx, 1, []byte(v))
				pcancel()
				if err != nil {
					time.Sleep(testTick) // no leader, or this node is being cut
					continue
				}
				mu.Lock()
				acked[v] = true
				mu.Unlock()
			}
		})
	}

	const cuts = 6
	for cut := range cuts {
		// Let some proposals commit between cuts.
		mu.Lock()
		base := len(acked)
		mu.Unlock()
		eventually(t, "proposals to commit", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= base+15
		})
		victim := c.ids[rng.IntN(len(c.ids))]
		pct := []int{0, 50, 100}[rng.IntN(3)]
		h := hosts(victim)
		frozen, release := make(chan struct{}), make(chan struct{})
		h.enqueue(func() {
			close(frozen)
			<-release
		})
		<-frozen
		state, err := c.sms[victim][1].Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		clone := c.fs[victim].(*vfs.MemFS).CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))})
		// Nothing the node does after the cut may reach the others: it
		// would acknowledge entries the clone does not have.
		c.net.setDown(victim, true)
		close(release)
		mu.Lock()
		c.close(victim)
		mu.Unlock()

		if cfg.SnapshotEntries != 0 && cut%2 == 0 {
			// Stay down while the others snapshot and compact past
			// this node's log: it catches up from a snapshot.
			mu.Lock()
			base := len(acked)
			mu.Unlock()
			eventually(t, "proposals to commit without the cut node", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(acked) >= base+2*int(cfg.SnapshotEntries)
			})
		}
		sm := &memSM{}
		if err := sm.Restore(state); err != nil {
			t.Fatal(err)
		}
		sm.restores = 0 // count the host's only
		c.fs[victim] = clone
		c.sms[victim][1] = sm
		mu.Lock()
		c.open(victim)
		mu.Unlock()
		if err := hosts(victim).StartGroup(1, c.ids, sm); err != nil {
			t.Fatalf("seed %d, cut %d of node %d, %d%% unsynced kept: restart: %v", seed, cut, victim, pct, err)
		}
		c.net.setDown(victim, false)
	}
	cancel()
	wg.Wait()

	lead := c.waitLeader(1)
	c.barrier(lead, 1)
	want := c.values(lead, 1)
	c.checkSame(1, c.ids, want)
	seen := map[string]int{}
	for _, v := range want {
		seen[v]++
	}
	mu.Lock()
	defer mu.Unlock()
	for v := range acked {
		if seen[v] != 1 {
			t.Fatalf("seed %d: acknowledged %q applied %d times", seed, v, seen[v])
		}
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("seed %d: %q applied %d times", seed, v, n)
		}
	}
	restores := 0
	for _, id := range c.ids {
		_, n, _ := c.sms[id][1].snapshot()
		restores += n
	}
	t.Logf("%d cuts, %d values applied, %d acknowledged, %d snapshots restored", cuts, len(want), len(acked), restores)
}
