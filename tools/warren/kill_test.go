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
// Beside them, fan-out by reference (fanout_test.go): a fanout exchange
// bound to two classic queues and a quorum queue, each checked as above
// with its own ack state for the messages all three got, and at the end
// the body log's space coming back once every queue acked.
//
// The quorum queues have no delivery limit, so that nothing leaves them
// but by an ack. WARREN_KILL_TRIALS=n runs n kills on the one data directory
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
	fan    bool // bound to the state's fanout exchange (fanout_test.go)
}

// killQueues are TestKill9's queues.
var killQueues = []killQueue{
	{"kill-classic", false, false},
	{"kill-quorum", true, false},
	// Bound to killFanout: fan-out by reference (fanout_test.go).
	{"kill-fan-classic-a", false, true},
	{"kill-fan-classic-b", false, true},
	{"kill-fan-quorum", true, true},
}

// killFanout is TestKill9's fanout exchange.
const killFanout = "kill-fan"

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

// killMsg is what the client knows of one message in one queue (msgKey).
type killMsg struct {
	pubRun     int // the run that published it
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

// msgKey names a message in one queue: a message published through the
// fanout exchange is in several queues, each with its own ack state.
type msgKey struct {
	queue int
	id    string
}

func (m *killMsg) note(run int, format string, args ...any) {
	m.hist = append(m.hist, fmt.Sprintf("%d:", run)+fmt.Sprintf(format, args...))
}

// killStats are the counts a run reports.
type killStats struct {
	published, confirmed, delivered, redelivered, acked int // one per queue a message is in
	fanPublished, fanConfirmed                          int // messages published through the fanout exchange
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
	s.fanPublished += o.fanPublished
	s.fanConfirmed += o.fanConfirmed
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
	fanout  string      // the fanout exchange the queues with fan set are bound to
	run     int
	mu      sync.Mutex
	msgs    map[msgKey]*killMsg
	st      killStats // the queues without fan
	fst     killStats // the fan-out queues
	bodies  bodyLogStats
	errs    int
}

// statsLocked returns the counts queue qi's messages go to.
// REQUIRES: k.mu held.
func (k *killState) statsLocked(qi int) *killStats {
	if k.queues[qi].fan {
		return &k.fst
	}
	return &k.st
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
	m := k.msgs[msgKey{qi, id}]
	if m == nil {
		k.errorf("%s: delivered %q, never published to it", k.queues[qi].name, id)
		return nil
	}
	st := k.statsLocked(qi)
	if m.gone {
		k.errorf("%s: message %s delivered after it was gone; history %v", k.queues[qi].name, id, m.hist)
	}
	if !killBodyOK(id, d.Body) {
		k.errorf("%s: message %s: body of %d bytes %.40q, want %d bytes", k.queues[qi].name, id, len(d.Body), d.Body, len(killBody(id)))
	}
	st.delivered++
	if d.Redelivered {
		st.redelivered++
	}
	if m.acked {
		if m.ackRun == k.run {
			k.errorf("%s: message %s delivered again in the run that acked it; history %v", k.queues[qi].name, id, m.hist)
		}
		st.ackedBack++
		st.maxBackAge = max(st.maxBackAge, m.seenAge)
		if m.settledOK {
			st.ackedBackOld++
			k.errorf("%s: message %s delivered again, though its ack was applied before the broker's last landed write of ack states began; history %v", k.queues[qi].name, id, m.hist)
		}
		m.acked, m.settledOK, m.seenAge = false, false, 0 // it is in the queue again
	}
	if m.deliveries > 0 && !d.Redelivered {
		st.unflagged++
		k.errorf("%s: message %s delivered again without the redelivered flag; history %v", k.queues[qi].name, id, m.hist)
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
			k.errorf("%s: message %s: x-delivery-count %T %v", k.queues[qi].name, id, v, v)
		}
		if count < int64(m.deliveries) {
			st.underCount++
			k.errorf("%s: message %s: x-delivery-count %d after %d deliveries; history %v", k.queues[qi].name, id, count, m.deliveries, m.hist)
		}
		m.note(k.run, "d r=%v n=%d", d.Redelivered, count)
	} else {
		m.note(k.run, "d r=%v", d.Redelivered)
	}
	m.deliveries++
	return m
}

