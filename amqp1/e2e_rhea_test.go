package amqp1

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The rhea tests run nodejs/e2e.js (Node's rhea, pinned in
// nodejs/package.json) against a broker of their own, one scenario per
// subtest; a scenario prints a JSON object of what it saw, asserted
// here. They skip when node or nodejs/node_modules is missing, except in
// CI (CI=true), where .ci/run installs them with `npm ci` and a skip
// would hide a gap.

// rhea runs a scenario and decodes its JSON into out.
func (tb *testBroker) rhea(t *testing.T, out any, args ...string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		skipUnlessCI(t, "node is not on PATH")
	}
	dir, err := filepath.Abs("nodejs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "rhea")); err != nil {
		skipUnlessCI(t, "amqp1/nodejs/node_modules is missing; run `npm ci` in amqp1/nodejs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"e2e.js"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WARREN_AMQP_URL=amqp://"+tb.addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("node e2e.js %v did not finish in time:\n%s%s", args, stdout, stderr.String())
	}
	if err != nil {
		t.Fatalf("node e2e.js %v: %v\n%s%s", args, err, stdout, stderr.String())
	}
	t.Logf("node e2e.js %v: %s%s", args, stdout, stderr.String())
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("node e2e.js %v: output %q: %v", args, stdout, err)
	}
}

// skipUnlessCI skips the test, or fails it in CI.
func skipUnlessCI(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

type rheaError struct {
	Condition   string `json:"condition"`
	Description string `json:"description"`
}

type rheaOutcome struct {
	Outcome string     `json:"outcome"`
	Error   *rheaError `json:"error"`
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: got %#v, want %#v", what, got, want)
	}
}

func bodies(ds []amqp091.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Body))
	}
	return out
}

// Ensure rhea logs in with SASL PLAIN and ANONYMOUS, and is refused with
// a wrong password and without SASL.
func TestRheaSASL(t *testing.T) {
	tb := startBroker(t, Config{})
	var out struct {
		Plain, Anonymous     bool
		BadPassword, NoSASL  string
		MaxFrame, ChannelMax float64
	}
	tb.rhea(t, &out, "sasl")
	equal(t, "plain", out.Plain, true)
	equal(t, "anonymous", out.Anonymous, true)
	equal(t, "wrong password", out.BadPassword, "refused")
	equal(t, "no SASL", out.NoSASL, "refused")
	equal(t, "max-frame-size", out.MaxFrame, 131072.0)
	equal(t, "channel-max", out.ChannelMax, 63.0)
}

// Ensure rhea's unsettled sends to /queues/q, /exchanges/amq.direct/rk
// and the null target are accepted and stored in order, an unroutable
// one released, and a null-target send whose "to" names nothing or is
// missing rejected with RabbitMQ's errors.
func TestRheaPublish(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "q", nil)
	declare(t, ch, "xq", nil)
	if err := ch.QueueBind("xq", "rk", "amq.direct", false, nil); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Queue                           []string
		Exchange, Unroutable            string
		AnonymousTo                     string
		AnonymousMissing, AnonymousNoTo rheaOutcome
	}
	tb.rhea(t, &out, "publish")
	equal(t, "to /queues/q", out.Queue, []string{"accepted", "accepted", "accepted"})
	equal(t, "to /exchanges/amq.direct/rk", out.Exchange, "accepted")
	equal(t, "unroutable", out.Unroutable, "released")
	equal(t, "null target, to /queues/q", out.AnonymousTo, "accepted")
	equal(t, "to a missing exchange", out.AnonymousMissing, rheaOutcome{"rejected", &rheaError{"amqp:not-found", "no exchange 'missing' in vhost '/'"}})
	equal(t, "without to", out.AnonymousNoTo, rheaOutcome{"rejected", &rheaError{"amqp:precondition-failed", "anonymous terminus requires 'to' address to be set"}})
	qs := get(t, ch, "q", 4)
	equal(t, "q", bodies(qs), []string{"q0", "q1", "q2", "q3"})
	equal(t, "message-id", qs[1].MessageId, "q1")
	xs := get(t, ch, "xq", 1)
	equal(t, "xq", bodies(xs), []string{"x0"})
	equal(t, "routing key", xs[0].RoutingKey, "rk")
	equal(t, "exchange", xs[0].Exchange, "amq.direct")
}

