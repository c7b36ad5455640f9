package prom_test

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	amqp091 "github.com/rabbitmq/amqp091-go"
	samqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warren-mq/warren/mgmt/mgmttest"
	"github.com/warren-mq/warren/queues"
)

// scrape is one parsed answer of the endpoint.
type scrape map[string]*dto.MetricFamily

func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func scrapeURL(t *testing.T, url string) scrape {
	t.Helper()
	code, ctype, body := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if !strings.HasPrefix(ctype, "text/plain") {
		t.Fatalf("GET %s: Content-Type %q", url, ctype)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("GET %s: parse: %v", url, err)
	}
	return fams
}

// value is the sample of name whose labels include want (name=value
// pairs); it fails unless exactly one sample matches.
func (s scrape) value(t *testing.T, name string, want ...string) float64 {
	t.Helper()
	v, ok := s.lookup(name, want...)
	if !ok {
		t.Fatalf("no single sample %s%v", name, want)
	}
	return v
}

func (s scrape) lookup(name string, want ...string) (float64, bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
	var found []float64
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			found = append(found, m.Counter.GetValue())
		case m.Gauge != nil:
			found = append(found, m.Gauge.GetValue())
		case m.Untyped != nil:
			found = append(found, m.Untyped.GetValue())
		case m.Histogram != nil:
			found = append(found, float64(m.Histogram.GetSampleCount()))
		}
	}
	if len(found) != 1 {
		return 0, false
	}
	return found[0], true
}

func (s scrape) typ(name string) dto.MetricType {
	if f := s[name]; f != nil {
		return f.GetType()
	}
	return -1
}

// delta checks that name rose by want between two scrapes.
func delta(t *testing.T, before, after scrape, want float64, name string, labels ...string) {
	t.Helper()
	b, _ := before.lookup(name, labels...)
	a := after.value(t, name, labels...)
	if a-b != want {
		t.Errorf("%s%v rose by %v (%v -> %v), want %v", name, labels, a-b, b, a, want)
	}
}

func amqpURL(tb *mgmttest.Broker) string { return "amqp://guest:guest@" + tb.AMQPAddr + "/" }

