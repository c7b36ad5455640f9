package amqp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
)

// Queue history end to end: a classic or quorum queue declared with
// x-history-* keeps its settled messages, and basic.consume with
// x-stream-offset reads them like a stream (queues/history_consume.go).

// historyBroker is a broker whose queue logs have small segments and a
// clock the test can set (chunk timestamps: history by time and by age).
type historyBroker struct {
	*testBroker
	clock *streamClock
	opts  queues.Options
}

func startHistory(t *testing.T, dir string, clock *streamClock) *historyBroker {
	t.Helper()
	if clock == nil {
		clock = &streamClock{}
	}
	opts := queues.Options{StreamOptions: osiris.Options{Now: clock.now}, QueueSegmentSize: 4096}
	return &historyBroker{testBroker: startBroker(t, brokerOpts{dir: dir, queues: opts}), clock: clock, opts: opts}
}

// restart closes the broker and opens a new one on the same directory.
func (h *historyBroker) restart(t *testing.T) *historyBroker {
	t.Helper()
	h.stop()
	return startHistory(t, h.dir, h.clock)
}

// drainAck consumes n messages from queue with an ordinary consumer and
// acks them; the channel is closed.
func drainAck(t *testing.T, c *amqp091.Connection, queue string, n int) []amqp091.Delivery {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	must(t, ch.Qos(100, 0, false))
	d, err := ch.Consume(queue, "drain", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ds []amqp091.Delivery
	for len(ds) < n {
		m := recv(t, d)
		must(t, m.Ack(false))
		ds = append(ds, m)
	}
	must(t, ch.Cancel("drain", false))
	return ds
}

// readHistory reads n deliveries of queue's history from offset (an
// x-stream-offset value) with prefetch 10, acking each, and checks
// the x-stream-offset headers run on by one and redelivered is false.
func readHistory(t *testing.T, c *amqp091.Connection, queue string, offset any, n int) ([]amqp091.Delivery, <-chan amqp091.Delivery, *amqp091.Channel) {
	t.Helper()
	ch, d := consumeStreamQ(t, c, queue, 10, amqp091.Table{"x-stream-offset": offset})
	var out []amqp091.Delivery
	for len(out) < n {
		m := recv(t, d)
		if m.Redelivered {
			t.Fatalf("history delivery %q redelivered", m.Body)
		}
		if len(out) > 0 && offsetOf(t, m) != offsetOf(t, out[len(out)-1])+1 {
			t.Fatalf("offsets %d then %d", offsetOf(t, out[len(out)-1]), offsetOf(t, m))
		}
		must(t, m.Ack(false)) // gives credit back
		out = append(out, m)
	}
	t.Cleanup(func() { ch.Close() })
	return out, d, ch
}

func declareHistory(t *testing.T, ch *amqp091.Channel, name string, args amqp091.Table) {
	t.Helper()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("declare %q: %v", name, err)
	}
}

