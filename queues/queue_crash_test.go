package queues

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warren-mq/warren/internal/testutil"
)

// A SIGKILL test of classic and quorum queues. TestQueueCrashKill9 runs
// TestQueueCrashChild in a child process on a data directory: it publishes
// persistent and transient messages to durable queues, consumes, acks,
// requeues and basic.gets them, and reports on stdout what the broker
// confirmed. The parent kills it with SIGKILL at a random moment, reopens
// the broker and checks the queues against the reports, several rounds on
// the same directory. Nothing syncs the ack state but the broker's own
// persister (classic/persist.go).
//
// What the queue code guarantees after a kill (classic/recover.go):
//
//   - A confirmed persistent message (any confirmed message, in a quorum
//     queue) is in its queue exactly once until it is acked; an ack is
//     persisted lazily, so an acked message may come back, but not one
//     acked qcAckGrace or more before the kill.
//   - No transient message published to a classic queue before a restart
//     is delivered after it.
//   - A message delivered before comes back redelivered, and a quorum
//     queue's with a delivery count at least the number of its earlier
//     deliveries; a message published after the restart is not
//     redelivered on its first delivery.
//   - Bodies and properties come back intact; nothing comes back that was
//     not published.

const (
	qcDirEnv       = "WARREN_QCRASH_DIR"        // data directory of the child's broker
	qcSeedEnv      = "WARREN_QCRASH_SEED"       // seed of the parent, to reproduce a run
	qcChildSeedEnv = "WARREN_QCRASH_CHILD_SEED" // seed of one child
	qcRunEnv       = "WARREN_QCRASH_RUN"        // child number on its data directory, from 1
	qcQueues       = 3                          // durable queues; the last is a quorum queue
	qcPublishers   = 2                          // per queue
	qcTransientQ   = "crash-transient"          // a non-durable queue: gone after a restart
)

// qcAckGrace is how long before a kill an ack must have been made for the
// broker to keep it: 200 ms is the promise; under the race detector,
// which slows the child several times over, a second.
var qcAckGrace = map[bool]time.Duration{false: 200 * time.Millisecond, true: time.Second}[raceEnabled]

func qcQueueName(i int) string { return fmt.Sprintf("crash-%d", i) }

// qcQuorum reports whether queue qi is a quorum queue.
func qcQuorum(qi int) bool { return qi == qcQueues-1 }

// qcID names a message: "<queue>.<run>.<publisher>.<seq>".
func qcID(q, run, pub, seq int) string { return fmt.Sprintf("%d.%d.%d.%d", q, run, pub, seq) }

func parseQCID(id string) (q, run int, err error) {
	f := strings.Split(id, ".")
	if len(f) != 4 {
		return 0, 0, fmt.Errorf("message id %q", id)
	}
	if q, err = strconv.Atoi(f[0]); err != nil || q < 0 || q >= qcQueues {
		return 0, 0, fmt.Errorf("message id %q: queue", id)
	}
	if run, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, fmt.Errorf("message id %q: run", id)
	}
	return q, run, nil
}

// qcBody is the body of message id: "<id> <P|T> <payload>", the payload
// derived from the id, mostly short, sometimes tens of KiB (a chunk and a
// segment of its own).
func qcBody(id string, persistent bool) []byte {
	h := fnv.New64a()
	h.Write([]byte(id))
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x9e3779b9))
	n := rng.IntN(300)
	if rng.IntN(100) == 0 {
		n = 4000 + rng.IntN(30000)
	}
	kind := byte('T')
	if persistent {
		kind = 'P'
	}
	b := make([]byte, 0, len(id)+3+n)
	b = append(b, id...)
	b = append(b, ' ', kind, ' ')
	for range n {
		b = append(b, 'a'+byte(rng.Uint32()%26))
	}
	return b
}

// qcProps are the properties of a message: delivery-mode, and the id as
// message-id (so that a mix-up of properties and bodies shows).
func qcProps(id string, persistent bool) []byte {
	mode := byte(1)
	if persistent {
		mode = 2
	}
	p := []byte{0x10, 0x80, mode} // flags 0x1080: delivery-mode (bit 12), message-id (bit 7)
	p = append(p, byte(len(id)))
	return append(p, id...)
}