// Ensure the counters say what the clients did: publishes, confirms,
// routing, returns, deliveries of every kind, acks, dead-lettering,
// queue depths and the stream protocol's traffic, each checked as a
// rise between two scrapes or as a value.
func TestMetricsCountWhatClientsDid(t *testing.T) {
	tb := mgmttest.Start(t)
	before := scrapeURL(t, tb.MetricsURL+"/metrics")

	conn, err := amqp091.Dial(amqpURL(tb))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"work", "depth"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 200))
	returns := ch.NotifyReturn(make(chan amqp091.Return, 10))
	body := make([]byte, 500)
	for range 100 {
		if err := ch.Publish("", "work", false, false, amqp091.Publishing{Body: body, DeliveryMode: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		if err := ch.Publish("", "depth", false, false, amqp091.Publishing{Body: []byte("d")}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // mandatory, routed nowhere: returned
		if err := ch.Publish("amq.direct", "nowhere", true, false, amqp091.Publishing{Body: []byte("r")}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // not mandatory: dropped
		if err := ch.Publish("amq.direct", "nowhere", false, false, amqp091.Publishing{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 115 {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatalf("publish %d nacked", c.DeliveryTag)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d confirms of 115", i)
		}
	}
	for range 3 {
		<-returns
	}

	// depth: 3 of 10 delivered and held unacked.
	cch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := cch.Qos(3, 0, false); err != nil {
		t.Fatal(err)
	}
	held, err := cch.Consume("depth", "holder", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-held
	}
	// work: 60 consumed with manual acks, acked; then 5 by basic.get with
	// manual ack, one of them rejected with requeue and got again
	// (redelivered), and 5 by basic.get with auto-ack; then the queue is
	// drained by an auto-ack consumer, and one more get finds it empty.
	wch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := wch.Qos(60, 0, false); err != nil {
		t.Fatal(err)
	}
	work, err := wch.Consume("work", "acker", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var last amqp091.Delivery
	for range 60 {
		last = <-work
	}
	// Cancelled before the ack, which would let more through.
	if err := wch.Cancel("acker", false); err != nil {
		t.Fatal(err)
	}
	if err := last.Ack(true); err != nil {
		t.Fatal(err)
	}
	gch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := gch.Get("work", false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := d.Reject(true); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		d, ok, err := gch.Get("work", false)
		if err != nil || !ok {
			t.Fatalf("get: %v %v", ok, err)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		if _, ok, err := gch.Get("work", true); err != nil || !ok {
			t.Fatalf("get auto-ack: %v %v", ok, err)
		}
	}
	rest, err := gch.Consume("work", "drain", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 - 60 - 5 - 5 {
		<-rest
	}
	if err := gch.Cancel("drain", false); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := gch.Get("work", true); err != nil || ok {
		t.Fatalf("get on an empty queue: %v %v", ok, err)
	}
	// A rejected message without a dead-letter exchange is dropped:
	// dead-lettered with strategy "disabled".
	if err := ch.Publish("", "work", false, false, amqp091.Publishing{Body: []byte("reject me")}); err != nil {
		t.Fatal(err)
	}
	<-confirms
	d, ok, err = gch.Get("work", false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := d.Reject(false); err != nil {
		t.Fatal(err)
	}

	// The stream protocol: 50 published and confirmed, all read.
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri("rabbitmq-stream://guest:guest@" + tb.StreamAddr + "/%2F"))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.DeclareStream("events", nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer("events", nil)
	if err != nil {
		t.Fatal(err)
	}
	sconfirms := p.NotifyPublishConfirmation()
	var msgs []message.StreamMessage
	for i := range 50 {
		msgs = append(msgs, samqp.NewMessage(fmt.Appendf(nil, "e%d", i)))
	}
	if err := p.BatchSend(msgs); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 50; {
		select {
		case cs := <-sconfirms:
			for _, c := range cs {
				if !c.IsConfirmed() {
					t.Fatal("stream publish not confirmed")
				}
			}
			n += len(cs)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d stream confirms of 50", n)
		}
	}
	got := make(chan struct{}, 50)
	c, err := env.NewConsumer("events", func(stream.ConsumerContext, *samqp.Message) { got <- struct{}{} },
		stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 50 {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("stream consumer did not get 50 messages")
		}
	}
	// Deleting a stream that does not exist: an error response counted.
	if err := env.DeleteStream("no-such-stream"); err == nil {
		t.Fatal("deleted a missing stream")
	}

	after := scrapeURL(t, tb.MetricsURL+"/metrics")
	amqp, strm := []string{"protocol", "amqp091"}, []string{"protocol", "stream"}
	classic := append(amqp[:2:2], "queue_type", "rabbit_classic_queue")
	delta(t, before, after, 116, "rabbitmq_global_messages_received_total", amqp...)
	delta(t, before, after, 116, "rabbitmq_global_messages_received_confirm_total", amqp...)
	delta(t, before, after, 111, "rabbitmq_global_messages_routed_total", amqp...)
	delta(t, before, after, 3, "rabbitmq_global_messages_unroutable_returned_total", amqp...)
	delta(t, before, after, 2, "rabbitmq_global_messages_unroutable_dropped_total", amqp...)
	delta(t, before, after, 116, "rabbitmq_global_messages_confirmed_total", amqp...)
	// 3 held + 60 acked + 1 rejected + 5 got + 5 auto-got + 30 drained + 1 rejected
	delta(t, before, after, 105, "rabbitmq_global_messages_delivered_total", classic...)
	delta(t, before, after, 63, "rabbitmq_global_messages_delivered_consume_manual_ack_total", classic...)
	delta(t, before, after, 30, "rabbitmq_global_messages_delivered_consume_auto_ack_total", classic...)
	delta(t, before, after, 7, "rabbitmq_global_messages_delivered_get_manual_ack_total", classic...)
	delta(t, before, after, 5, "rabbitmq_global_messages_delivered_get_auto_ack_total", classic...)
	delta(t, before, after, 1, "rabbitmq_global_messages_get_empty_total", classic...)
	delta(t, before, after, 1, "rabbitmq_global_messages_redelivered_total", classic...)
	delta(t, before, after, 65, "rabbitmq_global_messages_acknowledged_total", classic...)
	delta(t, before, after, 1, "rabbitmq_global_messages_dead_lettered_rejected_total", "queue_type", "rabbit_classic_queue", "dead_letter_strategy", "disabled")
	delta(t, before, after, 0, "rabbitmq_global_messages_dead_lettered_rejected_total", "queue_type", "rabbit_classic_queue", "dead_letter_strategy", "at_most_once")
	delta(t, before, after, 50, "rabbitmq_global_messages_received_total", strm...)
	delta(t, before, after, 50, "rabbitmq_global_messages_confirmed_total", strm...)
	delta(t, before, after, 50, "rabbitmq_global_messages_delivered_total", "protocol", "stream", "queue_type", "rabbit_stream_queue")
	delta(t, before, after, 1, "rabbitmq_global_stream_error_stream_does_not_exist_total", strm...)
	delta(t, before, after, 3, "rabbitmq_queues_created_total")
	// Aggregated channel families: the AMQP 0-9-1 sums.
	delta(t, before, after, 116, "rabbitmq_channel_messages_published_total")
	delta(t, before, after, 7, "rabbitmq_channel_get_ack_total")
	delta(t, before, after, 63, "rabbitmq_channel_messages_delivered_ack_total")
	delta(t, before, after, 65, "rabbitmq_channel_messages_acked_total")
	delta(t, before, after, 111, "rabbitmq_queue_messages_published_total")
	delta(t, before, after, 116, "rabbitmq_message_size_bytes", amqp...) // the histogram's count
	if got := after.value(t, "rabbitmq_global_publishers", amqp...); got != 1 {
		t.Errorf("amqp091 publishers %v, want 1 (the one channel that published)", got)
	}
	if got := after.value(t, "rabbitmq_global_consumers", amqp...); got != 1 {
		t.Errorf("amqp091 consumers %v, want 1 (the holder)", got)
	}
	if got := after.value(t, "rabbitmq_global_consumers", strm...); got != 1 {
		t.Errorf("stream consumers %v, want 1", got)
	}
	if got := after.value(t, "rabbitmq_global_publishers", strm...); got != 1 {
		t.Errorf("stream publishers %v, want 1", got)
	}
	for name, want := range map[string]float64{
		// Aggregated: the sums over queues (work is empty; depth 7 + 3;
		// the stream's 50 are ready).
		"rabbitmq_queue_messages_ready":   7 + 50,
		"rabbitmq_queue_messages_unacked": 3,
		"rabbitmq_queue_messages":         10 + 50,
		"rabbitmq_queues":                 3,
		"rabbitmq_connections":            4, // amqp091-go; the stream client's locator, producer and consumer

		"rabbitmq_channels":  4,
		"rabbitmq_consumers": 2,
	} {
		if got := after.value(t, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if after.typ("rabbitmq_global_messages_received_total") != dto.MetricType_COUNTER || after.typ("rabbitmq_queue_messages_ready") != dto.MetricType_GAUGE ||
		after.typ("rabbitmq_message_size_bytes") != dto.MetricType_HISTOGRAM || after.typ("rabbitmq_identity_info") != dto.MetricType_UNTYPED {
		t.Errorf("metric types: %v %v %v %v", after.typ("rabbitmq_global_messages_received_total"), after.typ("rabbitmq_queue_messages_ready"),
			after.typ("rabbitmq_message_size_bytes"), after.typ("rabbitmq_identity_info"))
	}
	if h := after["rabbitmq_global_messages_received_total"].GetHelp(); h != "Total number of messages received from publishers" {
		t.Errorf("help %q", h)
	}
	id := after.value(t, "rabbitmq_identity_info", "rabbitmq_node", "warren@test", "rabbitmq_cluster", "warren@test", "rabbitmq_endpoint", "aggregated")
	if id != 1 {
		t.Errorf("identity_info %v", id)
	}
	if after.value(t, "rabbitmq_process_resident_memory_bytes") <= 0 || after.value(t, "rabbitmq_process_open_fds") <= 0 ||
		after.value(t, "rabbitmq_process_max_fds") <= 0 {
		t.Error("process metrics are zero")
	}
	if after.value(t, "warren_log_bytes_written_total") <= before.value(t, "warren_log_bytes_written_total") {
		t.Error("warren_log_bytes_written_total did not rise")
	}
	delta(t, before, after, 100*500+10+3+2+9, "warren_messages_received_bytes_total", amqp...)
	// Publishers that wait for confirms stay well inside their credit.
	delta(t, before, after, 0, "warren_flow_control_holds_total", amqp...)
	delta(t, before, after, 0, "warren_flow_control_holds_total", strm...)
	if typ := after.typ("warren_flow_control_holds_total"); typ != dto.MetricType_COUNTER {
		t.Errorf("warren_flow_control_holds_total type %v, want counter", typ)
	}

	// Per object: one sample per queue, the 7 ready and 3 unacked of
	// depth, the stream's consumer lag (it has read everything).
	po := scrapeURL(t, tb.MetricsURL+"/metrics/per-object")
	q := func(name string) []string { return []string{"vhost", "/", "queue", name} }
	for _, c := range []struct {
		name, queue string
		want        float64
	}{
		{"rabbitmq_queue_messages_ready", "depth", 7},
		{"rabbitmq_queue_messages_unacked", "depth", 3},
		{"rabbitmq_queue_messages", "depth", 10},
		{"rabbitmq_queue_consumers", "depth", 1},
		{"rabbitmq_queue_messages_ready", "work", 0},
		{"rabbitmq_queue_messages_acked_total", "work", 65},
		{"rabbitmq_queue_messages_redelivered_total", "work", 1},
		{"warren_queue_messages_published_total", "work", 101},
		{"rabbitmq_queue_messages_ready", "events", 50},
		{"rabbitmq_queue_consumers", "events", 1},
		{"rabbitmq_stream_consumer_max_offset_lag", "events", 0},
		{"warren_stream_messages", "events", 50},
		{"rabbitmq_queue_info", "events", 1},
	} {
		if got := po.value(t, c.name, q(c.queue)...); got != c.want {
			t.Errorf("%s{queue=%q} = %v, want %v", c.name, c.queue, got, c.want)
		}
	}
	if got := po.value(t, "rabbitmq_queue_info", "queue", "events", "queue_type", "rabbit_stream_queue", "membership", "leader"); got != 1 {
		t.Errorf("queue_info of the stream: %v", got)
	}
	if n := len(po["rabbitmq_queue_messages_ready"].Metric); n != 3 {
		t.Errorf("%d queue_messages_ready samples, want 3", n)
	}
	if po.value(t, "rabbitmq_identity_info", "rabbitmq_endpoint", "per-object") != 1 {
		t.Error("per-object identity")
	}
}

// Ensure /metrics/detailed emits only the families asked for, under
// rabbitmq_detailed_, for the vhosts and queues asked for, and answers a
// bad queue filter with 400 as RabbitMQ does.
func TestDetailedFilters(t *testing.T) {
	tb := mgmttest.Start(t)
	conn, err := amqp091.Dial(amqpURL(tb))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"orders.eu", "orders.us", "audit"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.Publish("", q, false, false, amqp091.Publishing{Body: []byte(q)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.Broker.PutVHost(queues.VHost{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		s := scrapeURL(t, tb.MetricsURL+"/metrics")
		v, _ := s.lookup("rabbitmq_queue_messages_ready")
		return v == 3
	})

	s := scrapeURL(t, tb.MetricsURL+"/metrics/detailed?family=queue_coarse_metrics&queue=%5Eorders%5C.")
	var names []string
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{"rabbitmq_build_info", "rabbitmq_detailed_queue_info", "rabbitmq_detailed_queue_messages", "rabbitmq_detailed_queue_messages_ready", "rabbitmq_detailed_queue_messages_unacked", "rabbitmq_identity_info"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("families %v\nwant %v", names, want)
	}
	var queuesSeen []string
	for _, m := range s["rabbitmq_detailed_queue_messages_ready"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "queue" {
				queuesSeen = append(queuesSeen, l.GetValue())
			}
		}
		if m.Gauge.GetValue() != 1 {
			t.Errorf("ready %v", m.Gauge.GetValue())
		}
	}
	sort.Strings(queuesSeen)
	if fmt.Sprint(queuesSeen) != "[orders.eu orders.us]" {
		t.Errorf("queues %v", queuesSeen)
	}

	// A vhost filter: no queue in "other"; vhost_status lists it alone.
	s = scrapeURL(t, tb.MetricsURL+"/metrics/detailed?family=queue_coarse_metrics&family=vhost_status&vhost=other")
	if f := s["rabbitmq_detailed_queue_messages_ready"]; f != nil && len(f.Metric) != 0 {
		t.Errorf("queues of vhost other: %v", f.Metric)
	}
	if s.value(t, "rabbitmq_cluster_vhost_status", "vhost", "other") != 1 || len(s["rabbitmq_cluster_vhost_status"].Metric) != 1 {
		t.Errorf("vhost_status: %v", s["rabbitmq_cluster_vhost_status"])
	}
	// No family: identity only.
	s = scrapeURL(t, tb.MetricsURL+"/metrics/detailed")
	if len(s) != 2 || s["rabbitmq_identity_info"] == nil {
		t.Errorf("detailed without family: %d families", len(s))
	}
	if s.value(t, "rabbitmq_identity_info", "rabbitmq_endpoint", "detailed") != 1 {
		t.Error("detailed identity")
	}
	// Bad requests.
	for url, want := range map[string]string{
		"/metrics/detailed?family=queue_coarse_metrics&queue=(": "Invalid 'queue' regex",
		"/metrics/detailed?queue=a&queue=b":                     "Only one 'queue' query parameter is allowed",
		"/metrics/detailed?queue=" + strings.Repeat("a", 2001):  "'queue' regex too long",
		"/metrics/nope": "Unknown Registry",
		"/metrics/detailed?family=exchange_bindings&family=no_such_x": "",
	} {
		code, _, body := get(t, tb.MetricsURL+url)
		switch {
		case want == "" && code != http.StatusOK:
			t.Errorf("GET %s: %d %s", url, code, body)
		case want != "" && !strings.Contains(body, want):
			t.Errorf("GET %s: %d %q, want %q", url, code, body, want)
		case want == "Unknown Registry" && code != http.StatusNotFound, want != "" && want != "Unknown Registry" && code != http.StatusBadRequest:
			t.Errorf("GET %s: status %d", url, code)
		}
	}
	s = scrapeURL(t, tb.MetricsURL+"/metrics/detailed?family=exchange_bindings")
	if got := s.value(t, "rabbitmq_cluster_exchange_bindings", "vhost", "/", "exchange", "amq.direct", "type", "direct"); got != 0 {
		t.Errorf("amq.direct bindings %v", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
