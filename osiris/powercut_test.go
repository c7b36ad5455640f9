package osiris

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/testutil"
	"github.com/warren-mq/warren/segment"
)

// powerCutImage copies the stream's directory as a power cut at this
// moment could leave it: the sealed segments whole (the writer synced
// each at its roll, and the directory after creating the next), the
// active segment's files cut to what its last sync made durable
// (segment.Synced) plus, with extra, a random part of what came after.
// It runs with the writer role, so nothing is written meanwhile.
func powerCutImage(t *testing.T, s *Stream, rng *rand.Rand, extra bool) string {
	t.Helper()
	dst := t.TempDir()
	var ferr error
	copyCut := func(name string, keep int64) {
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			ferr = err
			return
		}
		if keep >= 0 && keep < int64(len(b)) {
			if extra {
				keep += rng.Int64N(int64(len(b)) - keep + 1)
			}
			b = b[:keep]
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			ferr = err
		}
	}
	if err := s.do(func() {
		w := s.w
		copyCut(configFile, -1)
		for _, r := range w.segs {
			segKeep, idxKeep := int64(-1), int64(-1)
			if r == w.activeRef {
				syn := w.active.Synced()
				segKeep, idxKeep = syn.Size, 0
				if syn.Size > 0 {
					idxKeep = segment.FileHeaderSize + int64(syn.Count)*segment.IndexRecordSize
				}
			}
			copyCut(segment.SegmentFileName(r.base), segKeep)
			copyCut(segment.IndexFileName(r.base), idxKeep)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
	return dst
}

// Ensure each fsync policy keeps its promise across a power cut: with
// "always" every confirmed message survives; with "interval" every message
// confirmed at least a few intervals before the cut does (the writer
// syncs at most an interval after a write, plus the time of a cycle);
// with "none" only what the rolls synced is promised. Under every policy
// the reopened stream is a prefix of what was appended: contiguous
// offsets, every chunk valid, each record the one appended at its
// offset.
func TestPowerCutFsyncPolicies(t *testing.T) {
	seed := testutil.Seed(t, "WARREN_POWERCUT_SEED")
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncInterval, FsyncNone} {
		t.Run(string(policy), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			const interval = 10 * time.Millisecond
			grace := 5 * interval
			cfg := Config{MaxSegmentSize: 8 << 10, Fsync: policy, FsyncInterval: interval}
			s, err := Create(filepath.Join(t.TempDir(), "s"), cfg, Options{RetentionInterval: -1, IdleTimeout: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var confirmedAt []time.Time // by offset
			cuts, kept := 0, 0
			for round := range 60 {
				var msgs []Message
				for range 1 + rng.IntN(20) {
					body := fmt.Sprintf("m%d %s", len(confirmedAt)+len(msgs), make([]byte, rng.IntN(200)))
					msgs = append(msgs, Message{Entry: segment.AppendSimpleEntry(nil, []byte(body))})
				}
				r, err := s.Append(context.Background(), "", msgs...)
				if err != nil || r.Written != len(msgs) || r.LastOffset != uint64(len(confirmedAt)+len(msgs)-1) {
					t.Fatalf("append: %+v, %v", r, err)
				}
				for range msgs {
					confirmedAt = append(confirmedAt, time.Now())
				}
				if rng.IntN(3) == 0 {
					time.Sleep(time.Duration(rng.IntN(int(3 * interval))))
				}
				if round%3 != 0 {
					continue
				}
				cutAt := time.Now()
				img := powerCutImage(t, s, rng, round%2 == 0)
				cuts++
				o, err := Open(img, Options{RetentionInterval: -1, IdleTimeout: -1})
				if err != nil {
					t.Fatalf("seed %d, round %d: open after the power cut: %v", seed, round, err)
				}
				recs := readVerified(t, o)
				o.Close()
				for i, rec := range recs {
					if rec.offset != uint64(i) || !hasPrefix(rec.body, fmt.Sprintf("m%d ", i)) {
						t.Fatalf("seed %d, round %d: record %d is %q at offset %d", seed, round, i, rec.body[:min(len(rec.body), 12)], rec.offset)
					}
				}
				kept += len(recs)
				var promised int
				for i, at := range confirmedAt {
					switch policy {
					case FsyncAlways:
						promised = i + 1
					case FsyncInterval:
						if cutAt.Sub(at) >= grace {
							promised = i + 1
						}
					}
				}
				if len(recs) < promised {
					t.Fatalf("seed %d, round %d, fsync %s: %d records after the power cut, %d promised (%d confirmed)", seed, round, policy, len(recs), promised, len(confirmedAt))
				}
			}
			t.Logf("fsync %s: %d power cuts, %d of %d records kept on average", policy, cuts, kept/max(cuts, 1), len(confirmedAt))
		})
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// Ensure Open validates every chunk of the last segment unless told the
// machine has not restarted (TrustTail): a zeroed page in the middle of
// the last segment, behind a valid last chunk, ends the stream before it
// by default, and is left for the tail-only check to miss with
// TrustTail.
func TestOpenValidatesLastSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	s, err := Create(dir, Config{}, Options{RetentionInterval: -1, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		body := fmt.Sprintf("m%d %s", i, make([]byte, 100))
		if _, err := s.Append(context.Background(), "", Message{Entry: segment.AppendSimpleEntry(nil, []byte(body))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, segment.SegmentFileName(0))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clear(b[len(b)/2 : len(b)/2+64]) // inside some chunk in the middle
	for _, trust := range []bool{false, true} {
		img := copyDir(t, dir)
		if err := os.WriteFile(filepath.Join(img, segment.SegmentFileName(0)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		o, err := Open(img, Options{RetentionInterval: -1, IdleTimeout: -1, TrustTail: trust})
		if err != nil {
			t.Fatal(err)
		}
		next := o.Stats().NextOffset
		o.Close()
		switch {
		case !trust && (next == 0 || next >= 200):
			t.Fatalf("validated open: next offset %d, want the records before the damage", next)
		case trust && next != 200:
			t.Fatalf("TrustTail open: next offset %d, want 200 (the tail only is checked)", next)
		}
	}
}
