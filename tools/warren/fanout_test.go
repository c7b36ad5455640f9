package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// Fan-out by reference under SIGKILL (docs/design-fanout-by-reference.md,
// queues/bodies.go). A killState with a fanout exchange has queues bound
// to it (killQueue.fan): a message published to the exchange is stored
// once, in the vhost's body log (dataDir/bodies/2f for vhost "/"), and
// each of those queues' logs holds a reference to it. In the model it is
// one killMsg per queue (msgKey), each with its own ack state, so every
// check TestKill9 makes of a queue is made of each fan-out queue: a
// confirmed message never acked in that queue is there exactly once
// after a restart, an ack the persister had written never comes back,
// the body is intact (killBodyOK), and nothing comes that was not
// published to that queue.
//
// The fan-out queues' consumers ack at different speeds (fanStyles: at
// once; slowly, with multiple acks; late, with requeues and held
// messages), so the queues' heads differ and the body log's reclaim,
// every second, runs while references are pending. A publisher also
// sends a few messages straight to each fan-out queue (a copy in the
// queue's own log), so a queue holds both kinds. About one fan-out body
// in five is 4-40 KiB, so that the body log (8 MiB segments, the daemon's
// queue segment size) rolls and drops segments during a longer run.

// fanExchange is the fanout exchange of TestChaos's fan-out queues.
const fanExchange = "chaos-fan"

// fanPad is the padding of a fan-out body: mostly under 200 bytes, one in
// five 4-40 KiB.
func fanPad(rng *rand.Rand) int {
	if rng.IntN(5) == 0 {
		return 4<<10 + rng.IntN(36<<10)
	}
	return rng.IntN(200)
}

// killPad is the padding id names: its last dot-separated field "p<n>",
// else none.
func killPad(id string) int {
	i := strings.LastIndexByte(id, '.')
	if i < 0 || !strings.HasPrefix(id[i+1:], "p") {
		return 0
	}
	n, err := strconv.Atoi(id[i+2:])
	if err != nil {
		return 0
	}
	return n
}

// bodyLogDir is vhost "/"'s body log: dataDir/bodies/<hex of "/">.
func bodyLogDir(dataDir string) string { return filepath.Join(dataDir, "bodies", "2f") }

// bodySegments lists the segment files of the body log in dataDir, with
// their total size; none when there is no body log yet.
func bodySegments(dataDir string) (names []string, bytes int64, err error) {
	ents, err := os.ReadDir(bodyLogDir(dataDir))
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".segment") {
			continue
		}
		fi, err := e.Info()
		if os.IsNotExist(err) {
			continue // reclaimed while we looked
		}
		if err != nil {
			return nil, 0, err
		}
		names = append(names, e.Name())
		bytes += fi.Size()
	}
	return names, bytes, nil
}

// bodyLogStats are what the body log's files showed at the restarts.
type bodyLogStats struct {
	seen     map[string]bool // segment files seen at a restart, and still there at the last
	dropped  int             // seen at a restart, gone at a later one
	maxSegs  int             // the most segments at a restart
	maxBytes int64
}

// noteBodyLog books the body log's segments as they are now.
func (k *killState) noteBodyLog(dataDir string) (segs int, bytes int64) {
	names, bytes, err := bodySegments(dataDir)
	if err != nil {
		k.t.Fatalf("run %d: body log: %v", k.run, err)
	}
	b := &k.bodies
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	now := map[string]bool{}
	for _, n := range names {
		now[n] = true
	}
	for n := range b.seen {
		if !now[n] {
			b.dropped++
			delete(b.seen, n)
		}
	}
	for n := range now {
		b.seen[n] = true
	}
	b.maxSegs, b.maxBytes = max(b.maxSegs, len(names)), max(b.maxBytes, bytes)
	return len(names), bytes
}

// fanQueues are the indexes of the queues bound to the fanout exchange.
func (k *killState) fanQueues() []int {
	var out []int
	for qi, kq := range k.queues {
		if kq.fan {
			out = append(out, qi)
		}
	}
	return out
}

const (
	// spaceBodies and spaceBodySize are what checkBodySpace publishes:
	// 26 MiB, over three of the body log's 8 MiB segments.
	spaceBodies   = 26
	spaceBodySize = 1 << 20
	// spaceMaxSegs is how many body log segments may be left once
	// every queue has acked every message: the active one, and one
	// that a reclaim pass had not yet reached or whose file a queue's
	// body reader still holds open (osiris deletes a truncated
	// segment's file when its last reader moves on). Reclaim drops the
	// oldest segments first, so a queue that pinned any old body would
	// leave every later segment too: the 3 or more seen before.
	spaceMaxSegs = 2
)

