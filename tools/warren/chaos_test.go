package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warren-mq/warren/internal/testutil"
)

// The chaos test: the real tools/warren binary, built by the test and
// started on free loopback ports over one data directory, under load
// from both protocols, killed with SIGKILL at random moments and
// restarted, WARREN_CHAOS_KILLS times (default 3; bench/chaos.sh runs
// 150). WARREN_CHAOS_SEED replays a run's choices (the kill moments
// still depend on the scheduler). The load, all at once:
//
//   - AMQP 0-9-1, a durable classic and a quorum queue: publishers with
//     confirms, consumers with manual acks, requeues and held messages,
//     checked after every restart as TestKill9 checks them (see
//     kill_test.go): a confirmed message never acked is there exactly
//     once; a message whose ack the broker had applied before the last
//     write of ack states that landed before the kill began is never
//     delivered again (an AMQP ack has no confirm: a round trip on the
//     channel after it tells when it was applied, see ackSync, and the
//     daemon's Prometheus endpoint when that write began, see
//     ackCoverage; later acks may come back, as redeliveries with the
//     flag set);
//   - AMQP 0-9-1, fan-out by reference: a durable fanout exchange bound
//     to two classic queues and a quorum queue, a publisher with
//     confirms to it and a few messages straight to each queue, and a
//     consumer per queue acking at its own speed (fanout_test.go). Each
//     queue is checked as the classic and quorum queues are, with its
//     own ack state for a message all three got; the last run acks
//     everything and checks that the body log gives its space back
//     (checkBodySpace);
//   - AMQP 0-9-1, a stream queue with small segments and a length limit
//     (segment rolls and retention all the time): a publisher with
//     confirms. After a restart the stream is read from its first offset
//     over AMQP: offsets are contiguous, messages come in publish order,
//     none twice, and every confirmed message after the first one
//     retention left is there;
//   - the stream protocol (rabbitmq-stream-go-client), a stream with
//     small segments and a length limit: a named producer with explicit
//     publishing ids. After a restart the broker's sequence for the name
//     is at least every confirmed id (and no more than was sent), the
//     producer resumes by sending again a random number of its last
//     messages with the same ids, and the stream's content, read from
//     first, holds each publishing id at most once, in increasing order,
//     every confirmed id after the first one retention left, and ends at
//     the broker's sequence;
//   - a named stream consumer storing its offsets (StoreOffset, then
//     QueryOffset to see it stored). After a restart the stored offset is
//     never below an offset QueryOffset returned at least ackGrace before
//     the kill (a store has no confirm either), nor above any offset
//     stored; deliveries to it have increasing offsets;
//   - queue declares and deletes (classic, quorum and stream queues): a
//     queue whose declare-ok arrived exists after the restart, unless a
//     delete was sent after it; one whose delete-ok arrived does not.
//
// Every restart must succeed, the broker must log no error, and the last
// one is stopped with SIGTERM and must exit cleanly.

const (
	chaosKillsEnv = "WARREN_CHAOS_KILLS"
	chaosSeedEnv  = "WARREN_CHAOS_SEED"

	chaosAMQPStream  = "chaos-amqp-stream" // stream queue driven over AMQP
	chaosStream      = "chaos-stream"      // stream driven over the stream protocol
	chaosProducer    = "chaos-producer"    // its named producer
	chaosConsumer    = "chaos-consumer"    // its named consumer
	chaosSegmentSize = 16 << 10
	chaosMaxLength   = 400 << 10
	chaosDeclNames   = 6 // queues declared and deleted under load
)

var chaosQueues = []killQueue{
	{"chaos-classic", false, false},
	{"chaos-quorum", true, false},
	// Bound to fanExchange (fanout_test.go).
	{"chaos-fan-classic-a", false, true},
	{"chaos-fan-classic-b", false, true},
	{"chaos-fan-quorum", true, true},
}

// buildWarren builds tools/warren into a temporary directory.
func buildWarren(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the daemon with")
	}
	bin := filepath.Join(t.TempDir(), "warren")
	start := time.Now()
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built %s in %v", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// chaosDaemon is one run of the daemon.
type chaosDaemon struct {
	cmd    *exec.Cmd
	amqp   string // host:port
	stream string
	prom   string // the Prometheus endpoint's
	stderr *testutil.LockedBuffer
}

var listenRE = regexp.MustCompile(`msg="(AMQP 0-9-1|stream protocol|Prometheus metrics) listening" addr=(\S+)`)

