package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/internal/testutil"
)

// A SIGKILL test of the daemon as users run it, with amqp091-go: the
// broker runs in a child process (this test binary, re-executed), the
// test publishes with confirms to a durable classic queue and a quorum
// queue, consumes with acks, requeues and messages held unacked, and kills
// the child with SIGKILL at a random moment, several times on one data
// directory. Every delivery, before and after each restart, is checked
// against what the client saw:
//
//   - a message whose ack the broker had applied before its last write of
//     ack states that landed before the kill began is never delivered
//     again. A round trip on the channel after the ack tells when it was
//     applied (ackSync); the broker's Prometheus endpoint tells, just
//     before the kill, when that write began (ackCoverage). No timing
//     guess: acks the persister had not written yet may come back, as
//     redeliveries with the flag set;
//   - a message delivered before is redelivered with the redelivered flag
//     set, and a quorum queue's x-delivery-count is never below the number
//     of earlier deliveries the client saw;
//   - a confirmed message that was never acked is there after every
//     restart, exactly once; nothing comes back that was not published.
//
// The quorum queue has no delivery limit, so that nothing leaves it but
// by an ack. WARREN_KILL_TRIALS=n runs n kills on the one data directory
// (default 3; 50 for a thorough run), WARREN_KILL_SEED reproduces a run.

const (
	killDirEnv    = "WARREN_KILL_DIR"    // the child's data directory
	killTrialsEnv = "WARREN_KILL_TRIALS" // kills per data directory
	killSeedEnv   = "WARREN_KILL_SEED"
	// ackGrace is how long before a kill a stored stream offset must
	// have been queried for it to be kept (chaos_test.go): a store has
	// no confirm, and the stream writes it with its next write.
	ackGrace = 500 * time.Millisecond
)

// killQueue is a queue under test: its name and type.
type killQueue struct {
	name   string
	quorum bool
}

// killQueues are TestKill9's queues.
var killQueues = []killQueue{
	{"kill-classic", false},
	{"kill-quorum", true},
}

// TestKillChild is the broker process TestKill9 kills: it serves AMQP on
// a free loopback port, prints "ready <addr>" and runs until killed.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("helper process of TestKill9")
	}
	time.AfterFunc(2*time.Minute, func() { os.Exit(4) }) // never outlive the parent by much
	cfg := defaults()
	cfg.DataDir = dir
	cfg.AMQPListen = "127.0.0.1:0"
	cfg.StreamListen = ""
	cfg.HTTPListen = ""
	cfg.PrometheusListen = "127.0.0.1:0" // for the persister's coverage (ackCoverage)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ready := make(chan readyAddrs, 1)
	go func() {
		a := <-ready
		fmt.Printf("ready %s %s\n", a.AMQP, a.Prometheus)
	}()
	if err := run(context.Background(), cfg, logger, ready); err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(3)
	}
}

// killMsg is what the client knows of one message.
type killMsg struct {
	queue      int
	confirmed  bool
	deliveries int           // deliveries seen
	acked      bool          // an ack was sent
	ackedAt    time.Time     // when
	seenAt     time.Time     // when the broker was known to have the ack (ackSync)
	seenAge    time.Duration // at the kill: how long the broker had had the ack; 0 if unknown
	ackRun     int           // in which run
	settledOK  bool          // the broker had applied the ack before its last landed write before the kill
	hist       []string      // events, for failure messages
	gone       bool          // acked, or unconfirmed, and absent after a restart
}

func (m *killMsg) note(run int, format string, args ...any) {
	m.hist = append(m.hist, fmt.Sprintf("%d:", run)+fmt.Sprintf(format, args...))
}

// killStats are the counts a run reports.
type killStats struct {
	published, confirmed, delivered, redelivered, acked int
	ackedBack                                           int // acked, delivered again after a restart (any age)
	ackedBackOld                                        int // of those, whose ack the broker had applied before the last landed write began
	unflagged                                           int // delivered again without the redelivered flag
	underCount                                          int // quorum: x-delivery-count below the deliveries seen
	lost                                                int // confirmed, never acked, missing after a restart
	dupes                                               int // delivered twice in one drain
	deliveredInDrain                                    int
	// maxBackAge is the longest the broker had had an ack (as ackSync
	// measures) that came back after the kill (its write had not landed
	// yet); maxLag the longest from the start of the last landed write
	// of ack states to a kill: how long an applied ack may wait.
	maxBackAge, maxLag time.Duration
}