// Ensure a classic and a quorum queue with history, consumed and acked
// empty, can be read again from first, from an offset and from a
// timestamp, with their exchange, routing key, properties and bodies,
// and that the history reader follows new publishes.
func TestHistoryBrowse(t *testing.T) {
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			h := startHistory(t, "", nil)
			c, ch := h.channel(t)
			name := "hist-" + typ
			declareHistory(t, ch, name, amqp091.Table{"x-queue-type": typ, "x-history-max-length-bytes": int64(1 << 30)})
			t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
			h.clock.set(t0)
			const n = 30
			ps := texts("a", 0, n)
			for i := range ps {
				ps[i].Headers = amqp091.Table{"i": int32(i)}
				ps[i].CorrelationId = fmt.Sprint(i)
			}
			publishAll(t, c, "", name, ps...)
			drainAck(t, c, name, n)
			if q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil); err != nil || q.Messages != 0 {
				t.Fatalf("after draining: %+v, %v", q, err)
			}

			ds, hch, _ := readHistory(t, c, name, "first", n)
			wantBodies(t, "from first", ds, names("a", 0, n))
			for i, d := range ds {
				if d.RoutingKey != name || d.Exchange != "" || d.CorrelationId != fmt.Sprint(i) || d.Headers["i"] != int32(i) {
					t.Fatalf("delivery %d: exchange %q key %q correlation %q headers %v", i, d.Exchange, d.RoutingKey, d.CorrelationId, d.Headers)
				}
			}
			first := offsetOf(t, ds[0])

			// It follows the tail.
			h.clock.set(t0.Add(10 * time.Second))
			publishAll(t, c, "", name, texts("b", 0, 5)...)
			tail := recvN(t, hch, 5)
			wantBodies(t, "the tail", tail, names("b", 0, 5))
			if offsetOf(t, tail[0]) != first+n {
				t.Fatalf("tail at %d, want %d", offsetOf(t, tail[0]), first+n)
			}

			// From an offset: the 11th message on.
			ds, _, _ = readHistory(t, c, name, first+10, n-10+5)
			wantBodies(t, "from an offset", ds, append(names("a", 10, n), names("b", 0, 5)...))
			if offsetOf(t, ds[0]) != first+10 {
				t.Fatalf("from offset %d: first delivery at %d", first+10, offsetOf(t, ds[0]))
			}
			// From a timestamp between the batches.
			ds, _, _ = readHistory(t, c, name, t0.Add(5*time.Second), 5)
			wantBodies(t, "from a timestamp", ds, names("b", 0, 5))
			// last: the last chunk's messages at least, ending with b-4.
			ch2, dl := consumeStreamQ(t, c, name, 10, amqp091.Table{"x-stream-offset": "last"})
			for {
				m := recv(t, dl)
				must(t, m.Ack(false))
				if string(m.Body) == "b-4" {
					break
				}
			}
			ch2.Close()
			drainAck(t, c, name, 5)
		})
	}
}