func qcRecord(qi int, id string, persistent bool) []byte {
	return EncodeRecord(nil, &Message{
		RoutingKey: qcQueueName(qi), Props: qcProps(id, persistent), Body: qcBody(id, persistent), Persistent: persistent,
	})
}

// qcCheckDelivery checks a delivery of queue qi against what its id says
// the message is, and returns the id and whether it is persistent.
func qcCheckDelivery(qi int, d *Delivery) (id string, persistent bool, err error) {
	id, rest, ok := strings.Cut(string(d.Body[:min(len(d.Body), 64)]), " ")
	if !ok || len(rest) < 1 {
		return "", false, fmt.Errorf("queue %d: body %.40q: no id", qi, d.Body)
	}
	q, _, err := parseQCID(id)
	if err != nil {
		return "", false, fmt.Errorf("queue %d: body %.40q: %v", qi, d.Body, err)
	}
	persistent = rest[0] == 'P'
	switch {
	case q != qi:
		return id, persistent, fmt.Errorf("queue %d: message %s of queue %d", qi, id, q)
	case !bytes.Equal(d.Body, qcBody(id, persistent)):
		return id, persistent, fmt.Errorf("queue %d: message %s: body of %d bytes differs", qi, id, len(d.Body))
	case !bytes.Equal(d.Props, qcProps(id, persistent)):
		return id, persistent, fmt.Errorf("queue %d: message %s: properties %x", qi, id, d.Props)
	case d.Exchange != "" || d.RoutingKey != qcQueueName(qi):
		return id, persistent, fmt.Errorf("queue %d: message %s: exchange %q routing key %q", qi, id, d.Exchange, d.RoutingKey)
	}
	return id, persistent, nil
}

// qcChild is the state of TestQueueCrashChild.
type qcChild struct {
	run  int
	b    *Broker
	qs   []*Queue
	outM sync.Mutex
	// mu guards state: per message id delivered in this run, 1 while
	// delivered and unsettled, 2 once settled. A message is never
	// delivered twice at once, nor after it is settled.
	mu    sync.Mutex
	state map[string]int
}

func (c *qcChild) say(format string, args ...any) {
	c.outM.Lock()
	defer c.outM.Unlock()
	// One write per line: a pipe write this small is atomic.
	if _, err := os.Stdout.Write(fmt.Appendf(nil, format+"\n", args...)); err != nil {
		os.Exit(5)
	}
}

func (c *qcChild) fail(format string, args ...any) {
	c.say("error "+format, args...)
	os.Exit(3)
}

// delivered checks and reports a delivery; it returns the message's id.
func (c *qcChild) delivered(qi int, d *Delivery) string {
	id, persistent, err := qcCheckDelivery(qi, d)
	if err != nil {
		c.fail("%v", err)
	}
	if _, run, _ := parseQCID(id); !persistent && run != c.run && !qcQuorum(qi) {
		c.fail("transient message %s of run %d delivered in run %d", id, run, c.run)
	}
	c.mu.Lock()
	s := c.state[id]
	c.state[id] = 1
	c.mu.Unlock()
	if s != 0 {
		c.fail("message %s delivered again (state %d)", id, s)
	}
	r := 0
	if d.Redelivered {
		r = 1
	}
	c.say("d %s %d %d", id, r, d.DeliveryCount)
	return id
}

// settle acks (or discards) a delivered message and reports it.
func (c *qcChild) settle(q *Queue, id string, tag uint64, discard bool) {
	c.mu.Lock()
	c.state[id] = 2
	c.mu.Unlock()
	// Before: once acked, the ack may be persisted before this goroutine
	// reports it (the persister runs while it waits for stdout).
	c.say("A %s", id)
	if discard {
		q.Discard(tag)
	} else {
		q.Ack(tag)
	}
	c.say("a %s %d", id, time.Now().UnixNano())
}

// requeue returns a delivered message.
func (c *qcChild) requeue(q *Queue, id string, tag uint64) {
	c.mu.Lock()
	c.state[id] = 0 // before: it may come back at once
	c.mu.Unlock()
	q.Requeue(tag)
	c.say("r %s", id)
}

