package osiris

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warren-mq/warren/segment"
)

// replicaWait bounds how long a test waits for replication to get
// somewhere before it fails; nothing is asserted about how long it takes.
const replicaWait = 30 * time.Second

// openMember creates (or reopens) the stream in dir as a replication
// member.
func openMember(t *testing.T, dir string, maxSeg int64, rp Replication) *Stream {
	t.Helper()
	opts := Options{RetentionInterval: -1, Replication: &rp}
	var s *Stream
	var err error
	if _, statErr := os.Stat(filepath.Join(dir, configFile)); statErr == nil {
		s, err = Open(dir, opts)
	} else {
		s, err = Create(dir, Config{MaxSegmentSize: maxSeg}, opts)
	}
	if err != nil {
		t.Fatalf("open member %s: %v", rp.Member, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func leaderOf(members int, epoch uint64) Replication {
	return Replication{Role: RoleLeader, Member: "leader", Members: members, Epoch: epoch}
}

func replicaOf(name string, members int) Replication {
	return Replication{Role: RoleReplica, Member: name, Members: members}
}

// link runs ServeReplica and Follow over one connection.
type link struct {
	t         *testing.T
	cancel    context.CancelFunc
	done      chan struct{}
	serveErr  error
	followErr error
}

// connect links leader and replica over net.Pipe, or loopback TCP when
// tcp is set.
func connect(t *testing.T, leader, replica *Stream, tcp bool) *link {
	t.Helper()
	var a, b net.Conn
	if tcp {
		a, b = tcpConnPair(t)
	} else {
		a, b = net.Pipe()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{t: t, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.serveErr = ServeReplica(ctx, leader, a) }()
	go func() { defer wg.Done(); l.followErr = Follow(ctx, replica, b) }()
	go func() { wg.Wait(); close(l.done) }()
	t.Cleanup(l.stop)
	return l
}

// stop ends the link and waits for both ends, which must have run until
// then.
func (l *link) stop() {
	l.cancel()
	<-l.done
	for _, err := range []error{l.serveErr, l.followErr} {
		if !errors.Is(err, context.Canceled) {
			l.t.Errorf("link ended with %v, want context.Canceled", err)
		}
	}
}

func tcpConnPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- nil
			return
		}
		ch <- c
	}()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a == nil {
		t.Fatal("accept failed")
	}
	return a, b
}

// waitCommitted waits until s has committed chunk id chunk.
func waitCommitted(t *testing.T, s *Stream, chunk int64) {
	t.Helper()
	deadline := time.After(replicaWait)
	for {
		tl := s.tail.Load()
		if tl.lastChunk >= chunk {
			return
		}
		select {
		case <-tl.wake:
		case <-deadline:
			t.Fatalf("%s: committed chunk %d, want %d", s.dir, tl.lastChunk, chunk)
		}
	}
}

// logBytes is the stream's chunks, every segment's after its file
// header, in order: what must be identical between members whatever
// their segment sizes.
func logBytes(t *testing.T, s *Stream) []byte {
	t.Helper()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(filepath.Join(s.dir, "*"+segment.SegmentExt))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var out []byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b[segment.FileHeaderSize:]...)
	}
	return out
}

// trackingOf is the tracking state to compare between members (the
// duplicate counts are per open, not replicated).
func trackingOf(s *Stream) string {
	var b bytes.Buffer
	offs := s.Offsets()
	keys := make([]string, 0, len(offs))
	for k := range offs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "offset %s=%d\n", k, offs[k])
	}
	for _, p := range s.Producers() {
		fmt.Fprintf(&b, "producer %s=%d@%d\n", p.Reference, p.LastPublishingID, p.LastChunkID)
	}
	if st := s.State(); st != nil {
		fmt.Fprintf(&b, "state %x\n", st)
	}
	return b.String()
}