// Ensure a history reader running beside ordinary consumers changes
// neither the queue's counts (passive declare, management stats) nor
// what the ordinary consumers get, and is not one of its consumers.
func TestHistoryReaderLeavesQueueAlone(t *testing.T) {
	h := startHistory(t, "", nil)
	c, ch := h.channel(t)
	declareHistory(t, ch, "q", amqp091.Table{"x-history-max-age": "1D"})
	publishAll(t, c, "", "q", texts("m", 0, 20)...)

	// An ordinary consumer holds 5 unacked.
	och, err := c.Channel()
	must(t, err)
	must(t, och.Qos(5, 0, false))
	od, err := och.Consume("q", "ordinary", false, false, false, false, nil)
	must(t, err)
	held := recvN(t, od, 5)

	// The history reader reads all 20 (and acks them: only credit).
	ds, _, hch := readHistory(t, c, "q", "first", 20)
	wantBodies(t, "history", ds, names("m", 0, 20))
	none(t, od) // the ordinary consumer got nothing more

	q, err := ch.QueueDeclarePassive("q", true, false, false, false, nil)
	must(t, err)
	if q.Messages != 15 || q.Consumers != 1 {
		t.Fatalf("passive declare: %d messages, %d consumers; want 15, 1", q.Messages, q.Consumers)
	}
	bq, err := h.broker.Queue("/", "q")
	must(t, err)
	st := bq.Stats()
	if st.Ready != 15 || st.Unacked != 5 || st.Consumers != 1 || st.Acked != 0 {
		t.Fatalf("stats %+v; want 15 ready, 5 unacked, 1 consumer, 0 acked", st)
	}
	if hs, ok := bq.History(); !ok || hs.Readers != 1 || hs.Messages != 20 {
		t.Fatalf("history %+v, %v; want 1 reader, 20 messages", hs, ok)
	}

	// The ordinary consumer requeues what it holds: they come back to
	// it redelivered, while the history still shows each message once.
	must(t, held[4].Nack(true, true))
	re := recvN(t, od, 5)
	for i, d := range re {
		if !d.Redelivered || string(d.Body) != fmt.Sprintf("m-%d", i) {
			t.Fatalf("redelivery %d: %q redelivered=%v", i, d.Body, d.Redelivered)
		}
	}
	ds2, _, _ := readHistory(t, c, "q", "first", 20)
	wantBodies(t, "history after requeue", ds2, names("m", 0, 20))
	hch.Close()
	// The reader's channel closed: it is gone from the history stats.
	deadline := time.Now().Add(wait)
	for {
		hs, _ := bq.History()
		if hs.Readers == 1 { // the second reader's channel is still open
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history readers %d after a channel closed", hs.Readers)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ensure history readers are refused as stream consumers are without
// qos and with no-ack, and on a queue without history.
func TestHistoryReaderRefusals(t *testing.T) {
	h := startHistory(t, "", nil)
	c, ch := h.channel(t)
	declareHistory(t, ch, "plain", nil)
	declareHistory(t, ch, "hist", amqp091.Table{"x-history-max-age": "1h"})
	off := amqp091.Table{"x-stream-offset": "first"}
	chanErr(t, c, 406, "PRECONDITION_FAILED - queue 'plain' in vhost '/' keeps no history: x-stream-offset needs x-history-max-age or x-history-max-length-bytes (or a policy with history-max-age or history-max-length-bytes)", func(ch *amqp091.Channel) error {
		must(t, ch.Qos(10, 0, false))
		_, err := ch.Consume("plain", "", false, false, false, false, off)
		return err
	})
	chanErr(t, c, 406, "PRECONDITION_FAILED - consumer prefetch count is not set for history of queue 'hist' in vhost '/'", func(ch *amqp091.Channel) error {
		_, err := ch.Consume("hist", "", false, false, false, false, off)
		return err
	})
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid arg 'x-stream-offset' for history of queue 'hist' in vhost '/': {invalid_stream_offset_arg,{longstr,<<\"bogus\">>}}", func(ch *amqp091.Channel) error {
		must(t, ch.Qos(10, 0, false))
		_, err := ch.Consume("hist", "", false, false, false, false, amqp091.Table{"x-stream-offset": "bogus"})
		return err
	})
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid arg 'x-history-max-age' for queue 'bad' in vhost '/': invalid_max_age", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare("bad", true, false, false, false, amqp091.Table{"x-history-max-age": "7 days"})
		return err
	})
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid arg 'x-history-max-length-bytes' for queue 'bad' in vhost '/': {value_negative,-1}", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare("bad", true, false, false, false, amqp091.Table{"x-history-max-length-bytes": int64(-1)})
		return err
	})
	chanErr(t, c, 406, "PRECONDITION_FAILED - invalid arg 'x-history-max-age' for queue 'bad' in vhost '/' of queue type rabbit_stream_queue", func(ch *amqp091.Channel) error {
		_, err := ch.QueueDeclare("bad", true, false, false, false, amqp091.Table{"x-queue-type": "stream", "x-history-max-age": "1h"})
		return err
	})
	// A hard error: the connection closes (last).
	chanErr(t, c, 540, "NOT_IMPLEMENTED - automatic acknowledgement not supported by history of queue 'hist' in vhost '/'", func(ch *amqp091.Channel) error {
		must(t, ch.Qos(10, 0, false))
		_, err := ch.Consume("hist", "", true, false, false, false, off)
		return err
	})
}

// queueDirOf returns the log directory of a durable queue.
func queueDirOf(t *testing.T, h *historyBroker, name string) string {
	t.Helper()
	q, err := h.broker.Queue("/", name)
	must(t, err)
	return filepath.Join(h.dir, "queues", fmt.Sprint(q.Def().ID))
}

// logBytes sums the sizes of a log directory's segment files.
func logBytes(t *testing.T, dir string) (int64, int) {
	t.Helper()
	es, err := os.ReadDir(dir)
	must(t, err)
	var n int64
	segs := 0
	for _, e := range es {
		if filepath.Ext(e.Name()) == ".segment" {
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted since the listing: retention at work
			}
			must(t, err)
			n += fi.Size()
			segs++
		}
	}
	return n, segs
}

// history returns the queue's history stats.
func (h *historyBroker) history(t *testing.T, name string) (queues.HistoryStats, bool) {
	t.Helper()
	q, err := h.broker.Queue("/", name)
	must(t, err)
	return q.History()
}

