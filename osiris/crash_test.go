package osiris

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warren-mq/warren/segment"

	"github.com/warren-mq/warren/internal/testutil"
)

// Crash tests. TestCrashKill9 kills a writing child process with SIGKILL at
// random points and checks what a reopened stream holds; the Truncated
// tests cut the last segment at every byte of a chunk, the damage a kill
// in the middle of a write leaves.

const (
	crashChildEnv  = "WARREN_CRASH_CHILD" // directory of the child's stream
	crashSeedEnv   = "WARREN_CRASH_SEED"  // seed of the child's batches
	crashProducers = 4                    // appending goroutines in a child
	crashParent    = "parent"             // producer of the parent's appends
)

func crashProducer(g int) string     { return fmt.Sprintf("p%d", g) }
func crashConsumer(p string) string  { return "c-" + p }
func crashConfig() Config            { return Config{MaxSegmentSize: 64 << 10} }
func crashOptions() Options          { return Options{RetentionInterval: -1, IdleTimeout: time.Millisecond} }
func crashEntry(b []byte) []byte     { return segment.AppendSimpleEntry(nil, b) }
func crashPad(rng *rand.Rand) string { return strings.Repeat("x", rng.IntN(200)) }

// crashBody is a record of the crash tests: "<producer> <seq> <padding>".
func crashBody(producer string, seq uint64, pad string) []byte {
	return fmt.Appendf(nil, "%s %d %s", producer, seq, pad)
}

func parseCrashBody(body string) (producer string, seq uint64, err error) {
	f := strings.Fields(body)
	if len(f) < 2 {
		return "", 0, fmt.Errorf("record %q: not <producer> <seq>", body)
	}
	seq, err = strconv.ParseUint(f[1], 10, 64)
	return f[0], seq, err
}

// TestCrashChild is the process TestCrashKill9 kills. It appends batches
// from crashProducers goroutines until it is killed and reports on stdout
// each batch the stream confirmed ("confirmed <producer> <last seq>") and
// each consumer offset it stored ("stored <producer> <offset>"), in the
// order they happened per goroutine.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("helper process of TestCrashKill9")
	}
	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	// The parent kills this process; never outlive it by much.
	time.AfterFunc(time.Minute, func() { os.Exit(4) })

	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		// One write per line: a pipe write this small is atomic.
		if _, err := os.Stdout.Write(fmt.Appendf(nil, format+"\n", args...)); err != nil {
			os.Exit(5)
		}
	}
	fail := func(format string, args ...any) {
		say("error "+format, args...)
		os.Exit(3)
	}

	var s *Stream
	var err error
	if _, statErr := os.Stat(filepath.Join(dir, configFile)); statErr == nil {
		s, err = Open(dir, crashOptions())
	} else {
		s, err = Create(dir, crashConfig(), crashOptions())
	}
	if err != nil {
		fail("open %s: %v", dir, err)
	}
	// Now and then all producers pause for longer than twice the
	// IdleTimeout, so that the writer goes idle (closing its files) and
	// resumes, and the kill may come in either.
	var gate sync.RWMutex
	go func() {
		rng := rand.New(rand.NewPCG(seed, crashProducers))
		for {
			time.Sleep(time.Duration(rng.IntN(5000)) * time.Microsecond)
			gate.Lock()
			time.Sleep(time.Duration(2000+rng.IntN(3000)) * time.Microsecond)
			gate.Unlock()
			say("idles %d", s.idles.Load())
		}
	}()
	var wg sync.WaitGroup
	for g := range crashProducers {
		wg.Go(func() {
			p := crashProducer(g)
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			// Resume after what the stream holds, re-sending a few ids
			// that deduplication must drop.
			last := s.PublisherSequence(p)
			resend := min(last, rng.Uint64N(4))
			from := last + 1 - resend
			for first := true; ; first = false {
				n := 1 + rng.Uint64N(20)
				dups := uint64(0)
				if first {
					n += resend
					dups = resend
				}
				batch := make([]Message, 0, n)
				for id := from; id < from+n; id++ {
					batch = append(batch, Message{Entry: crashEntry(crashBody(p, id, crashPad(rng))), PublishingID: id})
				}
				gate.RLock()
				r, err := s.Append(context.Background(), p, batch...)
				gate.RUnlock()
				if err != nil {
					fail("%s: append %d..%d: %v", p, from, from+n-1, err)
				}
				if uint64(r.Duplicates) != dups || uint64(r.Written) != n-dups {
					fail("%s: append %d..%d after sequence %d: %+v, want %d duplicates", p, from, from+n-1, last, r, dups)
				}
				say("confirmed %s %d", p, from+n-1)
				if rng.IntN(3) == 0 {
					if err := s.StoreOffset(crashConsumer(p), r.LastOffset); err != nil {
						fail("%s: store offset: %v", p, err)
					}
					say("stored %s %d", p, r.LastOffset)
				}
				from += n
			}
		})
	}
	wg.Wait() // never returns: the producers run until the process dies
}

