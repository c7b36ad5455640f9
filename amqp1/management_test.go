package amqp1

import (
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/queues"
)

func bindingDef(src, dst, key string, args map[string]any) queues.BindingDef {
	return queues.BindingDef{Source: src, DestKind: queues.DestQueue, Dest: dst, Key: key, Args: args}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Ensure request targets split as RabbitMQ's parse_uri splits them
// (uri_string:normalize, then the path at "/" and the query dissected).
func TestParseMgmtURI(t *testing.T) {
	for _, tc := range []struct {
		uri    string
		segs   []string
		query  map[string]string
		status string // of the error, "" for none
	}{
		{uri: "/queues/q", segs: []string{"queues", "q"}},
		{uri: "/queues/my%20q%2Fx", segs: []string{"queues", "my%20q%2Fx"}},
		{uri: "/queues/q/messages", segs: []string{"queues", "q", "messages"}},
		{uri: "/queues/", segs: []string{"queues", ""}},
		{uri: "/queues/a/../b", segs: []string{"queues", "b"}},
		{uri: "/queues/./q", segs: []string{"queues", "q"}},
		{uri: "/queues/..", segs: []string{""}},
		{uri: "/bindings/src=e;dstq=q;key=k;args=", segs: []string{"bindings", "src=e;dstq=q;key=k;args="}},
		{uri: "/bindings?src=amq.direct&dstq=q%201&key=a+b", segs: []string{"bindings"},
			query: map[string]string{"src": "amq.direct", "dstq": "q 1", "key": "a b"}},
		{uri: "/bindings?src=x&src=y&flag", segs: []string{"bindings"}, query: map[string]string{"src": "y", "flag": "true"}},
		{uri: "/bindings?", segs: []string{"bindings"}, query: map[string]string{}},
		{uri: "//host/queues/q", segs: []string{"queues", "q"}},
		{uri: "/queues/q#frag", segs: []string{"queues", "q"}},
		{uri: "queues/q"}, // no leading "/": no operation
		{uri: ""},
		{uri: "👎", status: "400"},
		{uri: "/queues/a b", status: "400"},
		{uri: "/queues/%zz", status: "400"},
		{uri: "/queues/%4", status: "400"},
		{uri: "/bindings?key=%", status: "400"},
	} {
		segs, query, err := parseMgmtURI(tc.uri)
		var me *mgmtError
		switch {
		case tc.status != "":
			if !errors.As(err, &me) || me.status != tc.status {
				t.Errorf("%q: err %v, want status %s", tc.uri, err, tc.status)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.uri, err)
		case !reflect.DeepEqual(segs, tc.segs) || !reflect.DeepEqual(query, tc.query):
			t.Errorf("%q: got %q %v, want %q %v", tc.uri, segs, query, tc.segs, tc.query)
		}
	}
}

// Ensure the binding locations GET /bindings gives are what DELETE
// parses back, whatever the names.
func TestBindingLocationRoundTrip(t *testing.T) {
	for _, b := range []struct{ src, dst, key string }{
		{"amq.direct", "q", ""},
		{"my x 🥳", "a/b;c=d", "k 1 ~ %"},
	} {
		loc := bindingLocation(bindingDef(b.src, b.dst, b.key, map[string]any{"a": "b"}))
		segs, _, err := parseMgmtURI(loc)
		if err != nil || len(segs) != 2 || segs[0] != "bindings" {
			t.Fatalf("%s: %q %v", loc, segs, err)
		}
		m := bindingSegment.FindStringSubmatch(segs[1])
		if m == nil || unescape(m[1]) != b.src || m[2] != "q" || unescape(m[3]) != b.dst || unescape(m[4]) != b.key || m[5] == "" {
			t.Fatalf("%s: parsed %q", loc, m)
		}
	}
}

// Ensure a response is RabbitMQ's: subject the status, correlation-id
// the request's message-id, http:response 1.1, an amqp-value body; and a
// request that is not one ends the session.
func TestMgmtRequestEncoding(t *testing.T) {
	c := &conn{}
	req := amqp10.Message{
		Properties: &amqp10.Properties{Set: amqp10.PropMessageID | amqp10.PropTo | amqp10.PropSubject | amqp10.PropReplyTo,
			MessageID: uint64(7), To: "/queues/%zz", Subject: "GET", ReplyTo: "$me"},
		Body: amqp10.Body{Kind: amqp10.BodyValue},
	}
	b, err := req.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.log = discardLogger()
	out, e := c.mgmtRequest(b)
	if e != nil {
		t.Fatal(e)
	}
	var resp amqp10.Message
	if err := resp.UnmarshalBinary(out); err != nil {
		t.Fatal(err)
	}
	if p := resp.Properties; p == nil || p.Subject != "400" || p.CorrelationID != uint64(7) {
		t.Fatalf("properties %+v", resp.Properties)
	}
	if v, _ := resp.ApplicationProperties.String("http:response"); v != "1.1" {
		t.Fatalf("application properties %v", resp.ApplicationProperties)
	}
	if s, _ := resp.Body.Value.(string); resp.Body.Kind != amqp10.BodyValue || !strings.HasPrefix(s, "failed to normalize URI '/queues/%zz'") {
		t.Fatalf("body %+v", resp.Body)
	}

	req.Properties.ReplyTo = "elsewhere"
	b, _ = req.AppendTo(nil)
	if _, e := c.mgmtRequest(b); e == nil || e.cond != frame.CondInternalError {
		t.Fatalf("reply-to elsewhere: %v, want the session ended", e)
	}
}

// FuzzManagementPath checks that any request target parses without a
// panic, into segments without "/" (a "/" in a name stays encoded), and
// that dot segments are gone.
func FuzzManagementPath(f *testing.F) {
	for _, s := range []string{
		"/queues/q", "/queues/a%2Fb/messages", "/bindings?src=x&dstq=y&key=z", "/bindings/src=e;dstq=q;key=k;args=",
		"/queues/../..//./x", "//h", "/%", "👎", "/a?b=%zz", "/queues/q#f?x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		segs, _, err := parseMgmtURI(uri)
		if err != nil {
			var me *mgmtError
			if !errors.As(err, &me) || me.status != "400" {
				t.Fatalf("%q: %v", uri, err)
			}
			return
		}
		for _, s := range segs {
			if strings.Contains(s, "/") {
				t.Fatalf("%q: segment %q", uri, s)
			}
		}
		for _, s := range segs {
			if s == "." || s == ".." {
				t.Fatalf("%q: dot segment left in %q", uri, segs)
			}
		}
		if len(segs) == 2 && segs[0] == "bindings" {
			if m := bindingSegment.FindStringSubmatch(segs[1]); m != nil {
				_ = unescape(m[1]) + unescape(m[3]) + unescape(m[4])
			}
		}
	})
}