// publish runs a publisher of queue qi: up to window publishes in flight,
// each reported before it is published ("s") and once confirmed ("c").
func (c *qcChild) publish(qi, pub int, rng *rand.Rand) {
	q := c.qs[qi]
	window := 1 + rng.IntN(48)
	type result struct {
		id  string
		err error
	}
	done := make(chan result, window) // never blocks the log's writer
	slots := make(chan struct{}, window)
	go func() {
		for r := range done {
			if r.err != nil {
				c.fail("publish %s: %v", r.id, r.err)
			}
			c.say("c %s", r.id)
			<-slots
		}
	}()
	for seq := 1; ; seq++ {
		id := qcID(qi, c.run, pub, seq)
		persistent := rng.IntN(4) != 0
		rec := qcRecord(qi, id, persistent)
		slots <- struct{}{}
		kind := 'T'
		if persistent {
			kind = 'P'
		}
		c.say("s %s %c", id, kind)
		q.Publish(rec, persistent, func(err error) { done <- result{id, err} })
		if rng.IntN(50) == 0 {
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		}
	}
}

// qcSink is a consumer of the child: it acks most deliveries at once,
// some later, requeues some and keeps some unacked for good.
type qcSink struct {
	c        *qcChild
	qi       int
	q        *Queue
	rng      *rand.Rand // used by Deliver only (one call at a time)
	prefetch int
	held     int
	later    chan [2]any // id, tag: acked or requeued by another goroutine
}

func (s *qcSink) Deliver(d *Delivery) {
	id := s.c.delivered(s.qi, d)
	switch r := s.rng.IntN(100); {
	case r < 45:
		s.c.settle(s.q, id, d.ID, false)
	case r < 50:
		s.c.settle(s.q, id, d.ID, true)
	case r < 75:
		s.later <- [2]any{id, d.ID}
	case r < 85 && d.DeliveryCount < 3:
		s.c.requeue(s.q, id, d.ID)
	case s.held < s.prefetch/2:
		s.held++ // never settled in this run: redelivered after the restart
	default:
		s.c.settle(s.q, id, d.ID, false)
	}
}

func (s *qcSink) Cancelled(*Queue, string) {}

func (s *qcSink) settleLater(rng *rand.Rand) {
	for x := range s.later {
		if rng.IntN(10) == 0 {
			time.Sleep(time.Duration(rng.IntN(5000)) * time.Microsecond)
		}
		id, tag := x[0].(string), x[1].(uint64)
		if rng.IntN(5) == 0 {
			s.c.requeue(s.q, id, tag)
		} else {
			s.c.settle(s.q, id, tag, false)
		}
	}
}

// poll takes messages of queue qi with basic.get now and then.
func (c *qcChild) poll(qi int, rng *rand.Rand) {
	q := c.qs[qi]
	for {
		time.Sleep(time.Duration(rng.IntN(4000)) * time.Microsecond)
		var id string
		var tag uint64
		ok, err := q.Get(nil, false, func(d *Delivery) { id, tag = c.delivered(qi, d), d.ID })
		if err != nil {
			c.fail("get from queue %d: %v", qi, err)
		}
		if !ok {
			continue
		}
		switch r := rng.IntN(10); {
		case r < 7:
			c.settle(q, id, tag, false)
		case r < 9:
			c.requeue(q, id, tag)
		} // else: left unacked
	}
}