// checkSame asserts that replica holds leader's log byte for byte, with
// the same tracking and epoch history.
func checkSame(t *testing.T, leader, replica *Stream) {
	t.Helper()
	lb, rb := logBytes(t, leader), logBytes(t, replica)
	if !bytes.Equal(lb, rb) {
		n := 0
		for n < min(len(lb), len(rb)) && lb[n] == rb[n] {
			n++
		}
		t.Fatalf("%s: %d bytes of chunks, leader %d; first difference at %d", replica.dir, len(rb), len(lb), n)
	}
	if lt, rt := trackingOf(leader), trackingOf(replica); lt != rt {
		t.Fatalf("%s: tracking\n%s\nleader's\n%s", replica.dir, rt, lt)
	}
	lh, err := leader.EpochHistory()
	if err != nil {
		t.Fatal(err)
	}
	rh, err := replica.EpochHistory()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(lh) != fmt.Sprint(rh) {
		t.Fatalf("%s: epoch history %v, leader's %v", replica.dir, rh, lh)
	}
}

// publish appends n messages for producer from publishing id first on,
// in batches of batch, storing a consumer offset after each batch, and
// resubmitting every fifth batch (all duplicates).
func publish(t *testing.T, s *Stream, producer string, first uint64, n, batch int) {
	t.Helper()
	seq := first
	for i := 0; i < n; i += batch {
		var ms []Message
		for j := i; j < min(i+batch, n); j++ {
			ms = append(ms, Message{Entry: segment.AppendSimpleEntry(nil, fmt.Appendf(nil, "%s-%d-%s", producer, seq, "payload-payload-payload-payload")), PublishingID: seq})
			seq++
		}
		r := mustAppend(t, s, producer, ms...)
		if r.Written != len(ms) {
			t.Fatalf("append: %+v, want %d written", r, len(ms))
		}
		if (i/batch)%5 == 4 {
			if r := mustAppend(t, s, producer, ms...); r.Duplicates != len(ms) {
				t.Fatalf("resubmit: %+v, want %d duplicates", r, len(ms))
			}
		}
		if err := s.StoreOffset("c-"+producer, r.LastOffset); err != nil {
			t.Fatal(err)
		}
	}
}

// Ensure two replicas of a leader end with the leader's chunks byte for
// byte and its tracking, whatever their segment sizes, and that a
// replica reopened as leader has the same tracking and deduplicates.
func TestReplicationTwoReplicas(t *testing.T) {
	root := t.TempDir()
	leader := openMember(t, filepath.Join(root, "l"), 32<<10, leaderOf(3, 1))
	r1 := openMember(t, filepath.Join(root, "r1"), 32<<10, replicaOf("r1", 3))
	r2 := openMember(t, filepath.Join(root, "r2"), 80<<10, replicaOf("r2", 3))
	connect(t, leader, r1, true)
	l2 := connect(t, leader, r2, false)

	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() { publish(t, leader, fmt.Sprintf("p%d", p), 1, 2500, 25) })
	}
	wg.Wait()
	if err := leader.Flush(); err != nil {
		t.Fatal(err)
	}
	last := leader.Stats().LastChunkID
	waitCommitted(t, leader, last)
	waitCommitted(t, r1, last)
	waitCommitted(t, r2, last)

	if got := len(readAll(t, r2, First(), ReaderOptions{})); got != 10000 {
		t.Fatalf("replica r2 reads %d records, want 10000", got)
	}
	if st := leader.Stats(); st.Segments < 10 {
		t.Fatalf("leader has %d segments; the test wants rolls", st.Segments)
	}
	checkSame(t, leader, r1)
	checkSame(t, leader, r2)
	if a, b := leader.Stats().Segments, r2.Stats().Segments; a == b {
		t.Fatalf("r2 has the leader's %d segments; the test wants another layout", a)
	}
	want := trackingOf(leader)

	// Failover: r2 becomes leader of epoch 2 from what is on its disk.
	l2.stop()
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	r2 = openMember(t, r2.dir, 80<<10, leaderOf(3, 2))
	if got := trackingOf(r2); got != want {
		t.Fatalf("r2 reopened as leader: tracking\n%s\nwant\n%s", got, want)
	}
	r2.Acknowledge("r1", r2.Stats().LastChunkID) // a majority holds its log
	r := mustAppend(t, r2, "p0", Message{Entry: segment.AppendSimpleEntry(nil, []byte("again")), PublishingID: 2500})
	if r.Duplicates != 1 || r.Written != 0 {
		t.Fatalf("new leader: resubmitted id: %+v, want a duplicate", r)
	}
}