// Ensure, frame by frame, what go-amqp cannot show: the attach replies
// echo the paired property and grant the sender 8 credits, a request
// that overtakes the receiver's first flow is answered once it comes
// (pre-settled, on the receiver's handle), and a third half with the
// pair's name is refused with amqp:precondition-failed.
func TestManagementRawLinkPair(t *testing.T) {
	tb := startBroker(t, Config{})
	rc := tb.raw(t)
	rc.open(&frame.Open{ContainerID: "raw", MaxFrameSize: 65536})
	rc.send(&frame.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100, HandleMax: 10})
	if p, err := rc.next(); err != nil {
		t.Fatal(err)
	} else if _, ok := p.(*frame.Begin); !ok {
		t.Fatalf("got %#v, want begin", p)
	}
	paired := amqp10.Map{{Key: amqp10.Symbol("paired"), Value: true}}
	rc.send(&frame.Attach{Name: "p", Handle: 1, Role: frame.RoleReceiver, Source: &frame.Source{Address: mgmtAddress},
		Target: &frame.Target{Address: "client"}, Properties: paired})
	rc.send(&frame.Attach{Name: "p", Handle: 0, Role: frame.RoleSender, SndSettleMode: frame.SndSettled, Source: &frame.Source{Address: "client"},
		Target: &frame.Target{Address: mgmtAddress}, HasInitialDeliveryCount: true, Properties: paired})
	var attaches int
	var credit *frame.Flow
	for attaches < 2 || credit == nil {
		p, err := rc.next()
		if err != nil {
			t.Fatal(err)
		}
		switch p := p.(type) {
		case *frame.Attach:
			attaches++
			if v, _ := p.Properties.Symbol("paired"); v != true || p.SndSettleMode != frame.SndSettled {
				t.Fatalf("attach reply %+v", p)
			}
		case *frame.Flow:
			if p.HasHandle && p.Handle == 0 {
				credit = p
			}
		default:
			t.Fatalf("got %#v", p)
		}
	}
	if credit.LinkCredit != 8 {
		t.Fatalf("sender credit %d, want 8", credit.LinkCredit)
	}
	req := amqp10.Message{
		Properties: &amqp10.Properties{Set: amqp10.PropMessageID | amqp10.PropTo | amqp10.PropSubject | amqp10.PropReplyTo,
			MessageID: "m1", To: "/queues/rawq", Subject: "PUT", ReplyTo: "$me"},
		Body: amqp10.Body{Kind: amqp10.BodyValue, Value: amqp10.Map{}},
	}
	payload, err := req.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := frame.AppendTransferFrame(nil, 0, &frame.Transfer{Handle: 0, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{0}, Settled: true}, payload)
	if err != nil {
		t.Fatal(err)
	}
	rc.write(b)
	rc.send(&frame.Flow{HasNextIncomingID: true, IncomingWindow: 100, OutgoingWindow: 100, Handle: 1, HasHandle: true,
		HasDeliveryCount: true, LinkCredit: 5, HasLinkCredit: true})
	for {
		f, err := rc.r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f.Empty() {
			continue
		}
		p, body, err := frame.Decode(f.Type, f.Body)
		if err != nil {
			t.Fatal(err)
		}
		tr, ok := p.(*frame.Transfer)
		if !ok {
			continue // the session's flows
		}
		var resp amqp10.Message
		if err := resp.UnmarshalBinary(body); err != nil {
			t.Fatal(err)
		}
		if tr.Handle != 1 || !tr.Settled || resp.Properties == nil || resp.Properties.Subject != "201" || resp.Properties.CorrelationID != "m1" {
			t.Fatalf("response %+v %+v", tr, resp.Properties)
		}
		break
	}
	if _, err := tb.broker.Queue("/", "rawq"); err != nil {
		t.Fatal(err)
	}

	rc.send(&frame.Attach{Name: "p", Handle: 2, Role: frame.RoleSender, SndSettleMode: frame.SndSettled, Source: &frame.Source{Address: "client"},
		Target: &frame.Target{Address: mgmtAddress}, HasInitialDeliveryCount: true, Properties: paired})
	for {
		p, err := rc.next()
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := p.(*frame.Detach); ok {
			if d.Handle != 2 || d.Error == nil || d.Error.Condition != frame.CondPreconditionFailed {
				t.Fatalf("detach %+v", d)
			}
			break
		}
	}
}