// TestQueueCrashChild is the process TestQueueCrashKill9 kills. It runs
// publishers, consumers and basic.get pollers on the durable
// queues until it is killed, reporting on stdout:
//
//	ready            the queues are declared
//	s <id> <P|T>     about to publish id, persistent or transient
//	c <id>           id's publish was confirmed
//	d <id> <0|1> <n> id delivered (redelivered flag, delivery count)
//	A <id>           about to ack or discard id
//	a <id> <ns>      id acked or discarded, at Unix time ns
//	r <id>           id requeued
//	error <text>     a check failed
func TestQueueCrashChild(t *testing.T) {
	dir := os.Getenv(qcDirEnv)
	if dir == "" {
		t.Skip("helper process of TestQueueCrashKill9")
	}
	seed, _ := strconv.ParseUint(os.Getenv(qcChildSeedEnv), 10, 64)
	run, _ := strconv.Atoi(os.Getenv(qcRunEnv))
	// The parent kills this process; never outlive it by much.
	time.AfterFunc(time.Minute, func() { os.Exit(4) })
	c := &qcChild{run: run, state: map[string]int{}}
	rngs := uint64(0)
	newRng := func() *rand.Rand { rngs++; return rand.New(rand.NewPCG(seed, rngs)) }
	rng := newRng()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := Open(dir, Options{Logger: logger})
	if err != nil {
		c.fail("open broker: %v", err)
	}
	c.b = b
	b.queueReg().segmentSize = 64 << 10 // for new queues: rolls and truncations
	for i := range qcQueues {
		var args map[string]any
		if qcQuorum(i) {
			args = map[string]any{"x-queue-type": "quorum", "x-delivery-limit": int64(-1)}
		}
		q, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: qcQueueName(i), Durable: true, Args: args}})
		if err != nil {
			c.fail("declare: %v", err)
		}
		c.qs = append(c.qs, q)
	}
	tq, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: qcTransientQ}})
	if err != nil {
		c.fail("declare: %v", err)
	}
	c.say("ready")

	go func() { // the transient queue: just traffic
		for i := 0; ; i++ {
			tq.Publish(EncodeRecord(nil, &Message{Body: fmt.Appendf(nil, "t%d", i), Persistent: true}), true, func(error) {})
			time.Sleep(time.Millisecond)
		}
	}()
	for qi := range qcQueues {
		for p := range qcPublishers {
			go c.publish(qi, p, newRng())
		}
		for ci := range 1 + rng.IntN(2) {
			s := &qcSink{c: c, qi: qi, q: c.qs[qi], rng: newRng(), prefetch: 1 + rng.IntN(40), later: make(chan [2]any, 64)}
			go s.settleLater(newRng())
			if _, err := c.qs[qi].Consume(ConsumerOptions{Tag: fmt.Sprint("c", ci), Prefetch: s.prefetch, Sink: s}); err != nil {
				c.fail("consume: %v", err)
			}
		}
		if rng.IntN(2) == 0 {
			go c.poll(qi, newRng())
		}
	}
	select {} // until killed
}

// qcMsg is what the parent knows of a message.
type qcMsg struct {
	id         string
	queue      int
	persistent bool
	run        int       // the child that published it
	confirmed  bool      // confirmed, or seen in its queue after a restart: there until acked
	ackMaybe   bool      // settled by a child since last seen in its queue; the ack may be lost
	ackedAt    time.Time // when a child reported it settled (zero: not since last seen)
	gone       bool      // settled durably, or absent after a restart: never delivered again
	deliveries int       // deliveries seen, by children and by checks
	lastRun    int       // the child that last delivered it
	hist       []string
}

// keeps reports whether m survives a restart unless acked: persistent,
// or in a quorum queue.
func (m *qcMsg) keeps() bool { return m.persistent || qcQuorum(m.queue) }

// note records an event of the message, for failure messages.
func (m *qcMsg) note(run int, what string) { m.hist = append(m.hist, fmt.Sprintf("%d:%s", run, what)) }

// qcState is what the parent knows of one data directory.
type qcState struct {
	t        *testing.T
	seed     uint64
	dirN     int
	run      int // the current (or last) child
	declared bool
	msgs     map[string]*qcMsg

	nerr int // errors reported: stop after a screenful

	// Counts of the current child.
	sent, confirmed, delivered, redelivered, acked int
	ready                                          bool
	ackedBack                                      int // acked before the kill, back after it
}

func (st *qcState) errorf(format string, args ...any) {
	st.t.Helper()
	st.t.Errorf("seed %d (rerun with %s=%d), directory %d, run %d: %s",
		st.seed, qcSeedEnv, st.seed, st.dirN, st.run, fmt.Sprintf(format, args...))
	if st.nerr++; st.nerr == 20 {
		st.t.Fatalf("seed %d: too many errors", st.seed)
	}
}

func (st *qcState) fatalf(format string, args ...any) {
	st.t.Helper()
	st.errorf(format, args...)
	st.t.FailNow()
}