// waitFirstOffset waits until the queue's history starts past offset.
func waitFirstOffset(t *testing.T, h *historyBroker, name string, past uint64) queues.HistoryStats {
	t.Helper()
	q, err := h.broker.Queue("/", name)
	must(t, err)
	deadline := time.Now().Add(wait)
	for {
		hs, _ := q.History()
		if hs.FirstOffset > past {
			return hs
		}
		if time.Now().After(deadline) {
			t.Fatalf("history still starts at %d", hs.FirstOffset)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ensure history is kept within x-history-max-length-bytes: older
// settled segments are deleted from disk, the newest stay readable.
func TestHistoryRetentionBytes(t *testing.T) {
	h := startHistory(t, "", nil)
	c, ch := h.channel(t)
	const limit = 16 << 10
	declareHistory(t, ch, "q", amqp091.Table{"x-history-max-length-bytes": int64(limit)})
	body := make([]byte, 200)
	var ps []amqp091.Publishing
	for i := range 300 {
		ps = append(ps, amqp091.Publishing{Body: append([]byte(fmt.Sprintf("m-%03d-", i)), body...)})
	}
	publishAll(t, c, "", "q", ps...)
	dir := queueDirOf(t, h, "q")
	before, segsBefore := logBytes(t, dir)
	if before < 4*limit {
		t.Fatalf("log of %d bytes, want well over the limit", before)
	}
	// Nothing settled yet: everything stays.
	time.Sleep(300 * time.Millisecond)
	if n, _ := logBytes(t, dir); n != before {
		t.Fatalf("unsettled log shrank %d -> %d", before, n)
	}
	drainAck(t, c, "q", 300)
	hs := waitFirstOffset(t, h, "q", 0)
	after, segsAfter := logBytes(t, dir)
	for deadline := time.Now().Add(wait); after > limit+4096 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		after, segsAfter = logBytes(t, dir)
	}
	hs, _ = h.history(t, "q")
	if after > limit+4096 || segsAfter >= segsBefore {
		t.Fatalf("log %d bytes in %d segments (from %d in %d), want at most %d", after, segsAfter, before, segsBefore, limit+4096)
	}
	if hs.Bytes != after {
		t.Logf("history bytes %d, files %d", hs.Bytes, after)
	}
	// The rest reads from first: the newest messages, up to the last.
	want := int(hs.Messages)
	t.Logf("history %+v, log %d bytes", hs, after)
	ds, _, _ := readHistory(t, c, "q", "first", want)
	if got := string(ds[len(ds)-1].Body[:5]); got != "m-299"[:5] || string(ds[len(ds)-1].Body[:6]) != "m-299-" {
		t.Fatalf("last history message %q", ds[len(ds)-1].Body[:6])
	}
	if uint64(offsetOf(t, ds[0])) != hs.FirstOffset {
		t.Fatalf("first delivery at %d, history starts at %d", offsetOf(t, ds[0]), hs.FirstOffset)
	}
	// An offset the history no longer holds starts at its first.
	ds, _, _ = readHistory(t, c, "q", int64(0), 1)
	if uint64(offsetOf(t, ds[0])) != hs.FirstOffset {
		t.Fatalf("from offset 0: first delivery at %d, history starts at %d", offsetOf(t, ds[0]), hs.FirstOffset)
	}
}

// Ensure history is kept within x-history-max-age by the chunks'
// timestamps: once the clock passes the age, settled segments go
// without any further publish or ack, and a history reader gets what
// is left.
func TestHistoryRetentionAge(t *testing.T) {
	h := startHistory(t, "", nil)
	c, ch := h.channel(t)
	declareHistory(t, ch, "q", amqp091.Table{"x-history-max-age": "10s"})
	t0 := time.Now().Truncate(time.Second)
	h.clock.set(t0)
	body := make([]byte, 200)
	var ps []amqp091.Publishing
	for i := range 100 {
		ps = append(ps, amqp091.Publishing{Body: append([]byte(fmt.Sprintf("m-%03d-", i)), body...)})
	}
	publishAll(t, c, "", "q", ps...)
	drainAck(t, c, "q", 100)
	dir := queueDirOf(t, h, "q")
	_, segs := logBytes(t, dir)
	time.Sleep(300 * time.Millisecond) // a sweep or more: nothing is old
	if _, n := logBytes(t, dir); n != segs || segs < 3 {
		t.Fatalf("segments %d -> %d before max-age", segs, n)
	}
	h.clock.set(t0.Add(time.Minute))
	hs := waitFirstOffset(t, h, "q", 0)
	// The files go once no reader holds them (soon after the tail).
	_, n := logBytes(t, dir)
	for deadline := time.Now().Add(wait); n != 1 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		_, n = logBytes(t, dir)
	}
	if n != 1 || hs.Segments != 1 {
		t.Fatalf("%d segments left (%+v), want the active one", n, hs)
	}
	ds, _, _ := readHistory(t, c, "q", "first", int(hs.Messages))
	if string(ds[len(ds)-1].Body[:6]) != "m-099-" {
		t.Fatalf("last %q", ds[len(ds)-1].Body[:6])
	}
}

// Ensure the history survives a clean restart and a kill -9 (a copy of
// the data directory taken while the broker runs).
func TestHistoryRestartAndCrash(t *testing.T) {
	h := startHistory(t, "", nil)
	c, ch := h.channel(t)
	declareHistory(t, ch, "q", amqp091.Table{"x-history-max-age": "1D"})
	publishAll(t, c, "", "q", texts("m", 0, 50)...)
	drainAck(t, c, "q", 50)

	h = h.restart(t)
	c, ch = h.channel(t)
	if q, err := ch.QueueDeclarePassive("q", true, false, false, false, nil); err != nil || q.Messages != 0 {
		t.Fatalf("after restart: %+v, %v", q, err)
	}
	ds, _, _ := readHistory(t, c, "q", "first", 50)
	wantBodies(t, "after restart", ds, names("m", 0, 50))

	publishAll(t, c, "", "q", texts("n", 0, 10)...)
	drainAck(t, c, "q", 10)
	// The acks reach the catalog: a flush that began after them landed.
	acked := time.Now()
	for deadline := time.Now().Add(wait); !h.broker.AckStateCovered().After(acked); {
		if time.Now().After(deadline) {
			t.Fatal("acks not persisted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	image := t.TempDir() + "/image"
	must(t, os.CopyFS(image, os.DirFS(h.dir)))
	c2 := startHistory(t, image, h.clock)
	conn, ch2 := c2.channel(t)
	if q, err := ch2.QueueDeclarePassive("q", true, false, false, false, nil); err != nil || q.Messages != 0 {
		t.Fatalf("after crash: %+v, %v", q, err)
	}
	ds, _, _ = readHistory(t, conn, "q", "first", 60)
	wantBodies(t, "after crash", ds, append(names("m", 0, 50), names("n", 0, 10)...))
}

// Ensure a history reader ends with basic.cancel when its queue is
// deleted, and that another connection's exclusive queue refuses one
// (405) as it refuses any consumer.
func TestHistoryReaderDeleteAndExclusive(t *testing.T) {
	h := startHistory(t, "", nil)
	c, ch := h.channel(t)
	declareHistory(t, ch, "q", amqp091.Table{"x-history-max-age": "1h"})
	publishAll(t, c, "", "q", texts("m", 0, 3)...)
	_, d, hch := readHistory(t, c, "q", "first", 3)
	cancels := hch.NotifyCancel(make(chan string, 1))
	if _, err := ch.QueueDelete("q", false, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancels:
	case <-time.After(wait):
		t.Fatal("no basic.cancel after the queue was deleted")
	}
	if m, ok := <-d; ok { // the client closes the consumer's deliveries
		t.Fatalf("delivery %q after the queue was deleted", m.Body)
	}

	if _, err := ch.QueueDeclare("mine", false, false, true, false, amqp091.Table{"x-history-max-age": "1h"}); err != nil {
		t.Fatal(err)
	}
	other := h.dial(t)
	chanErr(t, other, 405, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'mine' in vhost '/'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", func(ch *amqp091.Channel) error {
		must(t, ch.Qos(10, 0, false))
		_, err := ch.Consume("mine", "", false, false, false, false, amqp091.Table{"x-stream-offset": "first"})
		return err
	})
}