// crashState is what the parent knows from the children's reports.
type crashState struct {
	confirmed map[string]uint64 // producer -> highest confirmed sequence
	durable   map[string]uint64 // consumer -> offset stored before a confirmed append
	pending   map[string]uint64 // producer -> offset stored, not yet followed by a confirm
	lines     int               // confirmed lines of the current run
	idles     uint64            // times the current run's writer went idle, as last reported
}

func newCrashState() *crashState {
	return &crashState{confirmed: map[string]uint64{}, durable: map[string]uint64{}, pending: map[string]uint64{}}
}

// apply takes one line of a child's stdout.
func (st *crashState) apply(t *testing.T, line string) {
	f := strings.Fields(line)
	if len(f) == 2 && f[0] == "idles" {
		st.idles, _ = strconv.ParseUint(f[1], 10, 64)
		return
	}
	if len(f) == 3 && (f[0] == "confirmed" || f[0] == "stored") {
		v, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			t.Fatalf("child line %q: %v", line, err)
		}
		p := f[1]
		if f[0] == "stored" {
			st.pending[p] = v
			return
		}
		st.lines++
		st.confirmed[p] = max(st.confirmed[p], v)
		// The writer takes stored offsets with the batches queued after
		// them, so this confirmation made the stored offset durable.
		if o, ok := st.pending[p]; ok {
			st.durable[crashConsumer(p)] = o
			delete(st.pending, p)
		}
		return
	}
	if strings.HasPrefix(line, "error ") {
		t.Errorf("child: %s", line)
	}
	// Anything else is test-framework output.
}

// runCrashChild runs TestCrashChild on dir and kills it with SIGKILL after
// it has confirmed killAfter batches, reading all it reported before it
// died into st.
func runCrashChild(t *testing.T, dir string, seed uint64, killAfter int, st *crashState) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashSeedEnv+"="+strconv.FormatUint(seed, 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	stop := make(chan struct{})
	defer close(stop)
	lines := make(chan string)
	go func() {
		defer close(lines)
		br := bufio.NewReader(out)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return // at EOF; a line without its newline was not reported whole
			}
			select {
			case lines <- strings.TrimSuffix(l, "\n"):
			case <-stop:
				return
			}
		}
	}()

	clear(st.pending) // offsets the last child stored but never confirmed
	st.lines, st.idles = 0, 0
	killed := false
	var tail []string // last lines, for failure messages
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
read:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break read
			}
			if tail = append(tail, l); len(tail) > 10 {
				tail = tail[1:]
			}
			st.apply(t, l)
			if !killed && st.lines >= killAfter {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatalf("kill child: %v", err)
				}
				killed = true
			}
		case <-deadline.C:
			t.Fatalf("child did not finish: %d lines confirmed, killed %v\nlast lines:\n%s\nstderr:\n%s",
				st.lines, killed, strings.Join(tail, "\n"), stderr.String())
		}
	}
	err = cmd.Wait()
	waited = true
	if !killed {
		t.Fatalf("child exited after %d confirmed lines, before it was killed: %v\nlast lines:\n%s\nstderr:\n%s",
			st.lines, err, strings.Join(tail, "\n"), stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL\nstderr:\n%s", err, stderr.String())
	}
}