// killBody is the body of message id: "body of <id>", then for an id
// that names a padding (fanout_test.go) that many bytes of "|<id>"
// repeated, so that a body cut short, run long or swapped is seen.
func killBody(id string) string {
	b := "body of " + id
	if n := killPad(id); n > 0 {
		unit := "|" + id
		b += strings.Repeat(unit, n/len(unit)+1)[:n]
	}
	return b
}

// killBodyOK reports whether b is killBody(id), without building it.
func killBodyOK(id string, b []byte) bool {
	head := "body of " + id
	n := killPad(id)
	if len(b) != len(head)+n || string(b[:len(head)]) != head {
		return false
	}
	unit := "|" + id
	for i, c := range b[len(head):] {
		if c != unit[i%len(unit)] {
			return false
		}
	}
	return true
}

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
	if k.fanout == "" {
		return out, nil
	}
	// Bound once, on the fresh data directory: a binding the broker lost
	// in a kill would show as the fan-out messages published after the
	// restart missing, not be mended here.
	if k.run > 1 {
		if err := ch.ExchangeDeclarePassive(k.fanout, "fanout", true, false, false, false, nil); err != nil {
			return nil, fmt.Errorf("exchange %s after a restart: %w", k.fanout, err)
		}
		return out, nil
	}
	if err := ch.ExchangeDeclare(k.fanout, "fanout", true, false, false, false, nil); err != nil {
		return nil, err
	}
	for _, kq := range k.queues {
		if kq.fan {
			if err := ch.QueueBind(kq.name, "", k.fanout, false, nil); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// drainOpts say which queues drain reads and how it acks.
type drainOpts struct {
	only   func(killQueue) bool // the queues to drain; nil: all
	ackAll bool                 // ack every message (else about 3 in 4)
}

// drainQueues is drain of the queues o.only names: every ready message
// is checked, and a confirmed message not acked that is not among them
// is lost. Messages of the other queues are neither read nor judged.
func (k *killState) drainQueues(conn *amqp091.Connection, rng *rand.Rand, o drainOpts) {
	t := k.t
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	qs, err := k.declare(ch)
	if err != nil {
		t.Fatalf("run %d: declare: %v", k.run, err)
	}
	drained := func(qi int) bool { return o.only == nil || o.only(k.queues[qi]) }
	seen := map[msgKey]bool{}
	as := k.newAckSync(ch, 0)
	for qi, q := range qs {
		if !drained(qi) {
			continue
		}
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
				t.Fatalf("run %d: %s: %d of %d messages after 20 s", k.run, q.Name, n, want)
			}
			key := msgKey{qi, d.MessageId}
			k.mu.Lock()
			m := k.deliveredLocked(qi, &d)
			k.statsLocked(qi).deliveredInDrain++
			if m != nil {
				if seen[key] {
					k.statsLocked(qi).dupes++
					k.errorf("%s: message %s twice after the restart; history %v", q.Name, d.MessageId, m.hist)
				}
				seen[key] = true
			}
			// A fan-out queue's drain leaves unacked only messages of the
			// last run, so that no message pins the body log for more than
			// two runs and its segments go during the chaos run too.
			ack := m != nil && (rng.IntN(4) != 0 || o.ackAll || k.queues[qi].fan && m.pubRun < k.run-1)
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
	for key, m := range k.msgs {
		switch {
		case !drained(key.queue) || m.gone:
		case seen[key]:
			m.confirmed = true // in its queue: there until acked
		case m.confirmed && !m.acked:
			k.statsLocked(key.queue).lost++
			k.errorf("%s: confirmed message %s missing after the restart; history %v", k.queues[key.queue].name, key.id, m.hist)
			fallthrough
		default:
			m.gone = true // acked, or never stored: never to come back
			m.note(k.run, "gone")
		}
	}
	k.mu.Unlock()
}

// load runs a publisher and a consumer on every queue until the broker
// is killed, and with a fanout exchange a publisher to it: the fan-out
// queues get mostly messages through it (stored once, a reference in
// each queue) and a few straight through the default exchange (a copy
// in the queue's log).
func (k *killState) load(conn *amqp091.Connection, rng *rand.Rand, wg *sync.WaitGroup) {
	var fan []int
	for qi, kq := range k.queues {
		budget := 1000 + rng.IntN(9000) // then idle until the kill: acks age
		style := ackMixed
		if kq.fan {
			budget = 20 + rng.IntN(200)
			style = fanStyles[(len(fan)+k.run)%len(fanStyles)] // a different speed each, turn by turn
			fan = append(fan, qi)
		}
		wg.Add(2)
		go k.publisher(conn, killRoute{key: kq.name, queues: []int{qi}, prefix: strconv.Itoa(qi)}, budget, rand.New(rand.NewPCG(rng.Uint64(), 1)), wg)
		go k.consumer(conn, qi, style, rand.New(rand.NewPCG(rng.Uint64(), 2)), wg)
	}
	if len(fan) > 0 {
		wg.Add(1)
		go k.publisher(conn, killRoute{exchange: k.fanout, queues: fan, prefix: "f", pad: fanPad},
			1000+rng.IntN(9000), rand.New(rand.NewPCG(rng.Uint64(), 6)), wg)
	}
}

// killRoute is where a publisher sends: an exchange and a routing key,
// and the queues (indexes in killState.queues) that this reaches.
type killRoute struct {
	exchange, key string
	queues        []int
	prefix        string               // of the message ids
	pad           func(*rand.Rand) int // the padding of a body (killBody); nil: none
}

// publisher publishes budget persistent messages with confirms on route
// r, keeping a random number in flight, unless the broker goes first.
func (k *killState) publisher(conn *amqp091.Connection, r killRoute, budget int, rng *rand.Rand, wg *sync.WaitGroup) {
	defer wg.Done()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	if err := ch.Confirm(false); err != nil {
		return
	}
	window := 1 + rng.IntN(200)
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
		for _, qi := range r.queues {
			m := k.msgs[msgKey{qi, p.id}]
			m.confirmed = true
			m.note(k.run, "confirmed")
			k.statsLocked(qi).confirmed++
		}
		if len(r.queues) > 1 {
			k.fst.fanConfirmed++
		}
		k.mu.Unlock()
		return true
	}
	for seq := 0; seq < budget; seq++ {
		id := fmt.Sprintf("%s.%d.%d", r.prefix, k.run, seq)
		if r.pad != nil {
			id += fmt.Sprintf(".p%d", r.pad(rng))
		}
		k.mu.Lock()
		for _, qi := range r.queues {
			m := &killMsg{pubRun: k.run}
			m.note(k.run, "publish")
			k.msgs[msgKey{qi, id}] = m
			k.statsLocked(qi).published++
		}
		if len(r.queues) > 1 {
			k.fst.fanPublished++
		}
		k.mu.Unlock()
		conf, err := ch.PublishWithDeferredConfirm(r.exchange, r.key, false, false, amqp091.Publishing{
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

// ackStyle is how a consumer settles what it gets.
type ackStyle int

const (
	// ackMixed acks 85 in 100 at once, requeues some (up to a sixth
	// delivery) and holds up to half its prefetch unacked until the
	// kill.
	ackMixed ackStyle = iota
	// ackFast acks every message at once.
	ackFast
	// ackSlow pauses 1-3 ms per message and acks in runs of up to 20
	// with the multiple flag: its queue's head lags behind.
	ackSlow
	// ackBacklog starts up to 1.5 s late, then acts as ackMixed: a
	// backlog builds, and held messages keep its head far behind.
	ackBacklog
)

// fanStyles are the fan-out queues' consumers' speeds, one each.
var fanStyles = []ackStyle{ackFast, ackSlow, ackBacklog}

func (s ackStyle) String() string {
	return [...]string{"mixed", "fast", "slow", "backlog"}[s]
}

func (k *killState) consumer(conn *amqp091.Connection, qi int, style ackStyle, rng *rand.Rand, wg *sync.WaitGroup) {
	defer wg.Done()
	prefetch := 1 + rng.IntN(300)
	batch := 1 // acks in one multiple ack
	switch style {
	case ackSlow:
		prefetch = 1 + rng.IntN(100)
		batch = 1 + rng.IntN(min(20, prefetch))
	case ackBacklog:
		for late := rng.IntN(150); late > 0 && !conn.IsClosed(); late-- {
			time.Sleep(10 * time.Millisecond)
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return
	}
	held := 0
	ds, err := ch.Consume(k.queues[qi].name, "", false, false, false, false, nil)
	if err != nil {
		return
	}
	as := k.newAckSync(ch, prefetch)
	var run []*killMsg // ackSlow: delivered, for the next multiple ack
	for d := range ds {
		k.mu.Lock()
		m := k.deliveredLocked(qi, &d)
		r := rng.IntN(100)
		var act string
		switch {
		case style == ackSlow:
			act = "later"
		case m == nil:
			act = "ack"
		case style == ackFast || r < 85:
			act = "ack"
			m.acked, m.ackedAt, m.seenAt, m.ackRun = true, time.Time{}, time.Time{}, k.run // ackedAt once sent
			k.statsLocked(qi).acked++
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
			k.statsLocked(qi).acked++
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
		case "later":
			time.Sleep(time.Duration(1+rng.IntN(3)) * time.Millisecond)
			run = append(run, m)
			if len(run) < batch {
				continue
			}
			k.mu.Lock()
			for _, m := range run {
				if m != nil {
					m.acked, m.ackedAt, m.seenAt, m.ackRun = true, time.Time{}, time.Time{}, k.run
					k.statsLocked(qi).acked++
				}
			}
			k.mu.Unlock()
			if err := d.Ack(true); err != nil {
				return
			}
			for _, m := range run {
				if m == nil {
					continue
				}
				k.mu.Lock()
				m.ackedAt = time.Now()
				m.note(k.run, "ack (multiple)")
				k.mu.Unlock()
				if as.sent(m) != nil {
					return
				}
			}
			run = run[:0]
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
	k := &killState{t: t, seed: seed, seedEnv: killSeedEnv, queues: killQueues, fanout: killFanout, msgs: map[msgKey]*killMsg{}}
	var total, fanTotal killStats
	for trial := 1; trial <= trials+1; trial++ {
		k.run = trial
		k.st, k.fst = killStats{}, killStats{}
		last := trial > trials
		cmd, addr, promAddr, stderr := k.startChild(dir)
		bodySegs, bodyBytes := k.noteBodyLog(dir)
		conn, err := amqp091.Dial("amqp://guest:guest@" + addr + "/")
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("dial: %v", err)
		}
		k.drainQueues(conn, rng, drainOpts{ackAll: last}) // the last settles all, for checkBodySpace
		if last {
			k.checkBodySpace(conn, rng, dir)
			conn.Close()
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			t.Logf("last restart: %d in the queues (acked before the kill and back %d, of which applied before a landed write %d; redelivered unflagged %d; counts under %d; lost %d)",
				k.st.deliveredInDrain, k.st.ackedBack, k.st.ackedBackOld, k.st.unflagged, k.st.underCount, k.st.lost)
			t.Logf("last restart: %d in the fan-out queues (acked before the kill and back %d, of which applied before a landed write %d; redelivered unflagged %d; counts under %d; lost %d); body log %d segments, %d bytes",
				k.fst.deliveredInDrain, k.fst.ackedBack, k.fst.ackedBackOld, k.fst.unflagged, k.fst.underCount, k.fst.lost, bodySegs, bodyBytes)
			total.add(k.st)
			fanTotal.add(k.fst)
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
		t.Logf("run %d: fan-out queues: after the restart %d in them (acked before the kill and back %d, of which applied before a landed write %d; redelivered unflagged %d; counts under %d; lost %d); then %d published through %s (%d confirmed), %d queue messages in all, delivered %d (%d redelivered), acked %d; body log at the restart %d segments, %d bytes",
			trial, k.fst.deliveredInDrain, k.fst.ackedBack, k.fst.ackedBackOld, k.fst.unflagged, k.fst.underCount, k.fst.lost,
			k.fst.fanPublished, killFanout, k.fst.fanConfirmed, k.fst.published, k.fst.delivered, k.fst.redelivered, k.fst.acked, bodySegs, bodyBytes)
		total.add(k.st)
		fanTotal.add(k.fst)
		if t.Failed() && os.Getenv(killTrialsEnv) == "" {
			break
		}
	}
	t.Logf("total: published %d, confirmed %d, delivered %d, acked %d; acked and back %d (%d applied before a landed write; the one applied longest before the kill: %v; the persister's longest lag at a kill: %v), unflagged %d, under-counted %d, lost %d, duplicates %d",
		total.published, total.confirmed, total.delivered, total.acked, total.ackedBack, total.ackedBackOld, total.maxBackAge.Round(time.Millisecond), total.maxLag.Round(time.Millisecond),
		total.unflagged, total.underCount, total.lost, total.dupes)
	k.logFanTotals(fanTotal)
}
