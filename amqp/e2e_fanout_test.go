package amqp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/queues"
)

// Fan-out by reference end to end (queues/bodies.go): a message routed
// to several durable queues is stored once, in the vhost's body log, and
// each queue holds a reference. amqp091-go cannot tell: every queue
// gets every message, with its properties, in publish order.

// segFiles counts the segment files in dir and sums their sizes.
func segFiles(t *testing.T, dir string) (n int, bytes int64) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".segment") {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n++
			bytes += fi.Size()
		}
	}
	return n, bytes
}

// bodyLogDir is vhost "/"'s body log: dataDir/bodies/<hex of "/">.
func bodyLogDir(dataDir string) string { return filepath.Join(dataDir, "bodies", "2f") }

// fanMsg is the i-th message of the fan-out tests: 1 KiB, with
// properties and a header.
func fanMsg(i int) amqp091.Publishing {
	return amqp091.Publishing{
		DeliveryMode: amqp091.Persistent, MessageId: fmt.Sprint("id-", i), ContentType: "text/plain",
		Headers: amqp091.Table{"i": int32(i)},
		Body:    []byte(fmt.Sprintf("m-%d-%s", i, strings.Repeat("x", 1000))),
	}
}

func checkFanMsg(t *testing.T, queue string, d amqp091.Delivery, i int) {
	t.Helper()
	want := fanMsg(i)
	if string(d.Body) != string(want.Body) || d.MessageId != want.MessageId || d.ContentType != "text/plain" ||
		d.Headers["i"] != int32(i) || d.DeliveryMode != amqp091.Persistent || d.Exchange != "fan" {
		t.Fatalf("%s: delivery for message %d: body %.12q id %q headers %v mode %d exchange %q",
			queue, i, d.Body, d.MessageId, d.Headers, d.DeliveryMode, d.Exchange)
	}
}