// Ensure a receiver with one credit gets exactly one message until it
// gives more, whether or not it has settled the first; a released or
// modified (delivery-failed) message comes back first, no longer
// first-acquirer (as mc_amqp sets the header of a redelivered message);
// and the accepted ones are gone.
func TestRheaCredit(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "credit", nil)
	publish091(t, ch, "credit", 3, amqp091.Publishing{})
	waitReady(t, tb, "credit", 3)
	var out struct {
		First, WhileUnsettled, AfterAccept string
		Second, AfterRelease               string
		AfterReleaseFirstAcquirer          bool
		AfterReleaseDeliveryCount          float64
		Third, AfterModified               string
		AfterModifiedDeliveryCount         float64
		AfterModifiedFirstAcquirer         bool
		FirstFirstAcquirer                 bool
	}
	tb.rhea(t, &out, "credit")
	equal(t, "first", out.First, "m0")
	equal(t, "with the credit used, unsettled", out.WhileUnsettled, "none")
	equal(t, "with the credit used, accepted", out.AfterAccept, "none")
	equal(t, "second", out.Second, "m1")
	equal(t, "after release", out.AfterRelease, "m1")
	equal(t, "after release, first-acquirer", out.AfterReleaseFirstAcquirer, false)
	equal(t, "third", out.Third, "m2")
	equal(t, "after modified", out.AfterModified, "m2")
	equal(t, "first delivery, first-acquirer", out.FirstFirstAcquirer, true)
	equal(t, "after modified, first-acquirer", out.AfterModifiedFirstAcquirer, false)
	waitReady(t, tb, "credit", 0)
}

// Ensure rejected and modified with undeliverable-here dead-letter a
// message through its queue's dead-letter exchange.
func TestRheaDeadLetter(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "dl-dst", nil)
	declare(t, ch, "dl-src", amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dl-dst"})
	publish091(t, ch, "dl-src", 2, amqp091.Publishing{})
	waitReady(t, tb, "dl-src", 2)
	var out struct {
		Rejected, Modified string
		DeadLettered       []struct {
			Body          string
			Annotations   []string
			FirstAcquirer bool
		}
	}
	tb.rhea(t, &out, "deadletter")
	equal(t, "rejected", out.Rejected, "m0")
	equal(t, "modified", out.Modified, "m1")
	var got []string
	for _, d := range out.DeadLettered {
		got = append(got, d.Body)
	}
	equal(t, "dead-lettered", got, []string{"m0", "m1"})
	for _, d := range out.DeadLettered {
		if !slices.Contains(d.Annotations, "x-death") || !slices.Contains(d.Annotations, "x-first-death-reason") || d.FirstAcquirer {
			t.Errorf("dead-lettered %s: annotations %v first-acquirer %v; want x-death, x-first-death-reason, not first-acquirer", d.Body, d.Annotations, d.FirstAcquirer)
		}
	}
	waitReady(t, tb, "dl-src", 0)
}