// startDaemon starts bin on dir and waits until both protocols listen.
func startDaemon(t *testing.T, bin, dir string) *chaosDaemon {
	t.Helper()
	conf := filepath.Join(dir, "..", filepath.Base(dir)+".conf")
	if err := os.WriteFile(conf, []byte("warren.retention_interval = 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-data-dir", dir, "-config", conf,
		"-amqp-listen", "127.0.0.1:0", "-stream-listen", "127.0.0.1:0", "-stream-advertise", "127.0.0.1:",
		"-http-listen", "", "-prometheus-listen", "127.0.0.1:0", "-log-level", "info")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &chaosDaemon{cmd: cmd, stderr: &testutil.LockedBuffer{}}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() { // after a failure; a no-op for a daemon already reaped
		cmd.Process.Kill()
		cmd.Wait()
	})
	ready := make(chan struct{})
	go func() {
		br := bufio.NewReader(errPipe)
		got := map[string]string{}
		for {
			l, err := br.ReadString('\n')
			d.stderr.Write([]byte(l))
			if err != nil {
				if got != nil {
					close(ready)
				}
				return
			}
			if got == nil {
				continue
			}
			if m := listenRE.FindStringSubmatch(l); m != nil {
				got[m[1]] = m[2]
				if len(got) == 3 {
					d.amqp, d.stream, d.prom = got["AMQP 0-9-1"], got["stream protocol"], got["Prometheus metrics"]
					got = nil
					close(ready)
				}
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
	}
	if d.amqp == "" || d.stream == "" || d.prom == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("daemon did not start after %v\nstderr:\n%s", time.Since(started).Round(time.Millisecond), d.stderr.String())
	}
	return d
}

// chaosState is what the client knows of one data directory besides
// what killState knows (the classic and quorum queues).
type chaosState struct {
	*killState
	rng *rand.Rand

	// The AMQP stream queue: messages are numbered across runs.
	sq struct {
		mu        sync.Mutex
		next      int            // number of the next message
		confirmed map[int]bool   // numbers confirmed
		published map[int]string // numbers published: the run
	}
	// The stream protocol stream's named producer.
	sp struct {
		mu        sync.Mutex
		maxSent   int64 // highest publishing id ever sent
		confirmed map[int64]bool
	}
	// The named consumer's stored offsets.
	off struct {
		mu       sync.Mutex
		stores   []storedOffset // this run's, in order
		durable  int64          // the floor after a restart; -1: none
		maxEver  int64          // the highest offset ever stored; -1: none
		delivery int64          // last offset delivered in this run
	}
	// Queues declared and deleted under load: "exists", "gone" or
	// "unknown" (a request in flight at the kill).
	decl struct {
		mu    sync.Mutex
		state [chaosDeclNames]string
	}
	counts chaosCounts
}

type storedOffset struct {
	off int64
	at  time.Time
}

// chaosCounts are what the test reports.
type chaosCounts struct {
	kills, restarts                                int
	sqPublished, sqConfirmed, sqRead, sqRetained   int
	sqRetentionGaps                                int // offset gaps in a check that retention explains
	spSent, spConfirmed, spResent, spRead, spDedup int
	offStores, offChecks, offTrimmed               int
	declares, deletes, declChecks                  int
}

// errorf reports a broken promise; it is called from the load's
// goroutines.
func (c *chaosState) errorf(format string, args ...any) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.killState.errorf(format, args...)
}

func chaosDeclName(i int) string { return fmt.Sprintf("chaos-decl-%d", i) }