func (s *killStats) add(o killStats) {
	s.published += o.published
	s.confirmed += o.confirmed
	s.delivered += o.delivered
	s.redelivered += o.redelivered
	s.acked += o.acked
	s.ackedBack += o.ackedBack
	s.ackedBackOld += o.ackedBackOld
	s.unflagged += o.unflagged
	s.underCount += o.underCount
	s.lost += o.lost
	s.dupes += o.dupes
	s.deliveredInDrain += o.deliveredInDrain
	s.maxBackAge = max(s.maxBackAge, o.maxBackAge)
	s.maxLag = max(s.maxLag, o.maxLag)
}

// killState is the client's knowledge of one data directory.
type killState struct {
	t       *testing.T
	seed    uint64
	seedEnv string      // the variable that replays seed
	queues  []killQueue // the queues under test
	run     int
	mu      sync.Mutex
	msgs    map[string]*killMsg
	st      killStats
	errs    int
}

func (k *killState) errorf(format string, args ...any) {
	k.t.Helper()
	k.errs++
	if k.errs <= 20 {
		k.t.Errorf("seed %d (rerun with %s=%d), run %d: %s", k.seed, k.seedEnv, k.seed, k.run, fmt.Sprintf(format, args...))
	}
}

// delivered checks one delivery of queue qi; it returns the message, or
// nil for one never published.
// REQUIRES: k.mu held.
func (k *killState) deliveredLocked(qi int, d *amqp091.Delivery) *killMsg {
	id := d.MessageId
	m := k.msgs[id]
	if m == nil {
		k.errorf("queue %d: delivered %q, never published", qi, id)
		return nil
	}
	if m.gone {
		k.errorf("message %s delivered after it was gone; history %v", id, m.hist)
	}
	if m.queue != qi {
		k.errorf("message %s of queue %d delivered from queue %d", id, m.queue, qi)
	}
	if string(d.Body) != killBody(id) {
		k.errorf("message %s: body %.40q", id, d.Body)
	}
	k.st.delivered++
	if d.Redelivered {
		k.st.redelivered++
	}
	if m.acked {
		if m.ackRun == k.run {
			k.errorf("message %s delivered again in the run that acked it; history %v", id, m.hist)
		}
		k.st.ackedBack++
		k.st.maxBackAge = max(k.st.maxBackAge, m.seenAge)
		if m.settledOK {
			k.st.ackedBackOld++
			k.errorf("message %s delivered again, though its ack was applied before the broker's last landed write of ack states began; history %v", id, m.hist)
		}
		m.acked, m.settledOK, m.seenAge = false, false, 0 // it is in the queue again
	}
	if m.deliveries > 0 && !d.Redelivered {
		k.st.unflagged++
		k.errorf("message %s delivered again without the redelivered flag; history %v", id, m.hist)
	}
	if k.queues[qi].quorum {
		var count int64
		switch v := d.Headers["x-delivery-count"].(type) {
		case nil:
		case int64:
			count = v
		case int32:
			count = int64(v)
		default:
			k.errorf("message %s: x-delivery-count %T %v", id, v, v)
		}
		if count < int64(m.deliveries) {
			k.st.underCount++
			k.errorf("message %s: x-delivery-count %d after %d deliveries; history %v", id, count, m.deliveries, m.hist)
		}
		m.note(k.run, "d r=%v n=%d", d.Redelivered, count)
	} else {
		m.note(k.run, "d r=%v", d.Redelivered)
	}
	m.deliveries++
	return m
}

func killBody(id string) string { return "body of " + id }

// startChild starts the broker on dir and returns it and its address.
func (k *killState) startChild(dir string) (cmd *exec.Cmd, amqpAddr, promAddr string, stderr *testutil.LockedBuffer) {
	t := k.t
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killDirEnv+"="+dir)
	stderr = &testutil.LockedBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { // after a failure; a no-op for a child already reaped
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		defer close(lines)
		br := bufio.NewReader(out)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(l, "ready ") || strings.HasPrefix(l, "error ") {
				lines <- strings.TrimSpace(l)
				io.Copy(io.Discard, br) // the rest is the test framework's
				return
			}
		}
	}()
	select {
	case l, ok := <-lines:
		if !ok || !strings.HasPrefix(l, "ready ") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("broker did not start: %q\nstderr:\n%s", l, stderr.String())
		}
		amqpAddr, promAddr, _ = strings.Cut(strings.TrimPrefix(l, "ready "), " ")
		return cmd, amqpAddr, promAddr, stderr
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("broker not ready after 30 s\nstderr:\n%s", stderr.String())
	}
	return nil, "", "", nil
}

