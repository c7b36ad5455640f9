package mgmttest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warren-mq/warren/mgmt/mgmttest"
	"github.com/warren-mq/warren/queues"
)

const wait = 10 * time.Second

// quiet is how long a test waits to see that something does not happen.
const quiet = 300 * time.Millisecond

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.SetBasicAuth("guest", "guest")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// checkVisible asserts what the API and the metrics show of the alarms:
// mem and disk are whether each is on.
func checkVisible(t *testing.T, tb *mgmttest.Broker, mem, disk bool) {
	t.Helper()
	var want []string
	if mem {
		want = append(want, `{"node":"warren@test","resource":"memory"}`)
	}
	if disk {
		want = append(want, `{"node":"warren@test","resource":"disk space"}`)
	}
	for path, reason := range map[string]string{
		"/api/health/checks/alarms":       "There are alarms in effect in the cluster",
		"/api/health/checks/local-alarms": "There are alarms in effect on the node",
	} {
		code, body := get(t, tb.URL+path)
		wantBody := `{"status":"ok"}`
		wantCode := 200
		if mem || disk {
			wantCode = 503
			wantBody = `{"alarms":[` + strings.Join(want, ",") + `],"reason":"` + reason + `","status":"failed"}`
		}
		if code != wantCode || strings.TrimSpace(body) != wantBody {
			t.Errorf("%s: %d %s; want %d %s", path, code, body, wantCode, wantBody)
		}
	}
	_, body := get(t, tb.URL+"/api/nodes")
	var nodes []map[string]any
	if err := json.Unmarshal([]byte(body), &nodes); err != nil || len(nodes) != 1 {
		t.Fatalf("nodes: %v %s", err, body)
	}
	n := nodes[0]
	if n["mem_alarm"] != mem || n["disk_free_alarm"] != disk || n["mem_limit"] != float64(mgmttest.MemoryLimit) ||
		n["disk_free_limit"] != float64(50_000_000) || n["mem_used"] == nil || n["disk_free"] == nil {
		t.Errorf("node: mem_alarm %v disk_free_alarm %v mem_limit %v disk_free_limit %v mem_used %v disk_free %v",
			n["mem_alarm"], n["disk_free_alarm"], n["mem_limit"], n["disk_free_limit"], n["mem_used"], n["disk_free"])
	}
	_, metrics := get(t, tb.MetricsURL+"/metrics")
	bit := map[bool]string{false: "0", true: "1"}
	for _, line := range []string{
		"rabbitmq_alarms_memory_used_watermark " + bit[mem],
		"rabbitmq_alarms_free_disk_space_watermark " + bit[disk],
		"# TYPE rabbitmq_alarms_memory_used_watermark untyped",
		"rabbitmq_resident_memory_limit_bytes 1.073741824e+09",
		"# HELP rabbitmq_resident_memory_limit_bytes Memory high watermark in bytes",
		"# TYPE rabbitmq_disk_space_available_limit_bytes gauge",
		"rabbitmq_disk_space_available_limit_bytes 5e+07",
	} {
		if !strings.Contains(metrics, "\n"+line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
}

// connState returns the API's state of the connection named by the
// client property connection_name.
func connState(t *testing.T, tb *mgmttest.Broker, name string) string {
	t.Helper()
	_, body := get(t, tb.URL+"/api/connections")
	var conns []struct {
		State string `json:"state"`
		Name  string `json:"user_provided_name"`
	}
	if err := json.Unmarshal([]byte(body), &conns); err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		if c.Name == name {
			return c.State
		}
	}
	t.Fatalf("no connection %q in %s", name, body)
	return ""
}

func dial(t *testing.T, tb *mgmttest.Broker, name string) *amqp091.Connection {
	t.Helper()
	props := amqp091.NewConnectionProperties()
	props.SetClientConnectionName(name)
	c, err := amqp091.DialConfig("amqp://guest:guest@"+tb.AMQPAddr+"/", amqp091.Config{Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func blocking(t *testing.T, ch <-chan amqp091.Blocking) amqp091.Blocking {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-time.After(wait):
		t.Fatal("no connection.blocked/unblocked")
	}
	return amqp091.Blocking{}
}

// Ensure a memory alarm blocks an AMQP 0-9-1 publisher as RabbitMQ does
// (connection.blocked with "low on memory" once it publishes, its
// publish held until the alarm clears, then confirmed), while a
// consumer on another connection keeps receiving and acking and queues
// can be purged and deleted; and that the health checks, the node and
// the metrics show the alarm while it is on.
func TestMemoryAlarmBlocksAMQPPublishers(t *testing.T) {
	tb := mgmttest.Start(t)
	pubConn := dial(t, tb, "publisher")
	pub, err := pubConn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	blocked := pubConn.NotifyBlocked(make(chan amqp091.Blocking, 4))
	consConn := dial(t, tb, "consumer")
	cons, err := consConn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"work", "to-purge", "to-delete"} {
		if _, err := cons.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for i, q := range []string{"work", "work", "work", "to-purge", "to-purge", "to-delete"} {
		dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false, amqp091.Publishing{Body: []byte{byte('a' + i)}})
		if err != nil || !dc.Wait() {
			t.Fatalf("publish before the alarm: %v", err)
		}
	}
	checkVisible(t, tb, false, false)

	tb.Readings.MemUsed.Store(mgmttest.MemoryLimit + 1)
	tb.Monitor.Check()
	checkVisible(t, tb, true, false)
	// Before it publishes, a connection is "blocking" and not told.
	if s := connState(t, tb, "publisher"); s != queues.StateBlocking {
		t.Errorf("publisher before publishing: %q", s)
	}
	select {
	case b := <-blocked:
		t.Fatalf("connection.blocked before a publish: %+v", b)
	case <-time.After(50 * time.Millisecond):
	}
	dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, "", "work", false, false, amqp091.Publishing{Body: []byte("during")})
	if err != nil {
		t.Fatal(err)
	}
	if b := blocking(t, blocked); !b.Active || b.Reason != "low on memory" {
		t.Fatalf("blocked: %+v", b)
	}
	if s := connState(t, tb, "publisher"); s != queues.StateBlocked {
		t.Errorf("publisher after publishing: %q", s)
	}

	// The consumer's connection works: consume, ack, purge, delete.
	if err := cons.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := cons.Consume("work", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b", "c"} {
		select {
		case d := <-deliveries:
			if string(d.Body) != want {
				t.Fatalf("got %q, want %q", d.Body, want)
			}
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-time.After(wait):
			t.Fatalf("no delivery of %q while blocked", want)
		}
	}
	if n, err := cons.QueuePurge("to-purge", false); err != nil || n != 2 {
		t.Fatalf("purge while blocked: %d, %v", n, err)
	}
	if n, err := cons.QueueDelete("to-delete", false, false, false); err != nil || n != 1 {
		t.Fatalf("delete while blocked: %d, %v", n, err)
	}
	select {
	case d := <-deliveries:
		t.Fatalf("the blocked publish got through: %q", d.Body)
	case <-dc.Done():
		t.Fatal("the blocked publish was confirmed")
	case <-time.After(quiet):
	}

	tb.Readings.MemUsed.Store(mgmttest.StartMemUsed)
	tb.Monitor.Check()
	if b := blocking(t, blocked); b.Active {
		t.Fatalf("unblocked: %+v", b)
	}
	select {
	case <-dc.Done():
		if !dc.Acked() {
			t.Fatal("the held publish was nacked")
		}
	case <-time.After(wait):
		t.Fatal("the held publish was not confirmed after the alarm cleared")
	}
	select {
	case d := <-deliveries:
		if string(d.Body) != "during" {
			t.Fatalf("got %q", d.Body)
		}
	case <-time.After(wait):
		t.Fatal("the held publish was not delivered")
	}
	checkVisible(t, tb, false, false)
	if s := connState(t, tb, "publisher"); s != queues.StateRunning {
		t.Errorf("publisher after the alarm: %q", s)
	}
}

// Ensure a disk alarm stalls the Go stream client's producer (its
// messages confirmed once the alarm clears) while a consumer on the
// same stream keeps reading, refuses new producers as RabbitMQ does,
// and shows in the checks and metrics.
func TestDiskAlarmBlocksStreamPublishers(t *testing.T) {
	tb := mgmttest.Start(t)
	host, port, _ := strings.Cut(tb.StreamAddr, ":")
	var p int
	for _, c := range port {
		p = p*10 + int(c-'0')
	}
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetHost(host).SetPort(p).
		SetUser("guest").SetPassword("guest").SetAddressResolver(stream.AddressResolver{Host: host, Port: p}))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.DeclareStream("events", nil); err != nil {
		t.Fatal(err)
	}
	prod, err := env.NewProducer("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	confirms := prod.NotifyPublishConfirmation()
	batch := func(from, n int) []message.StreamMessage {
		var msgs []message.StreamMessage
		for i := from; i < from+n; i++ {
			msgs = append(msgs, amqp.NewMessage([]byte{byte(i)}))
		}
		return msgs
	}
	confirmed := func(n int, within time.Duration) int {
		got := 0
		timeout := time.After(within)
		for got < n {
			select {
			case cs := <-confirms:
				for _, c := range cs {
					if !c.IsConfirmed() {
						t.Fatalf("message %d not confirmed", c.GetPublishingId())
					}
					got++
				}
			case <-timeout:
				return got
			}
		}
		return got
	}
	if err := prod.BatchSend(batch(0, 10)); err != nil {
		t.Fatal(err)
	}
	if n := confirmed(10, wait); n != 10 {
		t.Fatalf("%d of 10 confirmed before the alarm", n)
	}

	tb.Readings.DiskFree.Store(50_000_000 - 1)
	tb.Monitor.Check()
	checkVisible(t, tb, false, true)
	if err := prod.BatchSend(batch(10, 10)); err != nil {
		t.Fatal(err)
	}
	received := make(chan byte, 100)
	cons, err := env.NewConsumer("events", func(_ stream.ConsumerContext, m *amqp.Message) {
		received <- m.GetData()[0]
	}, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for i := range 10 {
		select {
		case b := <-received:
			if int(b) != i {
				t.Fatalf("consumed %d, want %d", b, i)
			}
		case <-time.After(wait):
			t.Fatalf("consumer stalled at %d while the producer was blocked", i)
		}
	}
	if n := confirmed(10, quiet); n != 0 {
		t.Fatalf("%d messages confirmed while blocked", n)
	}
	select {
	case b := <-received:
		t.Fatalf("a blocked message was stored: %d", b)
	default:
	}
	if _, err := env.NewProducer("events", nil); err == nil {
		t.Error("a new producer was declared during the alarm (RabbitMQ: PRECONDITION_FAILED)")
	}

	tb.Readings.DiskFree.Store(mgmttest.StartDiskFree)
	tb.Monitor.Check()
	if n := confirmed(10, wait); n != 10 {
		t.Fatalf("%d of 10 confirmed after the alarm", n)
	}
	for i := 10; i < 20; i++ {
		select {
		case b := <-received:
			if int(b) != i {
				t.Fatalf("consumed %d, want %d", b, i)
			}
		case <-time.After(wait):
			t.Fatalf("message %d not consumed after the alarm", i)
		}
	}
	checkVisible(t, tb, false, false)
}

// Ensure, and measure, how soon a publisher is blocked after the free
// disk space crosses the limit while the disk drains at a steady rate:
// the monitor's adaptive interval (RabbitMQ's rule, assuming 1 GB/s)
// reads the disk more often as it nears the limit. The figures are
// logged (go test -v -run DiskAlarmReaction ./mgmt/mgmttest).
func TestDiskAlarmReaction(t *testing.T) {
	for _, rate := range []float64{1e9, 10e9} { // bytes per second
		tb := mgmttest.Start(t)
		conn := dial(t, tb, "publisher")
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDeclare("q", false, false, true, false, nil); err != nil {
			t.Fatal(err)
		}
		blocked := conn.NotifyBlocked(make(chan amqp091.Blocking, 4))
		stopPub := make(chan struct{})
		pubDone := make(chan struct{})
		go func() {
			defer close(pubDone)
			for {
				select {
				case <-stopPub:
					return
				default:
				}
				if ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: []byte("x")}) != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()

		const limit, above = 50_000_000, 1e9
		tb.Readings.DiskFree.Store(limit + above)
		tb.Monitor.Check() // the monitor's next reading is due in 1 s
		start := time.Now()
		crossAt := start.Add(time.Duration(above / rate * float64(time.Second)))
		drainDone := make(chan struct{})
		go func() {
			defer close(drainDone)
			for {
				used := rate * time.Since(start).Seconds()
				if used >= above+1e6 {
					tb.Readings.DiskFree.Store(limit - 1e6)
					return
				}
				tb.Readings.DiskFree.Store(uint64(limit + above - used))
				time.Sleep(200 * time.Microsecond)
			}
		}()
		b := blocking(t, blocked)
		blockedAt := time.Now()
		if !b.Active || b.Reason != "low on disk" {
			t.Fatalf("blocked: %+v", b)
		}
		<-drainDone
		reaction := blockedAt.Sub(crossAt)
		t.Logf("disk draining at %.0f GB/s from %.0f GB above the limit: publisher blocked %v after the free space crossed the limit", rate/1e9, above/1e9, reaction.Round(time.Millisecond))
		if reaction < 0 || reaction > 6*time.Second {
			t.Errorf("reaction %v", reaction)
		}
		tb.Readings.DiskFree.Store(mgmttest.StartDiskFree)
		tb.Monitor.Check()
		if b := blocking(t, blocked); b.Active {
			t.Fatalf("unblocked: %+v", b)
		}
		close(stopPub)
		<-pubDone
	}
}

func do(t *testing.T, method, url, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// Ensure an operator can free disk space during a disk alarm: a
// tighter retention policy deletes a stream's old segments at once, and
// a stream can be deleted, through the management API.
func TestDiskAlarmRetentionAndDeletesWork(t *testing.T) {
	tb := mgmttest.Start(t)
	host, port, _ := strings.Cut(tb.StreamAddr, ":")
	var p int
	for _, c := range port {
		p = p*10 + int(c-'0')
	}
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetHost(host).SetPort(p).
		SetUser("guest").SetPassword("guest").SetAddressResolver(stream.AddressResolver{Host: host, Port: p}))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	for _, name := range []string{"trim", "drop"} {
		if err := env.DeclareStream(name, stream.NewStreamOptions().SetMaxSegmentSizeBytes(stream.ByteCapacity{}.KB(4))); err != nil {
			t.Fatal(err)
		}
	}
	prod, err := env.NewProducer("trim", nil)
	if err != nil {
		t.Fatal(err)
	}
	confirms := prod.NotifyPublishConfirmation()
	for range 20 { // 20 batches of 4 KiB: a segment each
		var msgs []message.StreamMessage
		for range 4 {
			msgs = append(msgs, amqp.NewMessage(make([]byte, 1000)))
		}
		if err := prod.BatchSend(msgs); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 4; {
			select {
			case cs := <-confirms:
				n += len(cs)
			case <-time.After(wait):
				t.Fatal("no confirm")
			}
		}
	}
	s, err := tb.Broker.Stream("/", "trim")
	if err != nil {
		t.Fatal(err)
	}
	before := s.Stats()

	tb.Readings.DiskFree.Store(1)
	tb.Monitor.Check()
	checkVisible(t, tb, false, true)
	if code := do(t, "PUT", tb.URL+"/api/policies/%2F/trim", `{"pattern":"^trim$","apply-to":"streams","definition":{"max-length-bytes":10000}}`); code != 201 {
		t.Fatalf("policy: %d", code)
	}
	after := s.Stats()
	if after.Segments >= before.Segments || after.Bytes > 10_000+5_000 {
		t.Fatalf("retention during the alarm: %d segments, %d bytes before; %d, %d after", before.Segments, before.Bytes, after.Segments, after.Bytes)
	}
	t.Logf("retention during the disk alarm: %d segments, %d bytes before; %d, %d after", before.Segments, before.Bytes, after.Segments, after.Bytes)
	if code := do(t, "DELETE", tb.URL+"/api/queues/%2F/drop", ""); code != 204 {
		t.Fatalf("delete during the alarm: %d", code)
	}
	if _, err := tb.Broker.Stream("/", "drop"); err == nil {
		t.Fatal("stream not deleted")
	}
	tb.Readings.DiskFree.Store(mgmttest.StartDiskFree)
	tb.Monitor.Check()
	checkVisible(t, tb, false, false)
}