// Ensure fan-out to classic and quorum queues whose consumers ack at
// different speeds, with one queue deleted midway and a restart in
// between, delivers every message to every queue exactly as before;
// that the queues' logs hold references, not copies; and that the body
// log's files go once every queue has acked.
func TestFanoutByReference(t *testing.T) {
	opts := queues.Options{QueueSegmentSize: 16 << 10}
	tb := startBroker(t, brokerOpts{queues: opts})
	c, ch := tb.channel(t)
	must(t, ch.ExchangeDeclare("fan", "fanout", true, false, false, false, nil))
	decl := []struct {
		name string
		args amqp091.Table
	}{
		{"fast", nil},
		{"slow", nil},
		{"quorum", amqp091.Table{"x-queue-type": "quorum"}},
		{"doomed", nil},
		{"history", amqp091.Table{"x-history-max-length-bytes": int64(1 << 30)}},
	}
	for _, d := range decl {
		if _, err := ch.QueueDeclare(d.name, true, false, false, false, d.args); err != nil {
			t.Fatal(err)
		}
		must(t, ch.QueueBind(d.name, "", "fan", false, nil))
	}
	// A transient queue gets its own copy, as before.
	if _, err := ch.QueueDeclare("transient", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	must(t, ch.QueueBind("transient", "", "fan", false, nil))

	// fast consumes as it goes; slow takes a third and acks half of it.
	fch, fd := consumeStreamQ(t, c, "fast", 50, nil)
	const n = 600
	sch, sd := consumeStreamQ(t, c, "slow", n/3, nil)
	var ps []amqp091.Publishing
	for i := range n {
		ps = append(ps, fanMsg(i))
	}
	publishAll(t, c, "fan", "", ps[:n/2]...)
	// The doomed queue goes midway, with its references.
	if _, err := ch.QueueDelete("doomed", false, false, false); err != nil {
		t.Fatal(err)
	}
	publishAll(t, c, "fan", "", ps[n/2:]...)
	for i := range n {
		d := recv(t, fd)
		checkFanMsg(t, "fast", d, i)
		must(t, d.Ack(false))
	}
	for i := range n / 3 {
		d := recv(t, sd)
		checkFanMsg(t, "slow", d, i)
		if i < n/6 {
			must(t, d.Ack(false))
		}
	}
	fch.Close()

	bodyN, bodyBytes := segFiles(t, bodyLogDir(tb.dir))
	if bodyBytes < n*1000 || bodyN < 3 {
		t.Fatalf("body log: %d segments, %d bytes for %d bodies of 1 KiB", bodyN, bodyBytes, n)
	}
	var queueBytes int64
	for _, name := range []string{"fast", "slow", "quorum", "history"} {
		q, err := tb.broker.Queue("/", name)
		if err != nil {
			t.Fatal(err)
		}
		_, b := segFiles(t, filepath.Join(tb.dir, "queues", fmt.Sprint(q.Def().ID)))
		queueBytes += b
	}
	// Four references of 26 bytes (and their chunks) per message, not
	// four copies of 1 KiB.
	if queueBytes > bodyBytes/4 {
		t.Fatalf("queue logs hold %d bytes next to %d of bodies: copies, not references", queueBytes, bodyBytes)
	}
	t.Logf("bodies %d bytes in %d segments; four queue logs %d bytes", bodyBytes, bodyN, queueBytes)
	sch.Close() // slow's unacked half goes back
	c.Close()

	tb = tb.restart(t)
	t.Cleanup(tb.stop)
	c, ch = tb.channel(t)
	if _, err := ch.QueueDeclarePassive("doomed", true, false, false, false, nil); err == nil {
		t.Fatal("the deleted queue came back")
	}
	ch, _ = c.Channel()
	for name, ready := range map[string]int{"fast": 0, "slow": n - n/6, "quorum": n, "history": n} {
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil || q.Messages != ready {
			t.Fatalf("%s after the restart: %+v, %v; want %d ready", name, q, err, ready)
		}
	}
	// The body log keeps what slow, quorum and history still reference.
	if got, _ := segFiles(t, bodyLogDir(tb.dir)); got != bodyN {
		t.Fatalf("body segments %d -> %d with every body still referenced", bodyN, got)
	}
	for _, q := range []struct {
		name  string
		first int
	}{{"slow", n / 6}, {"quorum", 0}, {"history", 0}} {
		_, d := consumeStreamQ(t, c, q.name, 100, nil)
		for i := q.first; i < n; i++ {
			m := recv(t, d)
			checkFanMsg(t, q.name, m, i)
			// slow's unacked messages were delivered before (and with
			// prefetch n/3, up to n/6 more than the test took).
			if q.name == "slow" && (i < n/3 && !m.Redelivered || i >= n/3+n/6 && m.Redelivered) {
				t.Fatalf("slow: message %d redelivered %v", i, m.Redelivered)
			}
			must(t, m.Ack(false))
		}
		none(t, d)
	}
	// The history queue's settled messages are still readable, through
	// their references.
	hs, _, hch := readHistory(t, c, "history", "first", n)
	for i, d := range hs {
		checkFanMsg(t, "history", d, i)
	}
	hch.Close()
	// history keeps its segments, hence its references, hence the bodies:
	// only deleting it lets every body go.
	if _, err := ch.QueueDelete("history", false, false, false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		tb.broker.ReclaimBodies()
		got, b := segFiles(t, bodyLogDir(tb.dir))
		if got == 1 {
			t.Logf("after every ack: body log %d segment, %d bytes", got, b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("body log still has %d segments (%d bytes) after every queue acked", got, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ensure a fanned-out message dead-lettered from one queue (rejected)
// reaches the dead-letter queue whole, while the other queue keeps its
// own.
func TestFanoutByReferenceDeadLetter(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	c, ch := tb.channel(t)
	must(t, ch.ExchangeDeclare("fan", "fanout", true, false, false, false, nil))
	for _, q := range []struct {
		name string
		args amqp091.Table
	}{
		{"dlq", nil},
		{"rejecting", amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}},
		{"keeping", nil},
	} {
		if _, err := ch.QueueDeclare(q.name, true, false, false, false, q.args); err != nil {
			t.Fatal(err)
		}
	}
	must(t, ch.QueueBind("rejecting", "", "fan", false, nil))
	must(t, ch.QueueBind("keeping", "", "fan", false, nil))
	const n = 20
	var ps []amqp091.Publishing
	for i := range n {
		ps = append(ps, fanMsg(i))
	}
	publishAll(t, c, "fan", "", ps...)
	_, rd := consumeStreamQ(t, c, "rejecting", n, nil)
	for i := range n {
		d := recv(t, rd)
		checkFanMsg(t, "rejecting", d, i)
		must(t, d.Reject(false))
	}
	_, dd := consumeStreamQ(t, c, "dlq", n, nil)
	for i := range n {
		d := recv(t, dd)
		if string(d.Body) != string(fanMsg(i).Body) || d.MessageId != fmt.Sprint("id-", i) || d.Headers["x-first-death-queue"] != "rejecting" {
			t.Fatalf("dead letter %d: body %.12q id %q headers %v", i, d.Body, d.MessageId, d.Headers)
		}
		must(t, d.Ack(false))
	}
	_, kd := consumeStreamQ(t, c, "keeping", n, nil)
	for i := range n {
		d := recv(t, kd)
		checkFanMsg(t, "keeping", d, i)
		must(t, d.Ack(false))
	}
}
