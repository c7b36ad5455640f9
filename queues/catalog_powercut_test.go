package queues

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/warren-mq/warren/internal/testutil"
)

// Ensure the catalog keeps every change it reported done across a power
// cut: each put, delete and prefix delete returns after a synced pebble
// write ("persisted before the -ok reply"), so a crash clone of pebble's
// crashable in-memory file system, keeping what was synced and a random
// part of what was not, opens with exactly the state the calls left; and
// a stream id handed out is never handed out again.
func TestCatalogPowerCut(t *testing.T) {
	seed := testutil.Seed(t, "WARREN_POWERCUT_SEED")
	rng := rand.New(rand.NewPCG(seed, 0))
	log := slog.New(slog.DiscardHandler)
	fs := vfs.NewCrashableMem()
	c, err := openCatalogFS("catalog", log, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.close() }()
	model := map[string]string{}
	var lastID uint64
	cuts := 0
	for op := range 600 {
		key := fmt.Sprintf("t/%d/%d", rng.IntN(4), rng.IntN(40))
		switch r := rng.IntN(20); {
		case r < 12:
			v := fmt.Sprintf("v%d-%s", op, make([]byte, rng.IntN(500)))
			if err := c.put([]byte(key), v); err != nil {
				t.Fatal(err)
			}
			model[key] = v
		case r < 17:
			if err := c.delete([]byte(key)); err != nil {
				t.Fatal(err)
			}
			delete(model, key)
		case r < 18:
			prefix := fmt.Sprintf("t/%d/", rng.IntN(4))
			if err := c.deletePrefix([]byte(prefix)); err != nil {
				t.Fatal(err)
			}
			maps.DeleteFunc(model, func(k, _ string) bool { return len(k) >= len(prefix) && k[:len(prefix)] == prefix })
		default:
			id, err := c.nextStreamID()
			if err != nil {
				t.Fatal(err)
			}
			if id <= lastID {
				t.Fatalf("seed %d: stream id %d after %d", seed, id, lastID)
			}
			lastID = id
		}
		if op%40 != 39 {
			continue
		}
		cuts++
		pct := []int{0, 50, 100}[rng.IntN(3)]
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))})
		c2, err := openCatalogFS("catalog", log, clone)
		if err != nil {
			t.Fatalf("seed %d, op %d, %d%% unsynced kept: open after the power cut: %v", seed, op, pct, err)
		}
		got := map[string]string{}
		if err := c2.scan([]byte("t/"), func(k, v []byte) error {
			var s string
			if err := c2.get(k, &s); err != nil {
				return err
			}
			got[string(k)] = s
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, model) {
			t.Fatalf("seed %d, op %d, %d%% unsynced kept: %d keys after the power cut, %d written", seed, op, pct, len(got), len(model))
		}
		id, err := c2.nextStreamID()
		if err != nil {
			t.Fatal(err)
		}
		if id <= lastID {
			t.Fatalf("seed %d, op %d: stream id %d handed out again after the power cut (last %d)", seed, op, id, lastID)
		}
		c2.close()
	}
	t.Logf("%d operations, %d power cuts, %d keys at the end", 600, cuts, len(model))
}