// checkBodySpace checks that the body log gives its space back once
// every fan-out queue has settled its references: with every queue
// drained and acked (the last run's drain acks everything), it publishes
// spaceBodies bodies of 1 MiB to the fanout exchange, sees the body log
// hold at least three segments (else the check would prove nothing: the
// daemon's segments are 8 MiB and the chaos load may not have rolled
// one), drains and acks every fan-out queue, and waits for at most
// spaceMaxSegs segment files to be left. The broker reclaims every second;
// the wait gives up after 30 s. Nothing is asserted about when.
func (k *killState) checkBodySpace(conn *amqp091.Connection, rng *rand.Rand, dataDir string) {
	t := k.t
	t.Helper()
	fan := k.fanQueues()
	k.mu.Lock()
	before := k.fst.fanConfirmed
	k.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	k.publisher(conn, killRoute{exchange: k.fanout, queues: fan, prefix: "space",
		pad: func(*rand.Rand) int { return spaceBodySize }}, spaceBodies, rng, &wg)
	k.mu.Lock()
	confirmed := k.fst.fanConfirmed - before
	k.mu.Unlock()
	if confirmed != spaceBodies {
		t.Fatalf("run %d: body space: %d of %d bodies of 1 MiB confirmed", k.run, confirmed, spaceBodies)
	}
	names, full, err := bodySegments(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 3 {
		t.Fatalf("run %d: body space: the body log has %d segments (%d bytes) after %d MiB of bodies; the check would prove nothing",
			k.run, len(names), full, spaceBodies*spaceBodySize>>20)
	}
	k.drainQueues(conn, rng, drainOpts{only: func(kq killQueue) bool { return kq.fan }, ackAll: true})
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, bytes, err := bodySegments(dataDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) <= spaceMaxSegs {
			t.Logf("body space: %d segments (%d bytes) with every body referenced, %d (%d bytes) once every queue acked",
				len(names), full, len(left), bytes)
			return
		}
		if time.Now().After(deadline) {
			k.errorf("body space: the body log still has %d segments (%d bytes; %v) 30 s after every fan-out queue acked every message; %d before",
				len(left), bytes, left, len(names))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logFanTotals logs the fan-out queues' counts: per queue message (one
// published through the exchange is one in each fan-out queue), and the
// body log's files at the restarts.
func (k *killState) logFanTotals(s killStats) {
	k.t.Helper()
	k.t.Logf("AMQP fan-out (%s to %d queues): %d messages published through the exchange, %d confirmed; per queue message: published %d (%d straight to one queue), confirmed %d, delivered %d (%d redelivered), acked %d; acked and back %d (%d applied before a landed write), unflagged %d, under-counted %d, lost %d, duplicates %d",
		k.fanout, len(k.fanQueues()), s.fanPublished, s.fanConfirmed, s.published, s.published-s.fanPublished*len(k.fanQueues()), s.confirmed,
		s.delivered, s.redelivered, s.acked, s.ackedBack, s.ackedBackOld, s.unflagged, s.underCount, s.lost, s.dupes)
	k.t.Logf("body log at the restarts: at most %d segments, %d bytes; %d segments dropped between restarts",
		k.bodies.maxSegs, k.bodies.maxBytes, k.bodies.dropped)
}

// Ensure a fan-out message acked in a queue whose log segment holding
// its reference was then deleted does not come back after SIGKILL. The
// broker rebuilds the references a crash lost from the body log's
// journal (queues/bodies.go rebuildRefs): the bodies from the last
// checkpoint that name the queue, past the last reference the queue's
// log still holds. If the queue's segment with that reference were gone
// (every message in it settled, sweep deleted it) while the active
// segment holds no reference, the queue's log would no longer tell
// which references it had: so the sweep keeps the log from the last
// checkpoint's end on (classic journalFloor), and the test waits for the
// deletion, which therefore comes after a checkpoint covering M. (Before
// that rule, M came back in 17 of 17 runs.) Every step is a single-queue copy but one fan-out
// message M, so the segment rolls after a few 1 MiB copies; the kill
// comes before the broker's next journal checkpoint (every second), for
// M's body to be in the journal: once on a fresh data directory, within
// the broker's first second (no checkpoint yet), and once after a
// checkpoint that covers an earlier fan-out (then a checkpoint may fall
// between M and the kill, and the run proves nothing). Nothing is
// asserted about timing: M must never come back, however the kill falls.
func TestKillFanoutSegmentGone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	for _, checkpointed := range []bool{false, true} {
		fanoutSegmentGoneOnce(t, checkpointed)
	}
}

// fanoutSegmentGoneOnce runs the scenario once, after a journal
// checkpoint or before the first.
func fanoutSegmentGoneOnce(t *testing.T, checkpointed bool) {
	t.Helper()
	k := &killState{t: t, seedEnv: killSeedEnv}
	dir := t.TempDir()
	cmd, addr, promAddr, _ := k.startChild(dir)
	conn, err := amqp091.Dial("amqp://guest:guest@" + addr + "/")
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	const ex, qa, qb = "seg-fan", "seg-a", "seg-b"
	for _, q := range []string{qa, qb} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.ExchangeDeclare(ex, "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{qa, qb} {
		if err := ch.QueueBind(q, "", ex, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("c", spaceBodySize)
	publish := func(exchange, key, id, body string) {
		t.Helper()
		conf, err := ch.PublishWithDeferredConfirm(exchange, key, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, MessageId: id, Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := conf.WaitContext(context.Background()); err != nil || !ok {
			t.Fatalf("publish %s: not confirmed (%v)", id, err)
		}
	}
	cch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := cch.Consume(qa, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	take := func(n int) {
		t.Helper()
		for range n {
			select {
			case d := <-ds:
				if err := d.Ack(false); err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: a delivery missing after 20 s", qa)
			}
		}
		if err := cch.Qos(0, 0, false); err != nil { // the broker has the acks
			t.Fatal(err)
		}
	}
	if checkpointed {
		// An earlier fan-out, settled here, and a checkpoint past it
		// (the broker takes one each second after new bodies).
		publish(ex, "", "P", "fan-out body of P")
		take(1)
		time.Sleep(1500 * time.Millisecond)
	}
	// Nearly a segment of copies, settled; then M, and copies that roll
	// the segment; all settled.
	for i := range 7 {
		publish("", qa, fmt.Sprintf("copy-%d", i), big)
	}
	take(7)
	publish(ex, "", "M", "fan-out body of M")
	for i := 7; i < 10; i++ {
		publish("", qa, fmt.Sprintf("copy-%d", i), big)
	}
	take(4)
	ackedAt := time.Now()
	// A change after ackedAt, for a write of ack states that begins
	// after it: basic.get with no-ack of seg-b's first message.
	if _, ok, err := ch.Get(qb, true); err != nil || !ok {
		t.Fatalf("get from %s: %v, %v", qb, ok, err)
	}
	// Wait until the ack state is on disk and seg-a's first segment,
	// with M's reference, is deleted.
	qdir := biggestQueueDir(t, filepath.Join(dir, "queues"))
	first := filepath.Join(qdir, fmt.Sprintf("%020d.segment", 0))
	deadline := time.Now().Add(20 * time.Second)
	for {
		covered, err := ackCoverage(promAddr)
		if err != nil {
			t.Fatal(err)
		}
		_, statErr := os.Stat(first)
		if covered.After(ackedAt) && os.IsNotExist(statErr) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpointed %v: after 20 s: acks covered since %v (acked at %v), %s: %v", checkpointed, covered, ackedAt, first, statErr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	since := time.Since(ackedAt)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	conn.Close()

	cmd, addr, _, _ = k.startChild(dir)
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	conn, err = amqp091.Dial("amqp://guest:guest@" + addr + "/")
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	ch, err = conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclarePassive(qa, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages == 0 {
		t.Logf("checkpointed %v: %s empty after the kill (killed %v after the last ack)", checkpointed, qa, since.Round(time.Millisecond))
		return
	}
	d, _, err := ch.Get(qa, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Errorf("checkpointed %v: %s holds %d messages after the kill, first %q (redelivered %v); every message in it was acked, the acks persisted and its first segment, with M's reference, deleted before the kill (%v after the last ack)",
		checkpointed, qa, q.Messages, d.MessageId, d.Redelivered, since.Round(time.Millisecond))
}

// biggestQueueDir returns the queue log directory under root with the
// most segment bytes.
func biggestQueueDir(t *testing.T, root string) string {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	best, bestBytes := "", int64(-1)
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		segs, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		var n int64
		for _, s := range segs {
			if fi, err := s.Info(); err == nil && strings.HasSuffix(s.Name(), ".segment") {
				n += fi.Size()
			}
		}
		if n > bestBytes {
			best, bestBytes = dir, n
		}
	}
	return best
}