// Ensure the daemon keeps every promise above across SIGKILL at random
// moments.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the daemon")
	}
	seed := testutil.Seed(t, chaosSeedEnv)
	kills := 3
	if s := os.Getenv(chaosKillsEnv); s != "" {
		var err error
		if kills, err = strconv.Atoi(s); err != nil {
			t.Fatalf("%s=%q: %v", chaosKillsEnv, s, err)
		}
	}
	bin := buildWarren(t)
	dir := filepath.Join(t.TempDir(), "data")
	c := &chaosState{
		killState: &killState{t: t, seed: seed, seedEnv: chaosSeedEnv, queues: chaosQueues, fanout: fanExchange, msgs: map[msgKey]*killMsg{}},
		rng:       rand.New(rand.NewPCG(seed, 0)),
	}
	c.sq.confirmed, c.sq.published = map[int]bool{}, map[int]string{}
	c.sp.confirmed = map[int64]bool{}
	c.off.durable, c.off.maxEver = -1, -1
	for i := range c.decl.state {
		c.decl.state[i] = "gone"
	}
	var total, fanTotal killStats
	began := time.Now()
	for run := 1; run <= kills+1; run++ {
		c.run = run
		c.st, c.fst = killStats{}, killStats{}
		last := run > kills
		d := startDaemon(t, bin, dir)
		c.counts.restarts++
		bodySegs, bodyBytes := c.noteBodyLog(dir)
		conn, err := amqp091.Dial("amqp://guest:guest@" + d.amqp + "/")
		if err != nil {
			t.Fatalf("run %d: dial: %v\nstderr:\n%s", run, err, d.stderr.String())
		}
		env := c.newEnv(d)
		c.drainQueues(conn, c.rng, drainOpts{ackAll: last}) // the last settles all, for checkBodySpace
		c.checkDeclares(conn)
		c.checkAMQPStream(conn)
		c.checkStream(env)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var consumer *stream.Consumer
		if !last {
			c.load(conn, c.rng, &wg)
			wg.Add(3)
			go c.amqpStreamPublisher(conn, rand.New(rand.NewPCG(c.rng.Uint64(), 3)), &wg)
			go c.declChurn(conn, rand.New(rand.NewPCG(c.rng.Uint64(), 4)), &wg)
			go c.streamProducer(env, rand.New(rand.NewPCG(c.rng.Uint64(), 5)), stop, &wg)
			consumer = c.streamConsumer(env, stop, &wg)
		} else {
			consumer = c.streamConsumer(env, stop, &wg)
			time.Sleep(300 * time.Millisecond)
		}
		if last {
			c.checkBodySpace(conn, c.rng, dir)
			close(stop)
			wg.Wait()
			consumer.Close()
			closeEnv(env)
			conn.Close()
			d.cmd.Process.Signal(syscall.SIGTERM)
			if err := d.cmd.Wait(); err != nil {
				t.Errorf("run %d: the daemon did not stop cleanly on SIGTERM: %v\nstderr:\n%s", run, err, d.stderr.String())
			}
			total.add(c.st)
			fanTotal.add(c.fst)
			break
		}
		delay := time.Duration(300+c.rng.IntN(1700)) * time.Millisecond
		time.Sleep(delay)
		c.killDaemon(d)
		close(stop)
		conn.Close()
		closeEnv(env)
		wg.Wait()
		c.counts.kills++
		if s := d.stderr.String(); strings.Contains(s, "level=ERROR") || strings.Contains(s, "panic") {
			t.Errorf("run %d: the daemon logged errors:\n%s", run, s)
		}
		total.add(c.st)
		fanTotal.add(c.fst)
		t.Logf("run %d: killed after %v; AMQP queues: %d in them after the restart (acked and back %d, of which applied before a landed write %d; lost %d), then published %d, confirmed %d, acked %d; stream queue %d published; stream: %d sent",
			run, delay, c.st.deliveredInDrain, c.st.ackedBack, c.st.ackedBackOld, c.st.lost, c.st.published, c.st.confirmed, c.st.acked, c.counts.sqPublished, c.counts.spSent)
		t.Logf("run %d: fan-out queues: %d in them after the restart (acked and back %d, of which applied before a landed write %d; lost %d), then %d published through %s (%d confirmed), %d queue messages in all, acked %d; body log at the restart: %d segments, %d bytes",
			run, c.fst.deliveredInDrain, c.fst.ackedBack, c.fst.ackedBackOld, c.fst.lost, c.fst.fanPublished, fanExchange, c.fst.fanConfirmed, c.fst.published, c.fst.acked, bodySegs, bodyBytes)
		if t.Failed() && os.Getenv(chaosKillsEnv) == "" {
			break
		}
	}
	n := c.counts
	t.Logf("chaos: %d kills, %d restarts in %v (seed %d)", n.kills, n.restarts, time.Since(began).Round(time.Millisecond), seed)
	t.Logf("AMQP classic and quorum: published %d, confirmed %d, delivered %d, acked %d; acked and back %d (%d applied before a landed write; the one applied longest before the kill: %v; the persister's longest lag at a kill: %v), unflagged %d, under-counted %d, lost %d, duplicates %d",
		total.published, total.confirmed, total.delivered, total.acked, total.ackedBack, total.ackedBackOld, total.maxBackAge.Round(time.Millisecond), total.maxLag.Round(time.Millisecond),
		total.unflagged, total.underCount, total.lost, total.dupes)
	c.logFanTotals(fanTotal)
	t.Logf("AMQP stream queue: published %d, confirmed %d; read back %d messages, %d present at the last restart; %d gaps in a read that retention made while it read",
		n.sqPublished, n.sqConfirmed, n.sqRead, n.sqRetained, n.sqRetentionGaps)
	t.Logf("stream protocol: sent %d (%d sent again on resume), confirmed %d; read back %d; %d duplicates dropped by the broker (confirmed, not stored)",
		n.spSent, n.spResent, n.spConfirmed, n.spRead, n.spDedup)
	t.Logf("consumer offsets: %d stores confirmed by a query, %d restart checks (%d found trimmed by retention); declares %d, deletes %d, %d existence checks",
		n.offStores, n.offChecks, n.offTrimmed, n.declares, n.deletes, n.declChecks)
}

