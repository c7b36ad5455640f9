package amqp1

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warren-mq/warren/queues"
)

// mgmtClient drives the management node as rabbitmq-amqp-go-client does
// (pkg/rabbitmqamqp amqp_management.go, amqp_utils.go): a sender and a
// receiver on /management named "management-link-pair" with the link
// property paired = true, the sender pre-settled, the receiver with 100
// credits; requests carry message-id, to, subject and reply-to "$me".
type mgmtClient struct {
	t   testing.TB
	snd *goamqp.Sender
	rcv *goamqp.Receiver
	n   int
}

func mgmtSenderOptions(name string) *goamqp.SenderOptions {
	return &goamqp.SenderOptions{
		SourceAddress:               mgmtAddress,
		ExpiryPolicy:                goamqp.ExpiryPolicyLinkDetach,
		Name:                        name,
		Properties:                  map[string]any{"paired": true},
		SettlementMode:              goamqp.SenderSettleModeSettled.Ptr(),
		RequestedReceiverSettleMode: goamqp.ReceiverSettleModeFirst.Ptr(),
	}
}

func mgmtReceiverOptions(name string, credit int32) *goamqp.ReceiverOptions {
	return &goamqp.ReceiverOptions{
		TargetAddress:             mgmtAddress,
		Name:                      name,
		Properties:                map[string]any{"paired": true},
		SettlementMode:            goamqp.ReceiverSettleModeFirst.Ptr(),
		RequestedSenderSettleMode: goamqp.SenderSettleModeSettled.Ptr(),
		ExpiryPolicy:              goamqp.ExpiryPolicyLinkDetach,
		Credit:                    credit,
	}
}

// newMgmt attaches a link pair on s, the sender first, as the Go client.
func newMgmt(t testing.TB, s *goamqp.Session) *mgmtClient {
	t.Helper()
	return newMgmtNamed(t, s, "management-link-pair")
}

func newMgmtNamed(t testing.TB, s *goamqp.Session, name string) *mgmtClient {
	t.Helper()
	snd, err := s.NewSender(ctxT(t), mgmtAddress, mgmtSenderOptions(name))
	if err != nil {
		t.Fatalf("management sender: %v", err)
	}
	rcv, err := s.NewReceiver(ctxT(t), mgmtAddress, mgmtReceiverOptions(name, 100))
	if err != nil {
		t.Fatalf("management receiver: %v", err)
	}
	return &mgmtClient{t: t, snd: snd, rcv: rcv}
}

// mgmt dials a connection as guest and attaches a link pair.
func (tb *testBroker) mgmt(t testing.TB) (*goamqp.Conn, *mgmtClient) {
	t.Helper()
	c, s := tb.dial(t, nil)
	return c, newMgmt(t, s)
}

// send sends a request without waiting for its response; it returns the
// message-id.
func (m *mgmtClient) send(method, path string, body any) string {
	m.t.Helper()
	id, err := m.trySend(method, path, body)
	if err != nil {
		m.t.Fatalf("%s %s: send: %v", method, path, err)
	}
	return id
}

func (m *mgmtClient) trySend(method, path string, body any) (string, error) {
	m.n++
	id := fmt.Sprintf("req-%d", m.n)
	if body == nil {
		body = goamqp.Null{}
	}
	replyTo := "$me"
	msg := &goamqp.Message{
		Value:      body,
		Properties: &goamqp.MessageProperties{MessageID: id, To: &path, Subject: &method, ReplyTo: &replyTo},
	}
	return id, m.snd.Send(ctxT(m.t), msg, &goamqp.SendOptions{Settled: true})
}

// receive reads a response and checks its correlation-id and
// application properties.
func (m *mgmtClient) receive(id string) *goamqp.Message {
	m.t.Helper()
	resp, err := m.rcv.Receive(ctxT(m.t), nil)
	if err != nil {
		m.t.Fatalf("request %s: receive: %v", id, err)
	}
	if resp.Properties == nil || resp.Properties.CorrelationID != id || resp.Properties.Subject == nil {
		m.t.Fatalf("request %s: response properties %+v", id, resp.Properties)
	}
	if resp.ApplicationProperties["http:response"] != "1.1" {
		m.t.Fatalf("request %s: application properties %v", id, resp.ApplicationProperties)
	}
	return resp
}