// apply takes one line of the child's stdout.
func (st *qcState) apply(line string) {
	st.t.Helper()
	verb, arg, _ := strings.Cut(line, " ")
	switch verb {
	case "ready":
		st.declared, st.ready = true, true
	case "s":
		arg, kind, _ := strings.Cut(arg, " ")
		if st.msgs[arg] != nil {
			st.errorf("message %s sent twice", arg)
			return
		}
		qi, run, err := parseQCID(arg)
		if err != nil || run != st.run {
			st.errorf("child sent %q", arg)
			return
		}
		m := &qcMsg{id: arg, queue: qi, run: run, persistent: kind == "P"}
		m.note(run, line)
		st.msgs[arg] = m
		st.sent++
	case "c":
		m := st.msgs[arg]
		if m == nil {
			st.errorf("confirmed %s, never sent", arg)
			return
		}
		m.confirmed = true
		m.note(st.run, line)
		st.confirmed++
	case "d":
		f := strings.Fields(arg)
		if len(f) != 3 {
			st.errorf("child said %q", line)
			return
		}
		id, redelivered := f[0], f[1] == "1"
		count, _ := strconv.Atoi(f[2])
		m := st.msgs[id]
		if m == nil {
			st.errorf("delivered %s, never sent", id)
			return
		}
		m.note(st.run, line)
		st.checkDelivery(m, redelivered, count, m.run == st.run && m.lastRun != st.run)
		m.lastRun = st.run
		st.delivered++
		if redelivered {
			st.redelivered++
		}
	case "A", "a":
		id, at, _ := strings.Cut(arg, " ")
		m := st.msgs[id]
		if m == nil {
			st.errorf("acked %s, never sent", id)
			return
		}
		m.ackMaybe = true
		m.note(st.run, line)
		if verb == "a" {
			ns, err := strconv.ParseInt(at, 10, 64)
			if err != nil {
				st.errorf("child said %q", line)
				return
			}
			m.ackedAt = time.Unix(0, ns)
			st.acked++
		}
	case "r":
		if m := st.msgs[arg]; m != nil {
			m.note(st.run, line)
		}
	case "error":
		st.errorf("child: %s", line)
	}
	// Anything else is test-framework output.
}

// checkDelivery checks a delivery of m (before it is booked): never after
// it was gone, flagged when delivered before, not flagged when first,
// a quorum queue's count no lower than the deliveries seen.
func (st *qcState) checkDelivery(m *qcMsg, redelivered bool, count int, first bool) {
	st.t.Helper()
	switch {
	case m.gone:
		st.errorf("delivered %s, acked durably or gone after a restart; history %v", m.id, m.hist)
	case !m.keeps() && m.run != st.run:
		st.errorf("delivered transient %s of run %d after a restart", m.id, m.run)
	case m.deliveries > 0 && !redelivered:
		st.errorf("delivered %s again without the redelivered flag; history %v", m.id, m.hist)
	case first && redelivered:
		st.errorf("delivered %s, published after the restart, redelivered on its first delivery; history %v", m.id, m.hist)
	case qcQuorum(m.queue) && count < m.deliveries:
		st.errorf("delivered %s with delivery count %d after %d deliveries; history %v", m.id, count, m.deliveries, m.hist)
	}
	if m.ackMaybe {
		st.ackedBack++ // an ack lost to the kill (checked in killed)
		m.ackMaybe, m.ackedAt = false, time.Time{}
	}
	m.deliveries++
}

// killed books a kill at killAt: acks reported qcAckGrace or more before
// it must have been kept.
func (st *qcState) killed(killAt time.Time) {
	for _, m := range st.msgs {
		if m.ackMaybe && !m.ackedAt.IsZero() && killAt.Sub(m.ackedAt) >= qcAckGrace {
			m.gone = true
			m.note(st.run, fmt.Sprintf("acked %v before the kill", killAt.Sub(m.ackedAt).Round(time.Millisecond)))
		}
	}
}

