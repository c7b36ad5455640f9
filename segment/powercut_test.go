package segment

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/warren-mq/warren/internal/testutil"
)

// Power-cut tests. A power cut keeps what the last Sync made durable
// (Segment.Synced) and, of what was written after it, any part: the two
// files independently (an index ahead of its segment, a segment ahead of
// its index), each cut anywhere, with a tail the file system extended
// but never filled (zeros, as XFS leaves), or with pages written back
// out of order (zero pages in the middle of the unsynced part).

const powerCutSeedEnv = "WARREN_POWERCUT_SEED"

// pageSize is the write-back granularity the holes model uses.
const pageSize = 4096

// powerCut returns what of b (a file whose first synced bytes are
// durable) a power cut may leave, by the model named mode.
func powerCut(rng *rand.Rand, b []byte, synced int, mode string) []byte {
	out := append([]byte(nil), b...)
	if synced >= len(b) {
		return out
	}
	cut := synced + rng.IntN(len(b)-synced+1)
	switch mode {
	case "prefix": // written back in order, cut anywhere
		return out[:cut]
	case "zero-tail": // the size reached the disk, the data did not
		end := cut + rng.IntN(len(b)-cut+1)
		clear(out[cut:end])
		return out[:end]
	case "holes": // pages written back out of order
		for p := synced / pageSize * pageSize; p < len(out); p += pageSize {
			if rng.IntN(3) == 0 {
				clear(out[max(p, synced):min(p+pageSize, len(out))])
			}
		}
		if rng.IntN(2) == 0 {
			return out[:cut]
		}
		return out
	}
	panic("unknown power cut mode " + mode)
}

var powerCutModes = []string{"prefix", "zero-tail", "holes"}

// Ensure a segment opened with Recover after any power cut the model allows holds the
// chunks that were synced, and nothing but a prefix of what was
// appended: every chunk it indexes is byte for byte one that was written,
// in order.
func TestPowerCut(t *testing.T) {
	seed := testutil.Seed(t, powerCutSeedEnv)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	const base = 1000
	s, err := Create(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var chunks []storedChunk
	specs := mixedSpecs(80, 1_700_000_000_000)
	trials := map[string]int{}
	for len(specs) > 0 {
		n := min(1+rng.IntN(4), len(specs))
		chunks = append(chunks, appendChunks(t, s, specs[:n]...)...)
		specs = specs[n:]
		if rng.IntN(3) == 0 {
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		syn := s.Synced()
		seg := readFile(t, dir, SegmentFileName(base))
		idx := readFile(t, dir, IndexFileName(base))
		synIdx := 0
		if syn.Size > 0 {
			synIdx = FileHeaderSize + syn.Count*IndexRecordSize
		}
		for range 6 {
			segMode := powerCutModes[rng.IntN(len(powerCutModes))]
			idxMode := powerCutModes[rng.IntN(len(powerCutModes))]
			name := fmt.Sprintf("seg %s, idx %s", segMode, idxMode)
			trials[name]++
			cdir, err := os.MkdirTemp(t.TempDir(), "cut")
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, cdir, SegmentFileName(base), powerCut(rng, seg, int(syn.Size), segMode))
			writeFile(t, cdir, IndexFileName(base), powerCut(rng, idx, synIdx, idxMode))
			r, rec, err := Recover(cdir, base)
			if err != nil {
				t.Fatalf("seed %d, %d chunks written, %d synced, %s: Recover: %v", seed, len(chunks), syn.Count, name, err)
			}
			got := r.Count()
			if got < syn.Count || got > len(chunks) {
				t.Fatalf("seed %d, %s: %d chunks after the cut; %d written, %d synced (recovery %+v)", seed, name, got, len(chunks), syn.Count, rec)
			}
			checkChunksNamed(t, fmt.Sprintf("seed %d, %d written, %d synced, %s, recovery %+v", seed, len(chunks), syn.Count, name, rec), r, chunks[:got])
			r.Close()
			os.RemoveAll(cdir)
		}
	}
	t.Logf("%d chunks, power cuts: %v", len(chunks), trials)
}

// checkChunksNamed is checkChunks with what the case was in its failure.
func checkChunksNamed(t *testing.T, what string, s *Segment, want []storedChunk) {
	t.Helper()
	buf := make([]byte, HeaderSize+MaxBloomSize)
	for i, c := range want {
		r, err := s.Record(i)
		if err != nil {
			t.Fatalf("%s: record %d: %v", what, i, err)
		}
		if r != c.record() {
			t.Fatalf("%s: record %d is %+v, want %+v", what, i, r, c.record())
		}
		if _, _, err := s.ReadHeader(int64(r.Pos), s.Size(), buf); err != nil {
			t.Fatalf("%s: chunk %d: %v", what, i, err)
		}
		b := make([]byte, c.hdr.Size())
		if err := s.ReadAt(b, c.pos); err != nil {
			t.Fatalf("%s: chunk %d: %v", what, i, err)
		}
		if string(b) != string(c.bytes) {
			t.Fatalf("%s: chunk %d (at %d, %d bytes) is not the chunk written", what, i, c.pos, len(b))
		}
	}
	if len(want) > 0 && s.Size() != want[len(want)-1].end() {
		t.Fatalf("%s: size %d after %d chunks ending at %d", what, s.Size(), len(want), want[len(want)-1].end())
	}
}