// do sends a request and returns the response's status and body.
func (m *mgmtClient) do(method, path string, body any) (string, any) {
	m.t.Helper()
	resp := m.receive(m.send(method, path, body))
	return *resp.Properties.Subject, resp.Value
}

// expect sends a request and checks the status (and, for an error, the
// text); it returns the body.
func (m *mgmtClient) expect(method, path string, body any, status string, text ...string) any {
	m.t.Helper()
	got, v := m.do(method, path, body)
	if got != status {
		m.t.Fatalf("%s %s: status %s (%v), want %s", method, path, got, v, status)
	}
	if len(text) > 0 && v != text[0] {
		m.t.Fatalf("%s %s: body %q, want %q", method, path, v, text[0])
	}
	return v
}

// sessionEnded sends a request that RabbitMQ answers by ending the
// session, and checks the condition and description.
func (m *mgmtClient) sessionEnded(method, path string, body any, cond goamqp.ErrCond, desc string) {
	m.t.Helper()
	_, err := m.trySend(method, path, body)
	if err == nil && m.rcv != nil {
		_, err = m.rcv.Receive(ctxT(m.t), nil)
	}
	// Without a receiver, or when the end overtakes the send: send until
	// the session's end is seen.
	for deadline := time.Now().Add(wait); err == nil && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		_, err = m.trySend(method, path, body)
	}
	var se *goamqp.SessionError
	if !errors.As(err, &se) || se.RemoteErr == nil || se.RemoteErr.Condition != cond || (desc != "" && se.RemoteErr.Description != desc) {
		m.t.Fatalf("%s %s: %v, want the session ended with %s %q", method, path, err, cond, desc)
	}
}

// qpath is the Go client's queue path (encodePathSegments:
// url.QueryEscape with "+" as "%20").
func qpath(name string) string { return "/queues/" + escapeSegment(name) }

func xpath(name string) string { return "/exchanges/" + escapeSegment(name) }