// streamImage is what a test compares between two opens of a stream.
type streamImage struct {
	records   []record
	stats     Stats
	sequences map[string]uint64
	offsets   map[string]uint64
}

func takeImage(t *testing.T, s *Stream, producers []string) streamImage {
	t.Helper()
	im := streamImage{
		records:   readVerified(t, s),
		stats:     s.Stats(),
		sequences: map[string]uint64{},
		offsets:   map[string]uint64{},
	}
	for _, p := range producers {
		im.sequences[p] = s.PublisherSequence(p)
		if o, ok := s.QueryOffset(crashConsumer(p)); ok {
			im.offsets[crashConsumer(p)] = o
		}
	}
	return im
}

func (im streamImage) diff(o streamImage) string {
	switch {
	case !slices.Equal(im.records, o.records):
		return fmt.Sprintf("%d records, then %d (or different ones)", len(im.records), len(o.records))
	case im.stats != o.stats:
		return fmt.Sprintf("stats %+v, then %+v", im.stats, o.stats)
	case !maps.Equal(im.sequences, o.sequences):
		return fmt.Sprintf("sequences %v, then %v", im.sequences, o.sequences)
	case !maps.Equal(im.offsets, o.offsets):
		return fmt.Sprintf("offsets %v, then %v", im.offsets, o.offsets)
	}
	return ""
}

// readVerified reads every committed chunk from First, tracking chunks
// included, checks each with segment.Verify and that chunk ids follow on,
// and returns the user records.
func readVerified(t testing.TB, s *Stream) []record {
	t.Helper()
	r, err := s.NewReader(First(), ReaderOptions{AllChunks: true})
	if err != nil {
		t.Fatalf("NewReader(first): %v", err)
	}
	defer r.Close()
	var out []record
	var buf, scratch []byte
	next, started := uint64(0), false
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			t.Fatalf("TryNext after offset %d: %v", next, err)
		}
		if !ok {
			break
		}
		buf = slices.Grow(buf[:0], int(c.Header.Size()))[:c.Header.Size()]
		if _, err := c.File.ReadAt(buf, c.Pos); err != nil {
			t.Fatalf("chunk %d at %d: %v", c.Header.ChunkID, c.Pos, err)
		}
		h, err := segment.Verify(buf)
		if err != nil {
			t.Fatalf("chunk %d at %d: %v", c.Header.ChunkID, c.Pos, err)
		}
		if h != c.Header {
			t.Fatalf("chunk at %d: reader header %+v, stored %+v", c.Pos, c.Header, h)
		}
		if started && h.ChunkID != next {
			t.Fatalf("chunk %d follows chunk ending at %d", h.ChunkID, next)
		}
		next, started = h.NextOffset(), true
		if h.Type != segment.ChunkUser {
			continue
		}
		off := h.ChunkID
		data := buf[h.DataOffset() : h.DataOffset()+int64(h.DataLen)]
		scratch, err = segment.Records(data, scratch, func(rec []byte) bool {
			out = append(out, record{off, string(rec)})
			off++
			return true
		})
		if err != nil {
			t.Fatalf("chunk %d: records: %v", h.ChunkID, err)
		}
	}
	if st := s.Stats(); started && next != st.NextOffset {
		t.Fatalf("chunks end at %d, next offset %d", next, st.NextOffset)
	}
	return out
}