// runChild runs a child on dir and kills it with SIGKILL after delay
// (from its start when early, else from its "ready"), reading all it
// reported into st.
func (st *qcState) runChild(dir string, childSeed uint64, delay time.Duration, early bool) {
	t := st.t
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestQueueCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), qcDirEnv+"="+dir, qcChildSeedEnv+"="+strconv.FormatUint(childSeed, 10),
		qcRunEnv+"="+strconv.Itoa(st.run))
	var stderr testutil.LockedBuffer
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
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		br := bufio.NewReaderSize(out, 64<<10)
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

	killed := false
	var kill <-chan time.Time
	if early {
		kill = time.After(delay)
	}
	var tail []string // last lines, for failure messages
	deadline := time.NewTimer(30 * time.Second)
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
			st.apply(l)
			if l == "ready" && !early {
				kill = time.After(delay)
			}
		case <-kill:
			killAt := time.Now()
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("kill child: %v", err)
			}
			killed, kill = true, nil
			defer st.killed(killAt) // once every line it wrote is read
		case <-deadline.C:
			st.fatalf("child did not finish: killed %v\nlast lines:\n%s\nstderr:\n%s",
				killed, strings.Join(tail, "\n"), stderr.String())
		}
	}
	err = cmd.Wait()
	waited = true
	if !killed {
		st.fatalf("child exited before it was killed: %v\nlast lines:\n%s\nstderr:\n%s",
			err, strings.Join(tail, "\n"), stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		st.fatalf("child ended with %v, want SIGKILL\nstderr:\n%s", err, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "level=ERROR") || strings.Contains(s, "DATA RACE") {
		st.errorf("child logged errors:\n%s", s)
	}
}

// qcGot is a message drained from a queue by the parent.
type qcGot struct {
	tag         uint64
	id          string
	persistent  bool
	redelivered bool
	count       uint32
}

// verify opens the broker a killed child left in dir and checks every
// queue against what the children reported; it drains each queue with
// basic.get, acks some of the messages and closes the broker, which
// persists that with a sync; then it checks that a reopen agrees.
func (st *qcState) verify(dir string, rng *rand.Rand) (present, acked int, logs string) {
	t := st.t
	t.Helper()
	var log testutil.LockedBuffer
	opts := Options{Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	b, err := Open(dir, opts)
	if err != nil {
		st.fatalf("open after kill: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			b.Close()
		}
	}()
	if _, err := b.Queue("/", qcTransientQ); err == nil {
		st.errorf("transient queue %s survived the restart", qcTransientQ)
	}
	seen := map[string]bool{}
	remain := make([]int, qcQueues)
	var toAck [qcQueues][]uint64
	var ackedMsgs []*qcMsg
	for qi := range qcQueues {
		q, err := b.Queue("/", qcQueueName(qi))
		if err != nil {
			if st.declared {
				st.errorf("queue %d missing after the restart: %v", qi, err)
			}
			continue
		}
		ls := q.LogStatsForTest()
		logs += fmt.Sprintf(" [%d..%d) in %d segments", ls.FirstOffset, ls.NextOffset, ls.Segments)
		ready, _ := q.Counts()
		var got []qcGot
		tags := map[uint64]bool{}
		for {
			var g qcGot
			var cerr error
			ok, err := q.Get(nil, false, func(d *Delivery) {
				g.tag, g.redelivered, g.count = d.ID, d.Redelivered, d.DeliveryCount
				g.id, g.persistent, cerr = qcCheckDelivery(qi, d)
			})
			if err != nil {
				st.fatalf("get from queue %d: %v", qi, err)
			}
			if !ok {
				break
			}
			if cerr != nil {
				st.errorf("after the restart: %v", cerr)
				continue
			}
			if tags[g.tag] {
				st.fatalf("queue %d: offset %d delivered twice by basic.get", qi, g.tag)
			}
			tags[g.tag] = true
			got = append(got, g)
		}
		if len(got) != ready {
			st.errorf("queue %d: %d ready after the restart, basic.get drained %d", qi, ready, len(got))
		}
		for _, g := range got {
			m := st.msgs[g.id]
			switch {
			case m == nil:
				st.errorf("queue %d: message %s (offset %d) was never published", qi, g.id, g.tag)
				continue
			case seen[g.id]:
				st.errorf("queue %d: message %s twice (offset %d)", qi, g.id, g.tag)
				continue
			case g.persistent != m.persistent:
				st.errorf("queue %d: message %s (offset %d): persistent %v, published %v", qi, g.id, g.tag, g.persistent, m.persistent)
			case !m.keeps():
				st.errorf("queue %d: transient message %s (offset %d) survived the restart", qi, g.id, g.tag)
			}
			seen[g.id] = true
			m.note(st.run, fmt.Sprintf("check: offset %d redelivered %v count %d", g.tag, g.redelivered, g.count))
			st.checkDelivery(m, g.redelivered, int(g.count), false)
			m.confirmed = true // in its queue until acked
			if rng.IntN(4) == 0 {
				toAck[qi] = append(toAck[qi], g.tag)
				m.note(st.run, "check: acked")
				ackedMsgs = append(ackedMsgs, m)
			} else {
				remain[qi]++
			}
		}
		present += len(got)
	}
	for _, m := range st.msgs {
		if seen[m.id] {
			continue
		}
		if m.keeps() && m.confirmed && !m.ackMaybe && !m.gone {
			q, _, _ := parseQCID(m.id)
			st.errorf("queue %d: confirmed message %s lost; history %v", q, m.id, m.hist)
		}
		if !m.gone {
			m.note(st.run, "check: absent")
		}
		m.gone = true // absent now, and never to come back
	}
	for qi := range qcQueues {
		if q, err := b.Queue("/", qcQueueName(qi)); err == nil {
			q.Ack(toAck[qi]...)
			acked += len(toAck[qi])
		}
	}
	closed = true
	if err := b.Close(); err != nil {
		st.fatalf("close after the check: %v", err)
	}
	for _, m := range ackedMsgs {
		m.gone = true
	}

	// A clean reopen sees the rest, all of it unacked.
	b, err = Open(dir, opts)
	if err != nil {
		st.fatalf("second open: %v", err)
	}
	for qi := range qcQueues {
		if q, err := b.Queue("/", qcQueueName(qi)); err == nil {
			if ready, _ := q.Counts(); ready != remain[qi] {
				st.errorf("queue %d: %d ready after a clean restart, want %d", qi, ready, remain[qi])
			}
		}
	}
	if err := b.Close(); err != nil {
		st.fatalf("second close: %v", err)
	}
	if s := log.String(); strings.Contains(s, "level=ERROR") {
		st.errorf("broker logged errors:\n%s", s)
	}
	return present, acked, logs
}

// Ensure classic queues whose broker process is killed with SIGKILL at
// any moment reopen with every confirmed, unacked persistent message
// exactly once and intact, no transient message, no durably acked one,
// redelivered flags as promised, and that this holds round after round on
// one data directory.
func TestQueueCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	seed := testutil.Seed(t, qcSeedEnv)
	rng := rand.New(rand.NewPCG(seed, 0))
	dirs, rounds := 2, 4
	if raceEnabled {
		dirs, rounds = 1, 3
	}
	for d := range dirs {
		dir := t.TempDir()
		st := &qcState{t: t, seed: seed, dirN: d, msgs: map[string]*qcMsg{}}
		for round := range rounds {
			st.run = round + 1
			st.sent, st.confirmed, st.delivered, st.redelivered, st.acked, st.ackedBack = 0, 0, 0, 0, 0, 0
			st.ready = false
			early := rng.IntN(6) == 0 // maybe in Open, recovering
			delay := time.Duration(50+rng.IntN(500)) * time.Millisecond
			if early {
				delay = time.Duration(rng.IntN(80)) * time.Millisecond
			}
			if raceEnabled {
				delay *= 2
			}
			st.runChild(dir, rng.Uint64(), delay, early)
			present, acked, logs := st.verify(dir, rng)
			t.Logf("directory %d run %d: killed %v after %s (ready %v): sent %d, confirmed %d (%d in flight), delivered %d (%d redelivered), acked %d (%d back after the kill, each acked less than %v before it); reopened: %d messages, %d acked by the check; logs%s",
				d, st.run, delay, map[bool]string{true: "start", false: "ready"}[early], st.ready,
				st.sent, st.confirmed, st.sent-st.confirmed, st.delivered, st.redelivered, st.acked, st.ackedBack, qcAckGrace, present, acked, logs)
			if t.Failed() {
				t.FailNow()
			}
		}
	}
}