// ackCoverage asks the broker's Prometheus endpoint when the last write
// of the ack states that reached the disk began
// (warren_ack_state_persisted_timestamp_seconds): every ack applied
// before then must survive a kill. The zero time when there was none.
func ackCoverage(promAddr string) (time.Time, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + promAddr + "/metrics")
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	const name = "warren_ack_state_persisted_timestamp_seconds "
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("%s%s: %w", name, v, err)
			}
			return time.Unix(0, int64(f*1e9)), nil
		}
	}
	return time.Time{}, sc.Err()
}

func (k *killState) declare(ch *amqp091.Channel) ([]amqp091.Queue, error) {
	var out []amqp091.Queue
	for _, kq := range k.queues {
		var args amqp091.Table
		if kq.quorum {
			args = amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(-1)}
		}
		q, err := ch.QueueDeclare(kq.name, true, false, false, false, args)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// drain consumes every ready message of every queue after a restart,
// checks each, acks most and leaves the others unacked (they go back to
// their queue when the connection closes). It returns the ids seen.
func (k *killState) drain(conn *amqp091.Connection, rng *rand.Rand) map[string]bool {
	t := k.t
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	qs, err := k.declare(ch)
	if err != nil {
		t.Fatalf("declare: %v", err)
	}
	seen := map[string]bool{}
	as := k.newAckSync(ch, 0)
	for qi, q := range qs {
		want := q.Messages
		ds, err := ch.Consume(q.Name, fmt.Sprintf("drain-%d", qi), false, false, false, false, nil)
		if err != nil {
			t.Fatalf("consume: %v", err)
		}
		timeout := time.After(20 * time.Second)
		for n := 0; n < want; n++ {
			var d amqp091.Delivery
			select {
			case d = <-ds:
			case <-timeout:
				t.Fatalf("queue %d: %d of %d messages after 20 s", qi, n, want)
			}
			k.mu.Lock()
			m := k.deliveredLocked(qi, &d)
			k.st.deliveredInDrain++
			if m != nil {
				if seen[d.MessageId] {
					k.st.dupes++
					k.errorf("queue %d: message %s twice after the restart; history %v", qi, d.MessageId, m.hist)
				}
				seen[d.MessageId] = true
			}
			ack := m != nil && rng.IntN(4) != 0
			if ack {
				m.acked, m.ackedAt, m.seenAt, m.ackRun = true, time.Time{}, time.Time{}, k.run
			}
			k.mu.Unlock()
			if ack {
				if err := d.Ack(false); err != nil {
					t.Fatalf("ack: %v", err)
				}
				k.mu.Lock()
				m.ackedAt = time.Now()
				m.note(k.run, "drain ack")
				k.mu.Unlock()
				if err := as.sent(m); err != nil {
					t.Fatalf("qos: %v", err)
				}
			}
		}
		if err := ch.Cancel(fmt.Sprintf("drain-%d", qi), false); err != nil {
			t.Fatalf("cancel: %v", err)
		}
	}
	k.mu.Lock()
	for id, m := range k.msgs {
		switch {
		case m.gone:
		case seen[id]:
			m.confirmed = true // in its queue: there until acked
		case m.confirmed && !m.acked:
			k.st.lost++
			k.errorf("queue %d: confirmed message %s missing after the restart; history %v", m.queue, id, m.hist)
			fallthrough
		default:
			m.gone = true // acked, or never stored: never to come back
			m.note(k.run, "gone")
		}
	}
	k.mu.Unlock()
	return seen
}

// load runs a publisher and a consumer on every queue until the broker
// is killed.
func (k *killState) load(conn *amqp091.Connection, rng *rand.Rand, wg *sync.WaitGroup) {
	for qi := range k.queues {
		wg.Add(2)
		go k.publisher(conn, qi, rand.New(rand.NewPCG(rng.Uint64(), 1)), wg)
		go k.consumer(conn, qi, rand.New(rand.NewPCG(rng.Uint64(), 2)), wg)
	}
}

func (k *killState) publisher(conn *amqp091.Connection, qi int, rng *rand.Rand, wg *sync.WaitGroup) {
	defer wg.Done()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	if err := ch.Confirm(false); err != nil {
		return
	}
	window := 1 + rng.IntN(200)
	budget := 1000 + rng.IntN(9000) // then idle until the kill: acks age
	type pending struct {
		id   string
		conf *amqp091.DeferredConfirmation
	}
	var inflight []pending
	wait := func(p pending) bool {
		ok, err := p.conf.WaitContext(context.Background())
		if err != nil || !ok {
			return false
		}
		k.mu.Lock()
		m := k.msgs[p.id]
		m.confirmed = true
		m.note(k.run, "confirmed")
		k.st.confirmed++
		k.mu.Unlock()
		return true
	}
	for seq := 0; seq < budget; seq++ {
		id := fmt.Sprintf("%d.%d.%d", qi, k.run, seq)
		k.mu.Lock()
		m := &killMsg{queue: qi}
		m.note(k.run, "publish")
		k.msgs[id] = m
		k.st.published++
		k.mu.Unlock()
		conf, err := ch.PublishWithDeferredConfirm("", k.queues[qi].name, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, MessageId: id, Body: []byte(killBody(id)),
		})
		if err != nil {
			return
		}
		inflight = append(inflight, pending{id, conf})
		if len(inflight) >= window {
			if !wait(inflight[0]) {
				return
			}
			inflight = inflight[1:]
		}
		if rng.IntN(100) == 0 {
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
		}
	}
	for _, p := range inflight {
		if !wait(p) {
			return
		}
	}
}

