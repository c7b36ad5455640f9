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