func (c *chaosState) newEnv(d *chaosDaemon) *stream.Environment {
	t := c.t
	t.Helper()
	host, portS, _ := strings.Cut(d.stream, ":")
	port, _ := strconv.Atoi(portS)
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetHost(host).SetPort(port).
		SetUser("guest").SetPassword("guest").SetAddressResolver(stream.AddressResolver{Host: host, Port: port}))
	if err != nil {
		t.Fatalf("run %d: stream environment: %v\nstderr:\n%s", c.run, err, d.stderr.String())
	}
	err = env.DeclareStream(chaosStream, stream.NewStreamOptions().
		SetMaxSegmentSizeBytes(stream.ByteCapacity{}.B(chaosSegmentSize)).
		SetMaxLengthBytes(stream.ByteCapacity{}.B(chaosMaxLength)))
	if err != nil {
		t.Fatalf("run %d: declare %s: %v", c.run, chaosStream, err)
	}
	return env
}

// closeEnv closes a stream environment whose broker may be gone, without
// waiting long for it.
func closeEnv(env *stream.Environment) {
	done := make(chan struct{})
	go func() { env.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}

// killDaemon kills the daemon and books which acks and stored offsets
// are old enough to be kept.
func (c *chaosState) killDaemon(d *chaosDaemon) {
	killAt := time.Now()
	c.kill(d.cmd, d.prom) // the AMQP acks
	c.off.mu.Lock()
	defer c.off.mu.Unlock()
	for _, s := range c.off.stores {
		if killAt.Sub(s.at) >= ackGrace && s.off > c.off.durable {
			c.off.durable = s.off
		}
	}
	c.off.stores = nil
}

// sqArgs are the AMQP stream queue's arguments.
var sqArgs = amqp091.Table{
	"x-queue-type":                    "stream",
	"x-stream-max-segment-size-bytes": int64(chaosSegmentSize / 2),
	"x-max-length-bytes":              int64(chaosMaxLength),
}

// checkAMQPStream reads the AMQP stream queue from its first offset up to
// a marker published now and checks it.
func (c *chaosState) checkAMQPStream(conn *amqp091.Connection) {
	t := c.t
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclare(chaosAMQPStream, true, false, false, false, sqArgs); err != nil {
		t.Fatalf("run %d: declare %s: %v", c.run, chaosAMQPStream, err)
	}
	marker := fmt.Sprintf("marker %d", c.run)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	conf, err := ch.PublishWithDeferredConfirm("", chaosAMQPStream, false, false, amqp091.Publishing{Body: []byte(marker)})
	if err != nil {
		t.Fatalf("publish marker: %v", err)
	}
	if ok, err := conf.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("run %d: marker not confirmed: %v", c.run, err)
	}
	if err := ch.Qos(500, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(chaosAMQPStream, "check", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatalf("consume %s: %v", chaosAMQPStream, err)
	}
	prevOff, prevN, first := int64(-1), -1, -1
	seen := map[int]bool{}
	// Retention may delete the oldest segments while this reads them
	// (the stream is over its length limit after a restart, and the
	// timer runs every second): a reader whose next chunk is gone goes
	// on at the first one left, as an osiris reader does. A gap in the
	// offsets is right only if retention explains it, which the stream's
	// first offset after the read tells (firstOffset).
	type gap struct {
		from, to int64 // the offsets skipped
		nAfter   int   // the message at to+1; -1 if not a numbered one
	}
	var gaps []gap
	timeout := time.After(60 * time.Second)
	for done := false; !done; {
		var d amqp091.Delivery
		select {
		case d = <-ds:
		case <-timeout:
			t.Fatalf("run %d: %s: no marker after 60 s (last offset %d)", c.run, chaosAMQPStream, prevOff)
		}
		off, ok := d.Headers["x-stream-offset"].(int64)
		if !ok {
			c.errorf("%s: delivery without an x-stream-offset: %v", chaosAMQPStream, d.Headers)
		}
		if prevOff >= 0 && off <= prevOff {
			c.errorf("%s: offset %d after %d", chaosAMQPStream, off, prevOff)
		}
		gapHere := prevOff >= 0 && off > prevOff+1
		if gapHere {
			gaps = append(gaps, gap{from: prevOff + 1, to: off - 1, nAfter: -1})
		}
		prevOff = off
		body := string(d.Body)
		switch {
		case body == marker:
			done = true
		case strings.HasPrefix(body, "marker "):
		default:
			n, err := strconv.Atoi(strings.TrimPrefix(body, "sq "))
			if err != nil {
				c.errorf("%s: body %q at offset %d", chaosAMQPStream, body, off)
				break
			}
			c.counts.sqRead++
			if seen[n] {
				c.errorf("%s: message %d twice (offset %d)", chaosAMQPStream, n, off)
			}
			if n <= prevN {
				c.errorf("%s: message %d after %d (offset %d)", chaosAMQPStream, n, prevN, off)
			}
			if first < 0 {
				first = n
			}
			if gapHere {
				gaps[len(gaps)-1].nAfter = n
			}
			seen[n], prevN = true, n
		}
		if d.DeliveryTag%100 == 0 || done {
			if err := d.Ack(true); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
	}
	if len(gaps) > 0 {
		now := c.firstOffset(ch)
		for _, g := range gaps {
			if g.to >= now {
				c.errorf("%s: offsets %d to %d skipped, but the stream starts at %d", chaosAMQPStream, g.from, g.to, now)
				continue
			}
			c.counts.sqRetentionGaps++
			if g.nAfter >= 0 {
				first = max(first, g.nAfter) // retention took those before
			}
		}
	}
	c.sq.mu.Lock()
	defer c.sq.mu.Unlock()
	c.counts.sqRetained = len(seen)
	for n := range c.sq.published {
		if !seen[n] && c.sq.confirmed[n] && first >= 0 && n > first {
			c.errorf("%s: confirmed message %d (published in run %s) missing; the stream starts at %d", chaosAMQPStream, n, c.sq.published[n], first)
		}
		if seen[n] {
			c.sq.confirmed[n] = true // stored: must stay until retention
		}
	}
	for n := range seen {
		if _, ok := c.sq.published[n]; !ok {
			c.errorf("%s: message %d never published", chaosAMQPStream, n)
		}
	}
}

// firstOffset returns the AMQP stream queue's first offset: that of the
// first delivery from "first".
func (c *chaosState) firstOffset(ch *amqp091.Channel) int64 {
	t := c.t
	ds, err := ch.Consume(chaosAMQPStream, "first", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatalf("consume %s: %v", chaosAMQPStream, err)
	}
	defer ch.Cancel("first", false)
	select {
	case d := <-ds:
		off, _ := d.Headers["x-stream-offset"].(int64)
		return off
	case <-time.After(60 * time.Second):
		t.Fatalf("run %d: %s: nothing from first after 60 s", c.run, chaosAMQPStream)
	}
	return 0
}

// amqpStreamPublisher publishes numbered messages with confirms to the
// AMQP stream queue until the broker is killed.
func (c *chaosState) amqpStreamPublisher(conn *amqp091.Connection, rng *rand.Rand, wg *sync.WaitGroup) {
	defer wg.Done()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	if err := ch.Confirm(false); err != nil {
		return
	}
	window := 1 + rng.IntN(100)
	type pending struct {
		n    int
		conf *amqp091.DeferredConfirmation
	}
	var inflight []pending
	for i := 0; i < 20000; i++ {
		c.sq.mu.Lock()
		n := c.sq.next
		c.sq.next++
		c.sq.published[n] = strconv.Itoa(c.run)
		c.counts.sqPublished++
		c.sq.mu.Unlock()
		pad := strings.Repeat("s", rng.IntN(300))
		conf, err := ch.PublishWithDeferredConfirm("", chaosAMQPStream, false, false, amqp091.Publishing{
			Body: []byte(fmt.Sprintf("sq %d", n)), Headers: amqp091.Table{"pad": pad},
		})
		if err != nil {
			return
		}
		inflight = append(inflight, pending{n, conf})
		for len(inflight) >= window {
			if ok, err := inflight[0].conf.WaitContext(context.Background()); err != nil || !ok {
				return
			}
			c.sq.mu.Lock()
			c.sq.confirmed[inflight[0].n] = true
			c.counts.sqConfirmed++
			c.sq.mu.Unlock()
			inflight = inflight[1:]
		}
	}
}

// checkStream checks the stream protocol stream after a restart: the
// stored consumer offset, the producer's sequence and the content.
func (c *chaosState) checkStream(env *stream.Environment) {
	t := c.t
	// The consumer's stored offset.
	got, err := env.QueryOffset(chaosConsumer, chaosStream)
	if errors.Is(err, stream.OffsetNotFoundError) {
		got, err = -1, nil
	}
	if err != nil {
		t.Fatalf("run %d: QueryOffset: %v", c.run, err)
	}
	st, err := env.StreamStats(chaosStream)
	if err != nil {
		t.Fatalf("run %d: StreamStats: %v", c.run, err)
	}
	first, err := st.FirstOffset()
	if err != nil {
		first = 0
	}
	c.off.mu.Lock()
	c.counts.offChecks++
	switch {
	case got < c.off.durable && c.off.durable < first:
		// Retention passed it: a snapshot keeps no offset below the
		// stream's first, as Osiris's.
		c.counts.offTrimmed++
	case got < c.off.durable:
		c.errorf("stored offset of %s is %d after the restart; %d was stored and queried at least %v before the kill", chaosConsumer, got, c.off.durable, ackGrace)
	}
	if got > c.off.maxEver {
		c.errorf("stored offset of %s is %d after the restart; the highest ever stored is %d", chaosConsumer, got, c.off.maxEver)
	}
	c.off.durable = got // never to go below it again
	c.off.delivery = got
	c.off.mu.Unlock()

	// The producer's sequence.
	seqNo, err := env.QuerySequence(chaosProducer, chaosStream)
	if err != nil {
		t.Fatalf("run %d: QuerySequence: %v", c.run, err)
	}
	c.sp.mu.Lock()
	for id := range c.sp.confirmed {
		if id > seqNo {
			c.errorf("%s: publishing id %d was confirmed, the broker's sequence is %d", chaosProducer, id, seqNo)
		}
	}
	if seqNo > c.sp.maxSent {
		c.errorf("%s: sequence %d, only %d sent", chaosProducer, seqNo, c.sp.maxSent)
	}
	c.sp.mu.Unlock()

	// The content, from first up to a marker.
	marker := fmt.Sprintf("marker %d", c.run)
	p, err := env.NewProducer(chaosStream, stream.NewProducerOptions())
	if err != nil {
		t.Fatalf("run %d: producer: %v", c.run, err)
	}
	confirms := p.NotifyPublishConfirmation()
	if err := p.Send(streamamqp.NewMessage([]byte(marker))); err != nil {
		t.Fatalf("run %d: send marker: %v", c.run, err)
	}
	select {
	case cs := <-confirms:
		if len(cs) != 1 || !cs[0].IsConfirmed() {
			t.Fatalf("run %d: marker not confirmed", c.run)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run %d: no confirm for the marker", c.run)
	}
	p.Close()
	type rec struct {
		off  int64
		body string
	}
	recs := make(chan rec, 1024)
	cons, err := env.NewConsumer(chaosStream, func(ctx stream.ConsumerContext, m *streamamqp.Message) {
		recs <- rec{ctx.Consumer.GetOffset(), string(m.GetData())}
	}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("run %d: consumer: %v", c.run, err)
	}
	defer cons.Close()
	prevOff, prevID, firstID := int64(-1), int64(-1), int64(-1)
	seen := map[int64]bool{}
	timeout := time.After(60 * time.Second)
	for done := false; !done; {
		var r rec
		select {
		case r = <-recs:
		case <-timeout:
			t.Fatalf("run %d: %s: no marker after 60 s (last offset %d)", c.run, chaosStream, prevOff)
		}
		if r.off <= prevOff {
			c.errorf("%s: offset %d after %d", chaosStream, r.off, prevOff)
		}
		prevOff = r.off
		switch {
		case r.body == marker:
			done = true
		case strings.HasPrefix(r.body, "marker "):
		default:
			id, err := strconv.ParseInt(strings.Fields(r.body)[0], 10, 64)
			if err != nil {
				c.errorf("%s: body %.30q at offset %d", chaosStream, r.body, r.off)
				break
			}
			c.counts.spRead++
			if seen[id] {
				c.errorf("%s: publishing id %d twice (offset %d): a duplicate", chaosStream, id, r.off)
			} else if id <= prevID {
				c.errorf("%s: publishing id %d after %d (offset %d)", chaosStream, id, prevID, r.off)
			}
			if firstID < 0 {
				firstID = id
			}
			seen[id], prevID = true, id
		}
	}
	c.sp.mu.Lock()
	defer c.sp.mu.Unlock()
	for id := range c.sp.confirmed {
		if !seen[id] && firstID >= 0 && id > firstID {
			c.errorf("%s: confirmed publishing id %d missing; the stream's first is %d", chaosStream, id, firstID)
		}
	}
	if prevID >= 0 && prevID != seqNo {
		c.errorf("%s: the last publishing id stored is %d, the broker's sequence %d", chaosStream, prevID, seqNo)
	}
	for id := range seen {
		c.sp.confirmed[id] = true // stored: must stay until retention
	}
}

// streamProducer resumes the named producer: it sends again a random
// number of its last messages with their ids, then new ones, until stop.
func (c *chaosState) streamProducer(env *stream.Environment, rng *rand.Rand, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	p, err := env.NewProducer(chaosStream, stream.NewProducerOptions().SetProducerName(chaosProducer).
		SetBatchSize(1+rng.IntN(100)))
	if err != nil {
		c.errorf("named producer: %v", err)
		return
	}
	last, err := p.GetLastPublishingId()
	if err != nil {
		return
	}
	window := 1 + rng.IntN(500)
	sem := make(chan struct{}, window)
	confirms := p.NotifyPublishConfirmation()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cs := range confirms {
			c.sp.mu.Lock()
			for _, s := range cs {
				if s.IsConfirmed() {
					c.sp.confirmed[s.GetPublishingId()] = true
					c.counts.spConfirmed++
				}
			}
			c.sp.mu.Unlock()
			for range cs {
				select {
				case <-sem:
				default:
				}
			}
		}
	}()
	c.sp.mu.Lock()
	from := max(1, last-int64(rng.IntN(200)))
	to := c.sp.maxSent
	c.sp.mu.Unlock()
	send := func(id int64, again bool) bool {
		select {
		case sem <- struct{}{}:
		case <-stop:
			return false
		}
		m := streamamqp.NewMessage([]byte(fmt.Sprintf("%d %s", id, strings.Repeat("p", rng.IntN(300)))))
		m.SetPublishingId(id)
		c.sp.mu.Lock()
		c.sp.maxSent = max(c.sp.maxSent, id)
		c.counts.spSent++
		if again {
			c.counts.spResent++
			if id <= last {
				c.counts.spDedup++
			}
		}
		c.sp.mu.Unlock()
		return p.Send(m) == nil
	}
	ok := true
	for id := from; id <= to && ok; id++ {
		ok = send(id, true)
	}
	budget := int64(1000 + rng.IntN(9000)) // then idle until the kill: stored offsets age
	for id := to + 1; ok && id <= to+budget; id++ {
		ok = send(id, false)
	}
	<-stop
	closeProducer(p)
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}

// closeProducer closes a producer whose broker may be gone.
func closeProducer(p *stream.Producer) {
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}

// streamConsumer starts the named consumer after its stored offset, and
// a goroutine that stores its position every few milliseconds and
// queries it back, until stop.
func (c *chaosState) streamConsumer(env *stream.Environment, stop <-chan struct{}, wg *sync.WaitGroup) *stream.Consumer {
	t := c.t
	c.off.mu.Lock()
	spec := stream.OffsetSpecification{}.First()
	if c.off.durable >= 0 {
		spec = stream.OffsetSpecification{}.Offset(c.off.durable + 1)
	}
	from := c.off.durable
	c.off.mu.Unlock()
	cons, err := env.NewConsumer(chaosStream, func(ctx stream.ConsumerContext, m *streamamqp.Message) {
		off := ctx.Consumer.GetOffset()
		c.off.mu.Lock()
		if off <= c.off.delivery {
			c.errorf("%s: delivered offset %d after %d (started after %d)", chaosConsumer, off, c.off.delivery, from)
		}
		c.off.delivery = off
		c.off.mu.Unlock()
	}, stream.NewConsumerOptions().SetConsumerName(chaosConsumer).SetManualCommit().SetOffset(spec))
	if err != nil {
		t.Fatalf("run %d: named consumer: %v", c.run, err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(15 * time.Millisecond)
		defer tick.Stop()
		stored := int64(-1)
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			c.off.mu.Lock()
			off := c.off.delivery
			c.off.mu.Unlock()
			if off <= stored || off < 0 {
				continue
			}
			c.off.mu.Lock()
			c.off.maxEver = max(c.off.maxEver, off) // before it is sent
			c.off.mu.Unlock()
			if err := cons.StoreCustomOffset(off); err != nil {
				return
			}
			// Queried on the environment's own connection, so that the
			// answer does not wait behind deliveries to the consumer; it
			// may then come before the store, and only what it says
			// counts as stored.
			type answer struct {
				off int64
				err error
			}
			ans := make(chan answer, 1)
			go func() { // the client may wait for ever on a dead broker
				got, err := env.QueryOffset(chaosConsumer, chaosStream)
				ans <- answer{got, err}
			}()
			var a answer
			select {
			case a = <-ans:
			case <-stop:
				return
			}
			got, err := a.off, a.err
			if errors.Is(err, stream.OffsetNotFoundError) {
				continue
			}
			if err != nil {
				return
			}
			if got > off {
				c.errorf("%s: QueryOffset %d right after storing %d", chaosConsumer, got, off)
			}
			c.off.mu.Lock()
			c.off.stores = append(c.off.stores, storedOffset{got, time.Now()})
			c.counts.offStores++
			c.off.mu.Unlock()
			stored = off
		}
	}()
	return cons
}

// checkDeclares checks that the churned queues exist as their last
// confirmed declare or delete says.
func (c *chaosState) checkDeclares(conn *amqp091.Connection) {
	c.decl.mu.Lock()
	defer c.decl.mu.Unlock()
	for i, want := range c.decl.state {
		ch, err := conn.Channel()
		if err != nil {
			c.t.Fatalf("channel: %v", err)
		}
		_, err = ch.QueueDeclarePassive(chaosDeclName(i), true, false, false, false, nil)
		var ae *amqp091.Error
		exists := err == nil
		if err != nil && !(errors.As(err, &ae) && ae.Code == amqp091.NotFound) {
			c.t.Fatalf("run %d: passive declare %s: %v", c.run, chaosDeclName(i), err)
		}
		if exists {
			ch.Close()
		}
		c.counts.declChecks++
		switch {
		case want == "exists" && !exists:
			c.errorf("queue %s declared (declare-ok received), missing after the restart", chaosDeclName(i))
		case want == "gone" && exists:
			c.errorf("queue %s deleted (delete-ok received), back after the restart", chaosDeclName(i))
		}
		c.decl.state[i] = map[bool]string{true: "exists", false: "gone"}[exists]
	}
}

// declChurn declares and deletes queues of every type until the broker
// is killed.
func (c *chaosState) declChurn(conn *amqp091.Connection, rng *rand.Rand, wg *sync.WaitGroup) {
	defer wg.Done()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	types := []string{"classic", "quorum", "stream"}
	for range 2000 {
		i := rng.IntN(chaosDeclNames)
		name := chaosDeclName(i)
		c.decl.mu.Lock()
		was := c.decl.state[i]
		c.decl.state[i] = "unknown"
		c.decl.mu.Unlock()
		var err error
		if was == "exists" {
			_, err = ch.QueueDelete(name, false, false, false)
			c.counts.deletes++
		} else {
			_, err = ch.QueueDeclare(name, true, false, false, false, amqp091.Table{"x-queue-type": types[rng.IntN(len(types))]})
			c.counts.declares++
		}
		if err != nil {
			return // the broker is gone: the state stays unknown
		}
		c.decl.mu.Lock()
		c.decl.state[i] = map[bool]string{true: "gone", false: "exists"}[was == "exists"]
		c.decl.mu.Unlock()
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
}