func (k *killState) consumer(conn *amqp091.Connection, qi int, rng *rand.Rand, wg *sync.WaitGroup) {
	defer wg.Done()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	prefetch := 1 + rng.IntN(300)
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return
	}
	held := 0
	ds, err := ch.Consume(k.queues[qi].name, "", false, false, false, false, nil)
	if err != nil {
		return
	}
	as := k.newAckSync(ch, prefetch)
	for d := range ds {
		k.mu.Lock()
		m := k.deliveredLocked(qi, &d)
		r := rng.IntN(100)
		var act string
		switch {
		case m == nil:
			act = "ack"
		case r < 85:
			act = "ack"
			m.acked, m.ackedAt, m.seenAt, m.ackRun = true, time.Time{}, time.Time{}, k.run // ackedAt once sent
			k.st.acked++
		case r < 95 && m.deliveries < 6:
			act = "requeue"
			m.note(k.run, "nack requeue")
		case held < prefetch/2:
			act = "hold" // unacked until the kill
			held++
			m.note(k.run, "hold")
		default:
			act = "ack"
			m.acked, m.ackedAt, m.seenAt, m.ackRun = true, time.Time{}, time.Time{}, k.run
			k.st.acked++
		}
		k.mu.Unlock()
		switch act {
		case "ack":
			if err := d.Ack(false); err != nil {
				return
			}
			if m != nil {
				k.mu.Lock()
				m.ackedAt = time.Now()
				m.note(k.run, "ack")
				k.mu.Unlock()
				if as.sent(m) != nil {
					return
				}
			}
		case "requeue":
			if err := d.Nack(false, true); err != nil {
				return
			}
		}
	}
}

// ackSync finds out when the broker has the acks a channel sent: AMQP
// 0-9-1 does not confirm an ack, but a channel handles its frames in
// order, so once a synchronous method sent after some acks is answered,
// the broker has applied them. Every few acks, or every few milliseconds
// of acks, it sends basic.qos with the channel's prefetch unchanged and
// stamps the acks sent before it with the time of its answer. The
// persister's promise runs from then: an ack applied is on disk within
// about 100 ms plus one fsync.
type ackSync struct {
	k        *killState
	ch       *amqp091.Channel
	prefetch int
	pending  []*killMsg
	since    time.Time
}

func (k *killState) newAckSync(ch *amqp091.Channel, prefetch int) *ackSync {
	return &ackSync{k: k, ch: ch, prefetch: prefetch}
}

// sent books an ack sent for m and, when it is time, makes the round
// trip.
func (s *ackSync) sent(m *killMsg) error {
	if len(s.pending) == 0 {
		s.since = time.Now()
	}
	s.pending = append(s.pending, m)
	if len(s.pending) < 32 && time.Since(s.since) < 20*time.Millisecond {
		return nil
	}
	if err := s.ch.Qos(s.prefetch, 0, false); err != nil {
		return err
	}
	now := time.Now()
	s.k.mu.Lock()
	for _, m := range s.pending {
		if m.acked && m.ackRun == s.k.run {
			m.seenAt = now
		}
	}
	s.k.mu.Unlock()
	clear(s.pending)
	s.pending = s.pending[:0]
	return nil
}