// Ensure a stream is read from rabbitmq:stream-offset-spec "first" and
// from an offset, each message with its x-stream-offset, and the filter
// is echoed in the attach.
func TestRheaStream(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "s", amqp091.Table{"x-queue-type": "stream"})
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 5))
	for i := range 5 {
		if err := ch.Publish("", "s", false, false, amqp091.Publishing{Body: fmt.Appendf(nil, "s%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		if c := <-confirms; !c.Ack {
			t.Fatal("nack")
		}
	}
	type msg struct {
		Body   string
		Offset float64
	}
	var out struct {
		First, Offset3             []msg
		FirstFilter, Offset3Filter []string
	}
	tb.rhea(t, &out, "stream")
	var want []msg
	for i := range 5 {
		want = append(want, msg{fmt.Sprintf("s%d", i), float64(i)})
	}
	equal(t, "from first", out.First, want)
	equal(t, "from offset 3", out.Offset3, want[3:])
	equal(t, "filter echoed", out.FirstFilter, []string{"rabbitmq:stream-offset-spec"})
}

// Ensure a message's properties, application properties, header and body
// (data, amqp-value string and map, amqp-sequence) survive a round trip
// through a classic queue, a quorum queue and a stream, all AMQP 1.0.
func TestRheaRoundTrip(t *testing.T) {
	tb := startBroker(t, Config{})
	ch := tb.channel(t)
	declare(t, ch, "rt-classic", nil)
	declare(t, ch, "rt-quorum", amqp091.Table{"x-queue-type": "quorum"})
	declare(t, ch, "stream-rt", amqp091.Table{"x-queue-type": "stream"})
	type body struct {
		Kind  string
		Value any
	}
	type msg struct {
		Body                  body
		MessageID             string         `json:"message_id"`
		CorrelationID         string         `json:"correlation_id"`
		ContentType           string         `json:"content_type"`
		ContentEncoding       string         `json:"content_encoding"`
		Subject               string         `json:"subject"`
		ReplyTo               string         `json:"reply_to"`
		GroupID               string         `json:"group_id"`
		CreationTime          float64        `json:"creation_time"`
		UserID                string         `json:"user_id"`
		Durable               bool           `json:"durable"`
		Priority              float64        `json:"priority"`
		ApplicationProperties map[string]any `json:"application_properties"`
	}
	for _, q := range []string{"rt-classic", "rt-quorum", "stream-rt"} {
		t.Run(q, func(t *testing.T) {
			var out struct {
				Outcomes []string
				Got      []msg
			}
			tb.rhea(t, &out, "roundtrip", q)
			equal(t, "outcomes", out.Outcomes, []string{"accepted", "accepted", "accepted", "accepted"})
			if len(out.Got) != 4 {
				t.Fatalf("got %d messages, want 4", len(out.Got))
			}
			m := out.Got[0]
			// A stream stores the AMQP 1.0 message; classic and quorum
			// queues the AMQP 0-9-1 conversion (msgconv.To091) with the
			// 1.0 properties section beside it, so the subject comes
			// back as sent, as RabbitMQ (which keeps the 1.0 message)
			// gives it; application properties come from the 0-9-1
			// headers, booleans in the two-byte form (0x56, as
			// RabbitMQ's mc_amqpl writes them), which rhea reads as the
			// number 1.
			subject, boolean := "subj", any(true)
			if q != "stream-rt" {
				boolean = 1.0
			}
			equal(t, "data body", m.Body, body{"data", "data-body"})
			equal(t, "properties", []any{m.MessageID, m.CorrelationID, m.ContentType, m.ContentEncoding, m.Subject, m.ReplyTo, m.GroupID, m.CreationTime, m.UserID},
				[]any{"mid-1", "cid-1", "text/plain", "identity", subject, "/queues/replies", "g1", 1700000000000.0, "guest"})
			equal(t, "header", []any{m.Durable, m.Priority}, []any{true, 7.0})
			equal(t, "application properties", m.ApplicationProperties, map[string]any{"s": "str", "i": 42.0, "neg": -7.0, "b": boolean, "d": 1.5})
			equal(t, "amqp-value string", out.Got[1].Body, body{"value", "a string value"})
			equal(t, "amqp-sequence", out.Got[2].Body, body{"sequence", []any{"x", 1.0, true}})
			equal(t, "amqp-value map", out.Got[3].Body, body{"value", map[string]any{"k": "v"}})
			equal(t, "message ids", []string{out.Got[1].MessageID, out.Got[2].MessageID, out.Got[3].MessageID}, []string{"mid-2", "mid-3", "mid-4"})
		})
	}
}

// Ensure attaching to a missing queue or exchange is refused with
// amqp:not-found and RabbitMQ's text, an address of the v1 format with
// amqp:invalid-field, and the connection stays open.
func TestRheaNotFound(t *testing.T) {
	tb := startBroker(t, Config{})
	var out struct {
		Receiver, Sender, Exchange, V1 rheaError
		StillOpen                      bool
	}
	tb.rhea(t, &out, "notfound")
	equal(t, "receiver", out.Receiver, rheaError{"amqp:not-found", "no queue 'missing' in vhost '/'"})
	equal(t, "sender", out.Sender, rheaError{"amqp:not-found", "no queue 'missing' in vhost '/'"})
	equal(t, "exchange", out.Exchange, rheaError{"amqp:not-found", "no exchange 'missing' in vhost '/'"})
	equal(t, "v1 address", out.V1.Condition, "amqp:invalid-field")
	equal(t, "connection open", out.StillOpen, true)
}

// Ensure rhea does direct reply-to as RabbitMQ 4.2 has it: a dynamic
// volatile source gives the reply address, a responder on another
// connection replies through the null target, and the reply arrives
// settled.
func TestRheaDirectReplyTo(t *testing.T) {
	tb := startBroker(t, Config{})
	declare(t, tb.channel(t), "rpc", nil)
	var out struct {
		Address, Sent, Replied, RequestReplyTo, Reply, Correlation string
		Settled                                                    bool
	}
	tb.rhea(t, &out, "replyto")
	if !strings.HasPrefix(out.Address, "/queues/amq.rabbitmq.reply-to.") {
		t.Errorf("reply address %q", out.Address)
	}
	equal(t, "request reply-to", out.RequestReplyTo, out.Address)
	equal(t, "outcomes", []string{out.Sent, out.Replied}, []string{"accepted", "accepted"})
	equal(t, "reply", []string{out.Reply, out.Correlation}, []string{"pong", "c1"})
	equal(t, "reply settled", out.Settled, true)
}