// Ensure a leader confirms and shows readers nothing that no replica
// holds, and does once one replica is back.
func TestReplicationCommitGating(t *testing.T) {
	root := t.TempDir()
	leader := openMember(t, filepath.Join(root, "l"), 16<<10, leaderOf(3, 1))
	sync1 := replicaOf("r1", 3)
	sync1.SyncBeforeAck = true
	r1 := openMember(t, filepath.Join(root, "r1"), 16<<10, sync1)
	r2 := openMember(t, filepath.Join(root, "r2"), 16<<10, replicaOf("r2", 3))
	l1, l2 := connect(t, leader, r1, false), connect(t, leader, r2, false)
	publish(t, leader, "p", 1, 100, 10)
	if err := leader.Flush(); err != nil {
		t.Fatal(err)
	}
	committed := leader.Stats().LastChunkID
	for _, s := range []*Stream{leader, r1, r2} {
		waitCommitted(t, s, committed)
	}
	l1.stop()
	l2.stop()

	rd, err := leader.NewReader(Next(), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rd1, err := r1.NewReader(Next(), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd1.Close()
	done := make(chan Result, 1)
	if err := leader.Submit(&Batch{Producer: "p", Messages: []Message{{Entry: segment.AppendSimpleEntry(nil, []byte("gated")), PublishingID: 101}}, Done: func(r Result) { done <- r }}); err != nil {
		t.Fatal(err)
	}
	if err := leader.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := leader.Stats(); st.LastChunkID <= committed || st.CommittedChunkID != committed {
		t.Fatalf("written %d, committed %d; want written past the commit %d", st.LastChunkID, st.CommittedChunkID, committed)
	}
	select {
	case r := <-done:
		t.Fatalf("batch confirmed without a replica: %+v", r)
	default:
	}
	if c, ok, err := rd.TryNext(); err != nil || ok {
		t.Fatalf("reader got chunk %d (%v) past the commit", c.Header.ChunkID, err)
	}

	connect(t, leader, r1, false)
	select {
	case r := <-done:
		if r.Err != nil || r.Written != 1 {
			t.Fatalf("gated batch: %+v", r)
		}
	case <-time.After(replicaWait):
		t.Fatal("gated batch not confirmed with a replica back")
	}
	ctx, cancel := context.WithTimeout(context.Background(), replicaWait)
	defer cancel()
	c, err := rd.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, err := c.ReadData(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := segment.AppendSimpleEntry(nil, []byte("gated")); !bytes.Equal(data, want) {
		t.Fatalf("reader got %q, want %q", data, want)
	}
	// The replica's reader, parked at the commit, wakes too.
	if c, err = rd1.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if data, err = c.ReadData(nil); err != nil || !bytes.Equal(data, segment.AppendSimpleEntry(nil, []byte("gated"))) {
		t.Fatalf("replica reader got %q (%v)", data, err)
	}
	waitCommitted(t, r1, leader.Stats().LastChunkID)
	checkSame(t, leader, r1)
}

// Ensure a replica restarted after the leader wrote many segments without
// it catches up from the leader's disk, and the leader's appenders, held
// while no majority had their chunks, are confirmed.
func TestReplicationRestartCatchUp(t *testing.T) {
	root := t.TempDir()
	leader := openMember(t, filepath.Join(root, "l"), 8<<10, leaderOf(2, 1))
	rdir := filepath.Join(root, "r")
	r := openMember(t, rdir, 8<<10, replicaOf("r", 2))
	l := connect(t, leader, r, false)
	publish(t, leader, "p", 1, 300, 20)
	l.stop()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	var results []chan Result
	for i := range 100 {
		ch := make(chan Result, 1)
		results = append(results, ch)
		var ms []Message
		for j := range 30 {
			id := uint64(301 + i*30 + j)
			ms = append(ms, Message{Entry: segment.AppendSimpleEntry(nil, fmt.Appendf(nil, "late-%d", id)), PublishingID: id})
		}
		if err := leader.Submit(&Batch{Producer: "p", Messages: ms, Done: func(r Result) { ch <- r }}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if err := leader.StoreOffset("c-late", uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := leader.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := leader.Stats(); st.CommittedChunkID >= st.LastChunkID {
		t.Fatalf("leader committed %d of %d without its replica", st.CommittedChunkID, st.LastChunkID)
	}

	r = openMember(t, rdir, 8<<10, replicaOf("r", 2))
	connect(t, leader, r, false)
	for i, ch := range results {
		select {
		case res := <-ch:
			if res.Err != nil || res.Written != 30 {
				t.Fatalf("batch %d: %+v", i, res)
			}
		case <-time.After(replicaWait):
			t.Fatalf("batch %d not confirmed after the replica came back", i)
		}
	}
	waitCommitted(t, r, leader.Stats().LastChunkID)
	checkSame(t, leader, r)
	if got := len(readAll(t, r, First(), ReaderOptions{})); got != 300+3000 {
		t.Fatalf("replica reads %d records, want %d", got, 3300)
	}
}

// Ensure a former leader rejoining as a replica drops the tail of its
// epoch that the new leader never got, and then holds the new leader's
// log byte for byte.
func TestReplicationDivergence(t *testing.T) {
	root := t.TempDir()
	adir, bdir := filepath.Join(root, "a"), filepath.Join(root, "b")
	a := openMember(t, adir, 8<<10, leaderOf(2, 1))
	b := openMember(t, bdir, 12<<10, replicaOf("b", 2))
	l := connect(t, a, b, false)
	publish(t, a, "p", 1, 400, 20)
	l.stop()
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	shared := a.CommittedChunkID()

	// A writes on in epoch 1; B never gets it, nothing commits.
	var lost []chan Result
	for i := range 40 {
		ch := make(chan Result, 1)
		lost = append(lost, ch)
		var ms []Message
		for j := range 20 {
			id := uint64(401 + i*20 + j)
			ms = append(ms, Message{Entry: segment.AppendSimpleEntry(nil, fmt.Appendf(nil, "lost-%d", id)), PublishingID: id})
		}
		if err := a.Submit(&Batch{Producer: "p", Messages: ms, Done: func(r Result) { ch <- r }}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.StoreOffset("c-lost", 12345); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.CommittedChunkID != shared || st.LastChunkID <= shared {
		t.Fatalf("a: committed %d, written %d; want %d committed and more written", st.CommittedChunkID, st.LastChunkID, shared)
	}
	if got := len(readAll(t, a, First(), ReaderOptions{})); got != 400 {
		t.Fatalf("a's readers see %d records, want the 400 committed", got)
	}
	aSegs := len(segmentFiles(t, adir))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for i, ch := range lost {
		if r := <-ch; !errors.Is(r.Err, ErrClosed) {
			t.Fatalf("uncommitted batch %d at close: %+v, want ErrClosed", i, r)
		}
	}

	// B leads epoch 2 and writes; A rejoins as its replica.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openMember(t, bdir, 12<<10, leaderOf(2, 2))
	var wg sync.WaitGroup
	wg.Go(func() { publish(t, b, "p", 401, 200, 20) })
	a = openMember(t, adir, 8<<10, replicaOf("a", 2))
	if h, err := a.EpochHistory(); err != nil || len(h.Starts) != 1 || len(segmentFiles(t, adir)) != aSegs || aSegs < 3 {
		t.Fatalf("a before rejoining: history %v (%v), %d segment files, %d before", h, err, len(segmentFiles(t, adir)), aSegs)
	}
	connect(t, b, a, false)
	wg.Wait()
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	last := b.Stats().LastChunkID
	waitCommitted(t, b, last)
	waitCommitted(t, a, last)
	checkSame(t, b, a)
	h, err := a.EpochHistory()
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Starts) != 2 || h.Starts[1].Epoch != 2 || h.Starts[1].First <= uint64(shared) {
		t.Fatalf("a's epoch history %v, want epoch 2 after chunk %d", h.Starts, shared)
	}
	t.Logf("a: %d segment files before, %v after; b: %v", aSegs, segmentFiles(t, adir), segmentFiles(t, bdir))
	if _, ok := a.QueryOffset("c-lost"); ok {
		t.Fatal("a kept the offset stored in its lost tail")
	}
	if got := len(readAll(t, a, First(), ReaderOptions{})); got != 600 {
		t.Fatalf("a reads %d records, want 600", got)
	}
}

// Ensure a replica whose log ends before what the leader's retention
// kept starts again at the leader's first offset, with its tracking.
func TestReplicationRetentionReset(t *testing.T) {
	root := t.TempDir()
	leader := openMember(t, filepath.Join(root, "l"), 8<<10, leaderOf(3, 1))
	r1 := openMember(t, filepath.Join(root, "r1"), 8<<10, replicaOf("r1", 3))
	r2dir := filepath.Join(root, "r2")
	r2 := openMember(t, r2dir, 8<<10, replicaOf("r2", 3))
	connect(t, leader, r1, false)
	l2 := connect(t, leader, r2, false)
	publish(t, leader, "p", 1, 200, 20)
	l2.stop()
	r2End := r2.Stats().NextOffset
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	publish(t, leader, "p", 201, 2000, 50)
	if err := leader.SetRetention(40<<10, 0); err != nil {
		t.Fatal(err)
	}
	if first := leader.FirstSegmentBase(); first <= r2End {
		t.Fatalf("leader's first offset %d, replica's end %d: the test wants retention past it", first, r2End)
	}

	r2 = openMember(t, r2dir, 8<<10, replicaOf("r2", 3))
	connect(t, leader, r2, false)
	waitCommitted(t, r2, leader.Stats().LastChunkID)
	if a, b := r2.FirstSegmentBase(), leader.FirstSegmentBase(); a != b {
		t.Fatalf("replica starts at %d, leader at %d", a, b)
	}
	checkSame(t, leader, r2)
}

// Ensure the history comparison finds the last shared offset.
func TestFollowPoint(t *testing.T) {
	h := func(first, next uint64, starts ...EpochStart) EpochHistory {
		return EpochHistory{First: first, Next: next, Starts: starts}
	}
	cases := []struct {
		name            string
		leader, replica EpochHistory
		offset          uint64
		reset           bool
	}{
		{"empty both", h(0, 0), h(0, 0), 0, false},
		{"empty replica", h(0, 50, EpochStart{1, 0}), h(0, 0), 0, false},
		{"replica behind", h(0, 50, EpochStart{1, 0}), h(0, 20, EpochStart{1, 0}), 20, false},
		{"replica ahead in old epoch", h(0, 90, EpochStart{1, 0}, EpochStart{2, 40}), h(0, 70, EpochStart{1, 0}), 40, false},
		{"replica with unknown epoch", h(0, 90, EpochStart{1, 0}, EpochStart{3, 40}), h(0, 60, EpochStart{1, 0}, EpochStart{2, 30}), 30, false},
		{"nothing shared", h(0, 90, EpochStart{2, 0}), h(0, 60, EpochStart{1, 0}), 0, true},
		{"retention past replica", h(100, 190, EpochStart{1, 0}), h(0, 60, EpochStart{1, 0}), 100, true},
		{"empty replica elsewhere", h(100, 190, EpochStart{1, 100}), h(0, 0), 100, true},
	}
	for _, c := range cases {
		off, reset := FollowPoint(c.leader, c.replica)
		if off != c.offset || reset != c.reset {
			t.Errorf("%s: got %d, %v; want %d, %v", c.name, off, reset, c.offset, c.reset)
		}
	}
}

// Ensure the leader stops serving a replica that went away, and a
// replica a leader that did, each with the reason.
func TestReplicationPeerGone(t *testing.T) {
	root := t.TempDir()
	leader := openMember(t, filepath.Join(root, "l"), 8<<10, leaderOf(2, 1))
	r := openMember(t, filepath.Join(root, "r"), 8<<10, replicaOf("r", 2))
	ctx := context.Background()
	a, b := net.Pipe()
	serve := make(chan error, 1)
	go func() { serve <- ServeReplica(ctx, leader, a) }()
	follow := make(chan error, 1)
	go func() { follow <- Follow(ctx, r, b) }()
	publish(t, leader, "p", 1, 50, 10)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan error{"follow": follow, "serve": serve} {
		select {
		case err := <-ch:
			if err == nil || errors.Is(err, context.Canceled) {
				t.Fatalf("%s ended with %v, want the peer's failure", name, err)
			}
		case <-time.After(replicaWait):
			t.Fatalf("%s still running with the replica closed", name)
		}
	}
	if err := ServeReplica(ctx, r, a); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ServeReplica on a replica: %v", err)
	}
	if err := Follow(ctx, leader, b); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("Follow on a leader: %v", err)
	}
	if err := r.Submit(&Batch{}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Submit on a replica: %v", err)
	}
}

// Ensure a new leader commits the older epoch's tail of its log only
// with a chunk of its own epoch, once a majority holds that chunk (as
// Raft commits only its own term's entries by counting).
func TestReplicationCommitOwnEpoch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "l")
	l := openMember(t, dir, 8<<10, leaderOf(3, 1))
	for i := range 10 {
		if err := l.Submit(&Batch{Messages: []Message{msg(fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	old := l.Stats().LastChunkID
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openMember(t, dir, 8<<10, leaderOf(3, 2))
	st := l.Stats()
	if st.LastChunkID <= old || st.CommittedChunkID != -1 {
		t.Fatalf("reopened leader: written %d, committed %d; want its epoch's first chunk after %d, nothing committed", st.LastChunkID, st.CommittedChunkID, old)
	}
	h, err := l.EpochHistory()
	if err != nil {
		t.Fatal(err)
	}
	if want := []EpochStart{{1, 0}, {2, uint64(st.LastChunkID)}}; !slices.Equal(h.Starts, want) {
		t.Fatalf("epoch history %v, want %v", h.Starts, want)
	}
	l.Acknowledge("r1", old) // a majority holds the old epoch's chunks
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if c := l.CommittedChunkID(); c != -1 {
		t.Fatalf("committed %d from the old epoch alone", c)
	}
	l.Acknowledge("r1", st.LastChunkID)
	waitCommitted(t, l, st.LastChunkID)
	if got := len(readAll(t, l, First(), ReaderOptions{})); got != 10 {
		t.Fatalf("reads %d records, want 10", got)
	}
}

// Ensure a replica's writer, like a leader's, goes idle without appends
// (no goroutine, no open file) and resumes with the next chunks.
func TestReplicaIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		leader, err := Create(filepath.Join(root, "l"), Config{}, Options{RetentionInterval: -1, IdleTimeout: time.Second,
			Replication: &Replication{Role: RoleLeader, Member: "l", Members: 2}})
		if err != nil {
			t.Fatal(err)
		}
		defer leader.Close()
		r, err := Create(filepath.Join(root, "r"), Config{}, Options{RetentionInterval: -1, IdleTimeout: time.Second,
			Replication: &Replication{Role: RoleReplica, Member: "r", Members: 2}})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		ctx, cancel := context.WithCancel(context.Background())
		a, b := net.Pipe()
		var wg sync.WaitGroup
		wg.Go(func() { ServeReplica(ctx, leader, a) })
		wg.Go(func() { Follow(ctx, r, b) })

		publish(t, leader, "p", 1, 20, 5)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		checkIdle(t, r, "replica without appends")

		publish(t, leader, "p", 21, 20, 5)
		last := leader.Stats().LastChunkID
		waitCommitted(t, r, last)
		if got := len(readAll(t, r, First(), ReaderOptions{})); got != 40 {
			t.Fatalf("replica reads %d records after resuming, want 40", got)
		}
		cancel()
		wg.Wait()
	})
}

// A member asked to serve a replica while it is not the leader (it has
// not yet applied the move that makes it one) closes the connection, so
// the replica's Follow ends at once and it dials again, instead of
// waiting for a Start frame that never comes.
func TestServeReplicaNotLeaderCloses(t *testing.T) {
	root := t.TempDir()
	notLeader := openMember(t, filepath.Join(root, "a"), 8<<10, replicaOf("a", 3))
	r := openMember(t, filepath.Join(root, "b"), 8<<10, replicaOf("b", 3))
	a, b := net.Pipe()
	follow := make(chan error, 1)
	go func() { follow <- Follow(context.Background(), r, b) }()
	if err := ServeReplica(context.Background(), notLeader, a); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ServeReplica on a replica: %v", err)
	}
	select {
	case err := <-follow:
		if err == nil || errors.Is(err, context.Canceled) {
			t.Fatalf("Follow ended with %v, want the closed connection", err)
		}
	case <-time.After(replicaWait):
		t.Fatal("Follow still waiting on a member that refused to lead")
	}
}