// kill kills the child and books which acks are old enough to be kept.
func (k *killState) kill(cmd *exec.Cmd, promAddr string) {
	covered, err := ackCoverage(promAddr)
	if err != nil {
		cmd.Process.Kill()
		k.t.Fatalf("the persister's coverage: %v", err)
	}
	k.mu.Lock()
	killAt := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		k.mu.Unlock()
		k.t.Fatalf("kill: %v", err)
	}
	if !covered.IsZero() {
		k.st.maxLag = max(k.st.maxLag, killAt.Sub(covered))
	}
	for _, m := range k.msgs {
		if !m.acked || m.ackRun != k.run || m.seenAt.IsZero() {
			continue
		}
		m.seenAge = killAt.Sub(m.seenAt)
		if !m.seenAt.After(covered) {
			m.settledOK = true
			m.note(k.run, "ack applied %v before the kill (sent %v before), before a write that landed began",
				killAt.Sub(m.seenAt).Round(time.Millisecond), killAt.Sub(m.ackedAt).Round(time.Millisecond))
		}
	}
	k.mu.Unlock()
	cmd.Wait()
}

// Ensure the daemon keeps acknowledgements and delivery state across
// SIGKILL as promised (see the comment at the top of this file).
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	seed := testutil.Seed(t, killSeedEnv)
	trials := 3
	if s := os.Getenv(killTrialsEnv); s != "" {
		trials, _ = strconv.Atoi(s)
	}
	t.Logf("%d kills", trials)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	k := &killState{t: t, seed: seed, seedEnv: killSeedEnv, queues: killQueues, msgs: map[string]*killMsg{}}
	var total killStats
	for trial := 1; trial <= trials+1; trial++ {
		k.run = trial
		k.st = killStats{}
		cmd, addr, promAddr, stderr := k.startChild(dir)
		conn, err := amqp091.Dial("amqp://guest:guest@" + addr + "/")
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("dial: %v", err)
		}
		k.drain(conn, rng)
		if trial > trials {
			conn.Close()
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			t.Logf("last restart: %d in the queues (acked before the kill and back %d, of which applied before a landed write %d; redelivered unflagged %d; counts under %d; lost %d)",
				k.st.deliveredInDrain, k.st.ackedBack, k.st.ackedBackOld, k.st.unflagged, k.st.underCount, k.st.lost)
			total.add(k.st)
			break
		}
		var wg sync.WaitGroup
		k.load(conn, rng, &wg)
		delay := time.Duration(300+rng.IntN(1700)) * time.Millisecond
		time.Sleep(delay)
		k.kill(cmd, promAddr)
		conn.Close()
		wg.Wait()
		if s := stderr.String(); strings.Contains(s, "level=ERROR") || strings.Contains(s, "panic") {
			t.Errorf("broker logged errors:\n%s", s)
		}
		t.Logf("run %d: after the restart %d in the queues (acked before the kill and back %d, of which applied before a landed write %d; redelivered unflagged %d; counts under %d; lost %d); then published %d, confirmed %d, delivered %d (%d redelivered), acked %d; killed after %v",
			trial, k.st.deliveredInDrain, k.st.ackedBack, k.st.ackedBackOld, k.st.unflagged, k.st.underCount, k.st.lost,
			k.st.published, k.st.confirmed, k.st.delivered, k.st.redelivered, k.st.acked, delay)
		total.add(k.st)
		if t.Failed() && os.Getenv(killTrialsEnv) == "" {
			break
		}
	}
	t.Logf("total: published %d, confirmed %d, delivered %d, acked %d; acked and back %d (%d applied before a landed write; the one applied longest before the kill: %v; the persister's longest lag at a kill: %v), unflagged %d, under-counted %d, lost %d, duplicates %d",
		total.published, total.confirmed, total.delivered, total.acked, total.ackedBack, total.ackedBackOld, total.maxBackAge.Round(time.Millisecond), total.maxLag.Round(time.Millisecond),
		total.unflagged, total.underCount, total.lost, total.dupes)
}