// checkCrashedStream opens the stream a killed child left in dir and checks
// it against what the child confirmed; then it checks that a second open
// sees the same stream and that appending works.
func checkCrashedStream(t *testing.T, dir string, st *crashState) {
	t.Helper()
	producers := []string{crashParent}
	for g := range crashProducers {
		producers = append(producers, crashProducer(g))
	}
	if _, err := os.Stat(filepath.Join(dir, configFile)); os.IsNotExist(err) && len(st.confirmed) == 0 {
		return // killed before it created the stream
	}
	var log bytes.Buffer
	opts := crashOptions()
	opts.Logger = slog.New(slog.NewTextHandler(&log, nil))
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open after kill: %v", err)
	}
	defer s.Close()
	im := takeImage(t, s, producers)
	t.Logf("reopened: %d records, %d segments; %s", len(im.records), im.stats.Segments, strings.TrimSpace(log.String()))

	// Every record in the stream is 1, 2, 3... of its producer: confirmed
	// ones are there exactly once and nothing is out of order.
	seqs := map[string]uint64{}
	owner := map[uint64]string{}
	for _, rec := range im.records {
		p, seq, err := parseCrashBody(rec.body)
		if err != nil {
			t.Fatalf("offset %d: %v", rec.offset, err)
		}
		if seq != seqs[p]+1 {
			t.Fatalf("offset %d: %s sequence %d after %d", rec.offset, p, seq, seqs[p])
		}
		seqs[p] = seq
		owner[rec.offset] = p
	}
	for p, c := range st.confirmed {
		if seqs[p] < c {
			t.Fatalf("%s: confirmed up to %d, stream holds up to %d", p, c, seqs[p])
		}
	}
	for _, p := range producers {
		if got := im.sequences[p]; got != seqs[p] {
			t.Fatalf("PublisherSequence(%s) = %d, stream holds up to %d (confirmed %d)", p, got, seqs[p], st.confirmed[p])
		}
		c := crashConsumer(p)
		o, ok := im.offsets[c]
		if d, durable := st.durable[c]; durable && (!ok || o < d) {
			t.Fatalf("QueryOffset(%s) = %d, %v; %d was stored before a confirmed append", c, o, ok, d)
		}
		if ok && owner[o] != p {
			t.Fatalf("QueryOffset(%s) = %d, a record of %q", c, o, owner[o])
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	s2, err := Open(dir, crashOptions())
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	defer s2.Close()
	if d := im.diff(takeImage(t, s2, producers)); d != "" {
		t.Fatalf("second open differs: %s", d)
	}
	seq := s2.PublisherSequence(crashParent) + 1
	r, err := s2.Append(context.Background(), crashParent, Message{Entry: crashEntry(crashBody(crashParent, seq, "")), PublishingID: seq})
	if err != nil || r.Written != 1 {
		t.Fatalf("append after kill: %+v, %v", r, err)
	}
	// The append lands at the next offset, or after the snapshot of a new
	// segment when it rolled the full one.
	if want, rolled := im.stats.NextOffset, s2.Stats().Segments > im.stats.Segments; r.LastOffset != want && (!rolled || r.LastOffset != want+1) {
		t.Fatalf("append after kill at %d, want %d (rolled: %v)", r.LastOffset, want, rolled)
	}
	st.confirmed[crashParent] = seq
	if got := readVerified(t, s2); !slices.Equal(got[:len(got)-1], im.records) || got[len(got)-1].offset != r.LastOffset {
		t.Fatalf("after the append: %d records, last %v; want %d and the new one at %d", len(got), got[len(got)-1], len(im.records), r.LastOffset)
	}
	if err := s2.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// Ensure a stream whose writer process is killed with SIGKILL at any point
// reopens with every confirmed message exactly once, in order, with its
// tracking, the same on every open, and accepts appends; and that this
// holds again when the restarted writer is killed too.
func TestCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	seed := testutil.Seed(t, crashSeedEnv)
	rng := rand.New(rand.NewPCG(seed, 0))
	const iterations = 5
	for it := range iterations {
		dir := t.TempDir()
		st := newCrashState()
		runs := 2 // on one directory: crash, restart, crash
		if it == 0 {
			runs = 3
		}
		for run := range runs {
			killAfter := 1 + rng.IntN(1500)
			if it == 0 && run == 0 || rng.IntN(4) == 0 {
				killAfter = 1 + rng.IntN(5) // very early: maybe in the first roll or still in Open
			}
			runCrashChild(t, dir, rng.Uint64(), killAfter, st)
			t.Logf("iteration %d run %d: killed after %d confirmed batches (%d seen, writer idle %d times); confirmed %v",
				it, run, killAfter, st.lines, st.idles, st.confirmed)
			checkCrashedStream(t, dir, st)
		}
	}
}

// truncFixture is a closed stream whose last segment ends with a small
// chunk carrying tracking in its trailer, and what it held before that
// chunk.
type truncFixture struct {
	dir       string
	segPath   string // last segment file
	idxPath   string // its index
	lastPos   int64  // position of the last chunk
	lastEnd   int64  // its end: the file size
	prevChunk int64  // id of the chunk before it
	before    streamImage
	after     streamImage
	producers []string
}

// buildTruncFixture writes a stream of at least three segments with
// producers p0..p2 and consumers c-p0..c-p2 and closes it. The final chunk
// holds one message of p0 and a new offset for c-p0.
func buildTruncFixture(t *testing.T) *truncFixture {
	t.Helper()
	f := &truncFixture{dir: t.TempDir(), producers: []string{"p0", "p1", "p2"}}
	s, err := Create(f.dir, Config{MaxSegmentSize: 4096}, crashOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	seqs := map[string]uint64{}
	appendOne := func(p string) Result {
		seqs[p]++
		return mustAppend(t, s, p, Message{Entry: crashEntry(crashBody(p, seqs[p], strings.Repeat("x", rng.IntN(60)))), PublishingID: seqs[p]})
	}
	for i := 0; s.Stats().Segments < 3; i++ {
		p := f.producers[i%3]
		r := appendOne(p)
		if i%7 == 0 {
			if err := s.StoreOffset(crashConsumer(p), r.LastOffset); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendOne("p1") // the last segment: snapshot, two user chunks, ...
	f.before = takeImage(t, s, f.producers)
	f.prevChunk = f.before.stats.LastChunkID

	// ... and the final chunk, with p0's sequence and c-p0's offset in its
	// trailer.
	seqs["p0"]++
	appendWithOffset(t, s, crashConsumer("p0"), f.before.stats.NextOffset-1,
		"p0", Message{Entry: crashEntry(crashBody("p0", seqs["p0"], "")), PublishingID: seqs["p0"]})
	f.after = takeImage(t, s, f.producers)
	if f.after.stats.LastChunkID != int64(f.before.stats.NextOffset) {
		t.Fatalf("final chunk %d, want one chunk after %d", f.after.stats.LastChunkID, f.before.stats.NextOffset)
	}

	// Find the final chunk and check it carries the tracking.
	r, err := s.NewReader(AtOffset(uint64(f.after.stats.LastChunkID)), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := r.TryNext()
	if !ok || err != nil {
		t.Fatalf("final chunk: %v, %v", ok, err)
	}
	f.segPath, f.lastPos, f.lastEnd = c.File.Name(), c.Pos, c.Pos+c.Header.Size()
	trailer := make([]byte, c.Header.TrailerLen)
	if _, err := c.File.ReadAt(trailer, c.DataPos()+int64(c.Header.DataLen)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	tr := newTracking()
	if err := tr.applyRecordsLocked(trailer, c.Header.ChunkID); err != nil || tr.sequences["p0"].seq != seqs["p0"] ||
		tr.offsets[crashConsumer("p0")] != f.before.stats.NextOffset-1 {
		t.Fatalf("final chunk trailer: %v %v %v", tr.sequences, tr.offsets, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.idxPath = strings.TrimSuffix(f.segPath, segment.SegmentExt) + segment.IndexExt
	if fi, err := os.Stat(f.segPath); err != nil || fi.Size() != f.lastEnd {
		t.Fatalf("last segment: %v, %v; want %d bytes", fi, err, f.lastEnd)
	}
	if c.Header.Size() > 200 {
		t.Fatalf("final chunk of %d bytes; want a small one", c.Header.Size())
	}
	return f
}

// appendWithOffset stores offset for consumer and appends ms for producer
// in one writer cycle, so that the offset goes into the trailer of their
// chunk: both are queued from the writer goroutine.
func appendWithOffset(t testing.TB, s *Stream, consumer string, offset uint64, producer string, ms ...Message) Result {
	t.Helper()
	done := make(chan Result, 1)
	b := &Batch{Producer: producer, Messages: ms, Done: func(r Result) { done <- r }}
	var errs [2]error
	if err := s.do(func() {
		errs[0] = s.StoreOffset(consumer, offset)
		errs[1] = s.Submit(b)
	}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("queue append with offset: %v %v", err, errs)
	}
	r := <-done
	if r.Err != nil || r.Written+r.Duplicates != len(ms) {
		t.Fatalf("append with offset: %+v", r)
	}
	return r
}

// copyDir copies the files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// checkTruncated opens dir, expects want (and the chunk before the cut as
// the last one when cut), then appends.
func (f *truncFixture) checkTruncated(t *testing.T, dir string, want streamImage, lastChunk int64) {
	t.Helper()
	s, err := Open(dir, crashOptions())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	got := takeImage(t, s, f.producers)
	if got.stats.NextOffset != want.stats.NextOffset {
		t.Fatalf("next offset %d, want %d", got.stats.NextOffset, want.stats.NextOffset)
	}
	if got.stats.LastChunkID != lastChunk || got.stats.CommittedChunkID != lastChunk {
		t.Fatalf("stats %+v, want last chunk %d", got.stats, lastChunk)
	}
	if d := want.diff(got); d != "" {
		t.Fatalf("want, got: %s", d)
	}
	// Deduplication state is right: the last id again is a duplicate and
	// the next one is written where the log ends.
	seq := got.sequences["p0"]
	r, err := s.Append(context.Background(), "p0",
		Message{Entry: crashEntry(crashBody("p0", seq, "")), PublishingID: seq},
		Message{Entry: crashEntry(crashBody("p0", seq+1, "")), PublishingID: seq + 1})
	if err != nil || r.Written != 1 || r.Duplicates != 1 || r.LastOffset != want.stats.NextOffset {
		t.Fatalf("append: %+v, %v; want 1 written at %d and 1 duplicate", r, err, want.stats.NextOffset)
	}
	if recs := readVerified(t, s); len(recs) != len(want.records)+1 || recs[len(recs)-1].offset != r.LastOffset {
		t.Fatalf("after append: %d records, last %v", len(recs), recs[len(recs)-1])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// Ensure that cutting the last segment anywhere inside its last chunk (a
// write torn by a crash), with or without that chunk's index record,
// reopens to exactly the stream before that chunk, tracking included, and
// that the next append lands where the log ends.
func TestCrashTruncatedLastChunk(t *testing.T) {
	f := buildTruncFixture(t)
	idxSize := func() int64 {
		fi, err := os.Stat(f.idxPath)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}()
	for cut := f.lastPos; cut <= f.lastEnd; cut++ {
		for _, dropIndex := range []bool{false, true} {
			t.Run(fmt.Sprintf("cut=%d/drop-index=%v", cut, dropIndex), func(t *testing.T) {
				dir := copyDir(t, f.dir)
				truncateFile(t, filepath.Join(dir, filepath.Base(f.segPath)), cut)
				if dropIndex {
					truncateFile(t, filepath.Join(dir, filepath.Base(f.idxPath)), idxSize-segment.IndexRecordSize)
				}
				want, last := f.before, f.prevChunk
				if cut == f.lastEnd {
					want, last = f.after, f.after.stats.LastChunkID
				}
				f.checkTruncated(t, dir, want, last)
			})
		}
	}
	// A whole chunk with a torn index record: the segment file wins.
	for cut := idxSize - segment.IndexRecordSize; cut < idxSize; cut++ {
		t.Run(fmt.Sprintf("index-cut=%d", cut), func(t *testing.T) {
			dir := copyDir(t, f.dir)
			truncateFile(t, filepath.Join(dir, filepath.Base(f.idxPath)), cut)
			f.checkTruncated(t, dir, f.after, f.after.stats.LastChunkID)
		})
	}
}

// Ensure that when a crash tears the tracking snapshot that starts a new
// segment, the stream reopens with the tracking of the older segments, and
// keeps it after retention has deleted them.
func TestCrashTruncatedSnapshot(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, Config{MaxSegmentSize: 4096}, crashOptions())
	if err != nil {
		t.Fatal(err)
	}
	producers := []string{"p0", "p1", "p2"}
	seqs := map[string]uint64{}
	var before streamImage
	var p string
	for i := 0; ; i++ {
		p = producers[i%3]
		before = takeImage(t, s, producers)
		seqs[p]++
		m := Message{Entry: crashEntry(crashBody(p, seqs[p], strings.Repeat("y", 40))), PublishingID: seqs[p]}
		appendWithOffset(t, s, crashConsumer(p), before.stats.NextOffset, p, m)
		if s.Stats().Segments == 3 {
			break // this append rolled: the new segment holds a snapshot and it
		}
	}
	base := before.stats.NextOffset
	segName := segment.SegmentFileName(base)
	var snapEnd int64
	{
		r, err := s.NewReader(AtOffset(base), ReaderOptions{AllChunks: true})
		if err != nil {
			t.Fatal(err)
		}
		c, ok, err := r.TryNext()
		if !ok || err != nil || c.Header.Type != segment.ChunkTrackingSnapshot || c.Pos != segment.FileHeaderSize ||
			filepath.Base(c.File.Name()) != segName {
			t.Fatalf("segment %d starts with %+v at %d (%v, %v)", base, c.Header, c.Pos, ok, err)
		}
		snapEnd = c.Pos + c.Header.Size()
		r.Close()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for cut := int64(segment.FileHeaderSize); cut <= snapEnd; cut++ {
		t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) {
			dir := copyDir(t, dir)
			truncateFile(t, filepath.Join(dir, segName), cut)
			s, err := Open(dir, crashOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// The snapshot holds every offset stored by the time it was
			// written, the one stored with the lost append too.
			wantOffsets := maps.Clone(before.offsets)
			if cut == snapEnd {
				wantOffsets[crashConsumer(p)] = base
			}
			got := takeImage(t, s, producers)
			if !slices.Equal(got.records, before.records) || !maps.Equal(got.sequences, before.sequences) ||
				!maps.Equal(got.offsets, wantOffsets) {
				t.Fatalf("after open: %d records, sequences %v, offsets %v; want %d, %v, %v",
					len(got.records), got.sequences, got.offsets, len(before.records), before.sequences, wantOffsets)
			}
			next := got.stats.NextOffset
			if next != base && next != base+1 {
				t.Fatalf("next offset %d, want %d or %d (after a snapshot)", next, base, base+1)
			}
			r := mustAppend(t, s, "p1", Message{Entry: crashEntry(crashBody("p1", seqs["p1"], "")), PublishingID: seqs["p1"]})
			if r.Written != 1 || r.LastOffset != next {
				t.Fatalf("append: %+v, want it at %d", r, next)
			}
			if cut > segment.FileHeaderSize+1 && cut < snapEnd-1 && cut%16 != 0 {
				return // the retention check syncs a lot: a sample of cuts is enough
			}
			// Retention keeps only the active segment: its snapshot must
			// carry the tracking of the deleted ones.
			if err := s.SetRetention(1, 0); err != nil {
				t.Fatal(err)
			}
			if st := s.Stats(); st.Segments != 1 {
				t.Fatalf("after retention: %+v", st)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := Open(dir, crashOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			want := maps.Clone(before.sequences)
			want["p1"] = seqs["p1"]
			got = takeImage(t, s2, producers)
			if !maps.Equal(got.sequences, want) || !maps.Equal(got.offsets, wantOffsets) {
				t.Fatalf("after retention and reopen: sequences %v, offsets %v; want %v, %v",
					got.sequences, got.offsets, want, wantOffsets)
			}
		})
	}
}