func escapeSegment(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// Ensure a queue's life over the management node: declare (201, then
// 200 with the same info), get, purge and delete report RabbitMQ's info
// and counts, and the queue is the one AMQP 0-9-1 publishes to.
func TestManagementQueueLifecycle(t *testing.T) {
	tb := startBroker(t, Config{Node: "warren@test"})
	_, m := tb.mgmt(t)
	ch := tb.channel(t)

	name := "my 🐇/q"
	props := map[string]any{"durable": true, "exclusive": false, "auto_delete": false,
		"arguments": map[string]any{"x-queue-type": "quorum"}}
	info := m.expect("PUT", qpath(name), props, "201")
	want := map[string]any{
		"leader": "warren@test", "message_count": uint64(0), "consumer_count": uint32(0),
		"name": name, "vhost": "/", "durable": true, "auto_delete": false, "exclusive": false,
		"type": "quorum", "arguments": map[string]any{"x-queue-type": "quorum"},
		"replicas": []string{"warren@test"},
	}
	if !reflect.DeepEqual(info, want) {
		t.Fatalf("declared:\n%#v\nwant\n%#v", info, want)
	}
	if again := m.expect("PUT", qpath(name), props, "200"); !reflect.DeepEqual(again, want) {
		t.Fatalf("redeclared: %#v", again)
	}
	if got := m.expect("GET", qpath(name), nil, "200"); !reflect.DeepEqual(got, want) {
		t.Fatalf("get: %#v", got)
	}
	q, err := tb.broker.Queue("/", name)
	if err != nil || !q.Quorum() || !q.Def().Durable {
		t.Fatalf("the model's queue: %v %v", q, err)
	}

	publish091(t, ch, name, 3, amqp091.Publishing{})
	if got := m.expect("GET", qpath(name), nil, "200").(map[string]any); got["message_count"] != uint64(3) {
		t.Fatalf("get after 3 publishes: %v", got)
	}
	if got := m.expect("DELETE", qpath(name)+"/messages", nil, "200"); !reflect.DeepEqual(got, map[string]any{"message_count": uint64(3)}) {
		t.Fatalf("purge: %#v", got)
	}
	publish091(t, ch, name, 2, amqp091.Publishing{})
	if got := m.expect("DELETE", qpath(name), nil, "200"); !reflect.DeepEqual(got, map[string]any{"message_count": uint64(2)}) {
		t.Fatalf("delete: %#v", got)
	}
	if got := m.expect("DELETE", qpath(name), nil, "200"); !reflect.DeepEqual(got, map[string]any{"message_count": uint64(0)}) {
		t.Fatalf("delete again: %#v", got)
	}
	m.expect("GET", qpath(name), nil, "404", "queue 'my 🐇/q' in vhost '/' not found")
	m.expect("DELETE", qpath(name)+"/messages", nil, "404", "no queue 'my 🐇/q' in vhost '/'")

	// A classic queue with the defaults (an empty body), then consumed
	// over AMQP 0-9-1.
	info = m.expect("PUT", qpath("plain"), map[string]any{}, "201")
	if got := info.(map[string]any); got["type"] != "classic" || got["durable"] != true {
		t.Fatalf("classic declare: %v", got)
	}
	publish091(t, ch, "plain", 1, amqp091.Publishing{})
	get(t, ch, "plain", 1)

	// A stream: its arguments, no purge.
	info = m.expect("PUT", qpath("s"), map[string]any{"arguments": map[string]any{"x-queue-type": "stream", "x-max-age": "1h"}}, "201")
	if got := info.(map[string]any); got["type"] != "stream" ||
		!reflect.DeepEqual(got["arguments"], map[string]any{"x-queue-type": "stream", "x-max-age": "1h"}) {
		t.Fatalf("stream declare: %v", got)
	}
	if _, ok := tb.broker.LookupStream("/", "s"); !ok {
		t.Fatal("no stream s in the model")
	}
	m.expect("DELETE", qpath("s")+"/messages", nil, "400", "purge not supported by queue 's' in vhost '/'")
	m.expect("DELETE", qpath("s"), nil, "200")
	if _, ok := tb.broker.LookupStream("/", "s"); ok {
		t.Fatal("stream s still there")
	}
}

// Ensure declares RabbitMQ refuses get its status codes and texts.
func TestManagementQueueErrors(t *testing.T) {
	tb := startBroker(t, Config{})
	_, m := tb.mgmt(t)

	m.expect("PUT", qpath("q"), map[string]any{"auto_delete": false}, "201")
	m.expect("PUT", qpath("q"), map[string]any{"auto_delete": true}, "409",
		"inequivalent arg 'auto_delete' for queue 'q' in vhost '/': received 'true' but current is 'false'")
	m.expect("PUT", qpath("q"), map[string]any{"arguments": map[string]any{"x-max-length": int64(5)}}, "409")
	m.expect("PUT", "/queues/", map[string]any{}, "400", "declare queue with empty name not allowed")
	m.expect("PUT", qpath("a\nb"), map[string]any{}, "400", "Bad name 'a\nb': line feed and carriage return characters not allowed")
	m.expect("PUT", qpath("amq.q"), map[string]any{}, "403", "queue 'amq.q' in vhost '/' starts with reserved prefix 'amq.'")
	m.expect("PUT", qpath("st"), map[string]any{"auto_delete": true, "arguments": map[string]any{"x-queue-type": "stream"}}, "400",
		"invalid property 'auto-delete' for queue 'st' in vhost '/'")
	m.expect("PUT", qpath("st"), map[string]any{"arguments": map[string]any{"x-queue-type": "stream", "x-dead-letter-exchange": "dlx"}}, "409",
		"invalid arg 'x-dead-letter-exchange' for queue 'st' in vhost '/' of queue type rabbit_stream_queue")
	m.expect("PUT", qpath("q"), map[string]any{"unknown": "bla"}, "400", `bad queue property {{utf8,<<"unknown">>},{utf8,<<"bla">>}}`)
	m.expect("GET", "👎", nil, "400", `failed to normalize URI '👎': invalid_uri "👎"`)
	m.expect("GET", "/queues/%zz", nil, "400")
	// Dot segments are removed and percent-encodings decoded, as
	// uri_string:normalize and cow_uri:urldecode do.
	m.expect("GET", "/queues/x/../%71", nil, "200")
	if _, err := tb.broker.Queue("/", "st"); err == nil {
		t.Fatal("a refused declare made a queue")
	}
	if _, ok := tb.broker.LookupStream("/", "st"); ok {
		t.Fatal("a refused declare made a stream")
	}
}

// Ensure an exclusive queue belongs to the declaring connection: others
// cannot bind, purge, delete or redeclare it (400, RabbitMQ's text), and
// it goes when the connection closes.
func TestManagementExclusiveQueue(t *testing.T) {
	tb := startBroker(t, Config{})
	c1, m1 := tb.mgmt(t)
	_, m2 := tb.mgmt(t)

	info := m1.expect("PUT", qpath("mine"), map[string]any{"exclusive": true}, "201").(map[string]any)
	if info["exclusive"] != true {
		t.Fatalf("declare: %v", info)
	}
	m1.expect("PUT", qpath("mine"), map[string]any{"exclusive": true}, "200")
	locked := "cannot obtain exclusive access to locked queue 'mine' in vhost '/'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration."
	m1.expect("PUT", qpath("mine"), map[string]any{"exclusive": false}, "400", locked)
	m2.expect("POST", "/bindings", map[string]any{"source": "amq.direct", "destination_queue": "mine", "binding_key": "k", "arguments": map[string]any{}}, "400", locked)
	m2.expect("DELETE", qpath("mine")+"/messages", nil, "400", locked)
	m2.expect("DELETE", qpath("mine"), nil, "400", locked)
	m2.expect("PUT", qpath("mine"), map[string]any{"exclusive": true}, "400", locked)
	m2.expect("GET", qpath("mine"), nil, "200")
	m1.expect("POST", "/bindings", map[string]any{"source": "amq.direct", "destination_queue": "mine", "binding_key": "k", "arguments": map[string]any{}}, "204")
	// Its connection consumes from it over AMQP 1.0; another cannot.
	s1, err := c1.NewSession(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.NewReceiver(ctxT(t), "/queues/mine", nil); err != nil {
		t.Fatalf("the owner's consumer: %v", err)
	}
	_, s2 := tb.dial(t, nil)
	var ae *goamqp.Error
	if _, err := s2.NewReceiver(ctxT(t), "/queues/mine", nil); !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondResourceLocked {
		t.Fatalf("another connection's consumer: %v, want resource-locked", err)
	}

	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	for {
		if _, err := tb.broker.Queue("/", "mine"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the exclusive queue outlived its connection")
		}
		time.Sleep(5 * time.Millisecond)
	}
	m2.expect("GET", qpath("mine"), nil, "404")
}

// Ensure exchanges and bindings over the management node: declare,
// equivalence, the default and amq.* exchanges, bindings to queues and
// exchanges that route AMQP 0-9-1 publishes, listing them with their
// location, and unbinding by that path.
func TestManagementExchangesAndBindings(t *testing.T) {
	tb := startBroker(t, Config{})
	_, m := tb.mgmt(t)
	ch := tb.channel(t)

	x := "my fanout 🥳"
	xprops := map[string]any{"type": "fanout", "auto_delete": false, "internal": false, "durable": true,
		"arguments": map[string]any{"x-note": "📮"}}
	if v := m.expect("PUT", xpath(x), xprops, "204"); v != nil {
		t.Fatalf("declare body %v", v)
	}
	m.expect("PUT", xpath(x), xprops, "204")
	def, err := tb.broker.Exchange("/", x)
	if err != nil || def.Type != "fanout" || !def.Durable || def.Args["x-note"] != "📮" {
		t.Fatalf("the model's exchange: %+v %v", def, err)
	}
	m.expect("PUT", xpath(x), map[string]any{"type": "direct"}, "409",
		"inequivalent arg 'type' for exchange 'my fanout 🥳' in vhost '/': received 'direct' but current is 'fanout'")
	m.expect("PUT", xpath(""), map[string]any{}, "403", "operation not permitted on the default exchange")
	m.expect("PUT", xpath("amq.mine"), map[string]any{}, "403", "exchange 'amq.mine' in vhost '/' starts with reserved prefix 'amq.'")
	m.expect("PUT", xpath("amq.direct"), map[string]any{"type": "direct"}, "204") // exists: equivalent
	m.expect("PUT", xpath("e1"), map[string]any{"type": "🤷"}, "400", "unknown exchange type '🤷'")
	m.expect("PUT", xpath("e1"), map[string]any{"unknown": "bla"}, "400", `bad exchange property {{utf8,<<"unknown">>},{utf8,<<"bla">>}}`)
	m.expect("PUT", xpath("defaults"), map[string]any{}, "204")
	if d, err := tb.broker.Exchange("/", "defaults"); err != nil || d.Type != "direct" || !d.Durable || d.AutoDelete || d.Internal {
		t.Fatalf("exchange defaults: %+v %v", d, err)
	}

	m.expect("PUT", qpath("q"), map[string]any{}, "201")
	bind := map[string]any{"source": "amq.direct", "destination_queue": "q", "binding_key": "k 1", "arguments": map[string]any{}}
	m.expect("POST", "/bindings", bind, "204")
	m.expect("POST", "/bindings", bind, "204") // idempotent
	list := m.expect("GET", "/bindings?src=amq.direct&dstq=q&key=k%201", nil, "200")
	wantList := []any{map[string]any{"source": "amq.direct", "destination_queue": "q", "binding_key": "k 1",
		"arguments": map[any]any{}, "location": "/bindings/src=amq.direct;dstq=q;key=k%201;args="}}
	if !reflect.DeepEqual(list, wantList) {
		t.Fatalf("bindings:\n%#v\nwant\n%#v", list, wantList)
	}
	if err := ch.Publish("amq.direct", "k 1", false, false, amqp091.Publishing{Body: []byte("routed")}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, tb, "q", 1)
	// The Go client's unbind path: encodePathSegments, "args=".
	m.expect("DELETE", "/bindings/src=amq.direct;dstq=q;key=k%201;args=", nil, "204")
	m.expect("DELETE", "/bindings/src=amq.direct;dstq=q;key=k%201;args=", nil, "204") // gone: still 204
	if list := m.expect("GET", "/bindings?src=amq.direct&dstq=q&key=k+1", nil, "200"); len(list.([]any)) != 0 {
		t.Fatalf("bindings after unbind: %#v", list)
	}
	if err := ch.Publish("amq.direct", "k 1", false, false, amqp091.Publishing{Body: []byte("dropped")}); err != nil {
		t.Fatal(err)
	}

	// An exchange-to-exchange binding with arguments: unbound by the
	// location GET /bindings gives.
	m.expect("POST", "/bindings", map[string]any{"source": "amq.direct", "destination_exchange": x, "binding_key": "k2",
		"arguments": map[string]any{"a": "b"}}, "204")
	m.expect("POST", "/bindings", map[string]any{"source": x, "destination_queue": "q", "binding_key": "", "arguments": map[string]any{}}, "204")
	if err := ch.Publish("amq.direct", "k2", false, false, amqp091.Publishing{Body: []byte("via e2e")}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, tb, "q", 2)
	list = m.expect("GET", "/bindings?src=amq.direct&dste="+escapeSegment(x)+"&key=k2", nil, "200")
	bs, _ := list.([]any)
	if len(bs) != 1 {
		t.Fatalf("exchange bindings: %#v", list)
	}
	b := bs[0].(map[string]any)
	loc, _ := b["location"].(string)
	if !reflect.DeepEqual(b["arguments"], map[string]any{"a": "b"}) || b["destination_exchange"] != x ||
		!strings.HasPrefix(loc, "/bindings/src=amq.direct;dste="+quoteUnreserved(x)+";key=k2;args=") || strings.HasSuffix(loc, "args=") {
		t.Fatalf("exchange binding: %#v", b)
	}
	m.expect("DELETE", loc[:strings.LastIndex(loc, "=")+1], nil, "204") // the wrong hash: nothing unbound
	if n := len(m.expect("GET", "/bindings?src=amq.direct&dste="+escapeSegment(x)+"&key=k2", nil, "200").([]any)); n != 1 {
		t.Fatalf("unbind with another args hash removed the binding (%d left)", n)
	}
	m.expect("DELETE", loc, nil, "204")
	if n := len(m.expect("GET", "/bindings?src=amq.direct&dste="+escapeSegment(x)+"&key=k2", nil, "200").([]any)); n != 0 {
		t.Fatalf("unbind by location left %d", n)
	}

	m.expect("GET", "/bindings?src=amq.direct&key=k2", nil, "400", `missing 'dste' or 'dstq' in query: #{<<"key">> => <<"k2">>,<<"src">> => <<"amq.direct">>}`)
	m.expect("DELETE", "/bindings/src=e1;dstq=q1;invalidkey=k1;args=", nil, "400", "bad binding path segment 'src=e1;dstq=q1;invalidkey=k1;args='")
	m.expect("POST", "/bindings", map[string]any{"source": "", "destination_queue": "q", "binding_key": "k", "arguments": map[string]any{}}, "403",
		"operation not permitted on the default exchange")
	m.expect("POST", "/bindings", map[string]any{"source": "amq.direct", "destination_queue": "nope", "binding_key": "k", "arguments": map[string]any{}}, "400",
		"no queue 'nope' in vhost '/'")

	m.expect("DELETE", xpath(x), nil, "204")
	m.expect("DELETE", xpath(x), nil, "204")
	if _, err := tb.broker.Exchange("/", x); err == nil {
		t.Fatal("exchange still there")
	}
	m.expect("DELETE", xpath("amq.fanout"), nil, "403", "exchange 'amq.fanout' in vhost '/' starts with reserved prefix 'amq.'")
	m.expect("DELETE", xpath(""), nil, "403", "operation not permitted on the default exchange")
	m.expect("DELETE", xpath("x\rx"), nil, "400", "Bad name 'x\rx': line feed and carriage return characters not allowed")
}

// Ensure a missing permission ends the session with
// amqp:unauthorized-access and the 0-9-1 text, as RabbitMQ's
// check_resource_access does, and that what is permitted works.
func TestManagementPermissions(t *testing.T) {
	tb := startBroker(t, Config{})
	if err := tb.broker.AddUser("limited", "pw"); err != nil {
		t.Fatal(err)
	}
	if err := tb.broker.SetPermissions("limited", "/", queues.Permissions{Configure: "^mine", Write: ".*", Read: "^(mine|amq\\.direct)$"}); err != nil {
		t.Fatal(err)
	}
	c, _ := tb.dial(t, &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("limited", "pw")})
	session := func() *mgmtClient {
		s, err := c.NewSession(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		return newMgmt(t, s)
	}
	m := session()
	m.expect("PUT", qpath("mine"), map[string]any{}, "201")
	m.expect("POST", "/bindings", map[string]any{"source": "amq.direct", "destination_queue": "mine", "binding_key": "k", "arguments": map[string]any{}}, "204")
	m.sessionEnded("PUT", qpath("theirs"), map[string]any{}, goamqp.ErrCondUnauthorizedAccess,
		"configure access to queue 'theirs' in vhost '/' refused for user 'limited'")
	if _, err := tb.broker.Queue("/", "theirs"); err == nil {
		t.Fatal("declared without configure permission")
	}

	guest, g := tb.mgmt(t)
	_ = guest
	g.expect("PUT", qpath("theirs"), map[string]any{}, "201")
	m = session()
	m.sessionEnded("DELETE", qpath("theirs")+"/messages", nil, goamqp.ErrCondUnauthorizedAccess,
		"read access to queue 'theirs' in vhost '/' refused for user 'limited'")
	m = session()
	m.sessionEnded("POST", "/bindings", map[string]any{"source": "amq.fanout", "destination_queue": "mine", "binding_key": "k", "arguments": map[string]any{}},
		goamqp.ErrCondUnauthorizedAccess, "read access to exchange 'amq.fanout' in vhost '/' refused for user 'limited'")
	m = session()
	m.sessionEnded("PUT", qpath("mine2"), map[string]any{"arguments": map[string]any{"x-dead-letter-exchange": "amq.fanout"}}, goamqp.ErrCondUnauthorizedAccess,
		"read access to queue 'mine2' in vhost '/' refused for user 'limited'")
	m = session()
	m.sessionEnded("PUT", xpath("mine-x"), map[string]any{"arguments": map[string]any{"alternate-exchange": "amq.direct"}}, goamqp.ErrCondUnauthorizedAccess,
		"read access to exchange 'mine-x' in vhost '/' refused for user 'limited'")
	m = session()
	m.expect("GET", qpath("theirs"), nil, "200") // write is "any" permission
	m.expect("DELETE", qpath("mine"), nil, "200")
}

// Ensure the link pair rules: the paired property, a settled sender,
// either attach order, 8 pipelined requests answered in order, and the
// session errors RabbitMQ ends with: a request on a half-open pair,
// without the receiver's credit, or with no operation.
func TestManagementLinkRules(t *testing.T) {
	tb := startBroker(t, Config{})
	c, s := tb.dial(t, nil)
	newSession := func() *goamqp.Session {
		s, err := c.NewSession(ctxT(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	linkRefused := func(err error, cond goamqp.ErrCond) {
		t.Helper()
		var ae *goamqp.Error
		if !errors.As(err, &ae) || ae.Condition != cond {
			t.Fatalf("attach: %v, want refused with %s", err, cond)
		}
	}
	o := mgmtSenderOptions("unpaired")
	o.Properties = nil
	_, err := s.NewSender(ctxT(t), mgmtAddress, o)
	linkRefused(err, goamqp.ErrCondInvalidField)
	ro := mgmtReceiverOptions("unpaired", 1)
	ro.Properties = map[string]any{"paired": false}
	_, err = s.NewReceiver(ctxT(t), mgmtAddress, ro)
	linkRefused(err, goamqp.ErrCondInvalidField)
	o = mgmtSenderOptions("unsettled")
	o.SettlementMode = goamqp.SenderSettleModeUnsettled.Ptr()
	_, err = s.NewSender(ctxT(t), mgmtAddress, o)
	linkRefused(err, goamqp.ErrCondInvalidField) // an ordinary sender: /management is no v2 address

	// The receiver first, then the sender; two pairs on one session.
	rcv, err := s.NewReceiver(ctxT(t), mgmtAddress, mgmtReceiverOptions("pair 1", 100))
	if err != nil {
		t.Fatal(err)
	}
	snd, err := s.NewSender(ctxT(t), mgmtAddress, mgmtSenderOptions("pair 1"))
	if err != nil {
		t.Fatal(err)
	}
	m1 := &mgmtClient{t: t, snd: snd, rcv: rcv}
	m2 := newMgmt(t, s)
	m1.expect("PUT", qpath("q"), map[string]any{}, "201")
	m2.expect("DELETE", qpath("q"), nil, "200")

	// Pipelining: 8 requests (the sender's credit) before any response.
	var ids []string
	for i := range 8 {
		ids = append(ids, m1.send("PUT", qpath(fmt.Sprintf("p%d", i)), map[string]any{}))
	}
	for i, id := range ids {
		resp := m1.receive(id)
		if *resp.Properties.Subject != "201" {
			t.Fatalf("pipelined %d: %s", i, *resp.Properties.Subject)
		}
	}
	if n := len(tb.broker.Queues("/")); n != 8 {
		t.Fatalf("%d queues, want 8", n)
	}
	// Detaching the pair leaves the session usable for another.
	if err := m1.snd.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := m1.rcv.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	m3 := newMgmtNamed(t, s, "pair 3")
	for i := range 8 {
		m3.expect("DELETE", qpath(fmt.Sprintf("p%d", i)), nil, "200")
	}

	// A request on a half-open pair.
	half := newSession()
	hsnd, err := half.NewSender(ctxT(t), mgmtAddress, mgmtSenderOptions("half"))
	if err != nil {
		t.Fatal(err)
	}
	(&mgmtClient{t: t, snd: hsnd}).sessionEnded("GET", qpath("q"), nil, goamqp.ErrCondPreconditionFailed,
		"received transfer on half open management link pair")

	// No credit on the receiver: the client drained it.
	nc := newSession()
	ncrcv, err := nc.NewReceiver(ctxT(t), mgmtAddress, mgmtReceiverOptions("nocredit", -1))
	if err != nil {
		t.Fatal(err)
	}
	ncsnd, err := nc.NewSender(ctxT(t), mgmtAddress, mgmtSenderOptions("nocredit"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ncrcv.IssueCredit(2); err != nil {
		t.Fatal(err)
	}
	if err := ncrcv.DrainCredit(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	(&mgmtClient{t: t, snd: ncsnd, rcv: ncrcv}).sessionEnded("DELETE", qpath("q"), nil, goamqp.ErrCondPreconditionFailed,
		"insufficient credit (0) for management link from RabbitMQ to client")

	// No operation: RabbitMQ's handle_http_req has no clause.
	newMgmt(t, newSession()).sessionEnded("PATCH", qpath("q"), nil, goamqp.ErrCondInternalError, "")
	newMgmt(t, newSession()).sessionEnded("GET", "/nodes", nil, goamqp.ErrCondInternalError, "")
	newMgmt(t, newSession()).sessionEnded("PUT", qpath("q"), "not a map", goamqp.ErrCondInternalError, "")
	// The connection and its other sessions carry on.
	m2.expect("GET", qpath("q"), nil, "404")
}

// Ensure a queue deleted over the management node while the same
// connection consumes from it over AMQP 1.0 answers 200 with its count
// and detaches the consumer with amqp:resource-deleted.
func TestManagementDeleteConsumedQueue(t *testing.T) {
	tb := startBroker(t, Config{})
	c, m := tb.mgmt(t)
	m.expect("PUT", qpath("busy"), map[string]any{}, "201")
	publish091(t, tb.channel(t), "busy", 2, amqp091.Publishing{})
	s, err := c.NewSession(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := s.NewReceiver(ctxT(t), "/queues/busy", &goamqp.ReceiverOptions{Credit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = rcv.Receive(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	if got := m.expect("GET", qpath("busy"), nil, "200").(map[string]any); got["consumer_count"] != uint32(1) {
		t.Fatalf("get with a consumer: %v", got)
	}
	m.expect("DELETE", qpath("busy"), nil, "200")
	var le *goamqp.LinkError
	for err == nil {
		_, err = rcv.Receive(ctxT(t), nil)
	}
	if !errors.As(err, &le) || le.RemoteErr == nil || le.RemoteErr.Condition != goamqp.ErrCondResourceDeleted {
		t.Fatalf("consumer after delete: %v, want detached with resource-deleted", err)
	}
}

// Ensure a declare takes the vhost's default queue type and is refused
// at its queue limit with RabbitMQ's 403 and text.
func TestManagementVHostDefaults(t *testing.T) {
	tb := startBroker(t, Config{})
	for _, v := range []queues.VHost{{Name: "qq", DefaultQueueType: "quorum"}, {Name: "lv", Limits: map[string]int64{"max-queues": 0}}} {
		if _, err := tb.broker.PutVHost(v); err != nil {
			t.Fatal(err)
		}
		if err := tb.broker.SetPermissions("guest", v.Name, queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
			t.Fatal(err)
		}
	}
	_, s := tb.dial(t, &goamqp.ConnOptions{HostName: "vhost:qq"})
	info := newMgmt(t, s).expect("PUT", qpath("q"), map[string]any{}, "201").(map[string]any)
	if info["type"] != "quorum" || info["vhost"] != "qq" {
		t.Fatalf("declare in a vhost whose default type is quorum: %v", info)
	}
	_, s = tb.dial(t, &goamqp.ConnOptions{HostName: "vhost:lv"})
	newMgmt(t, s).expect("PUT", qpath("q"), map[string]any{}, "403", "cannot declare queue 'q': queue limit in vhost 'lv' (0) is reached")
}
