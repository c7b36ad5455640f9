package queues

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

func newTopoBroker(t testing.TB, dir string) *Broker {
	t.Helper()
	b, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// wantErr checks that err is an *Error with code and text.
func wantErr(t testing.TB, err error, code int, text string) {
	t.Helper()
	e := AsError(err)
	if e == nil {
		t.Fatalf("got error %v, want %d %q", err, code, text)
	}
	if e.Code != code || e.Text != text {
		t.Fatalf("got %d %q\nwant %d %q", e.Code, e.Text, code, text)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func declare(t testing.TB, b *Broker, name, typ string, durable bool, args map[string]any) {
	t.Helper()
	must(t, b.DeclareExchange(ExchangeDef{VHost: "/", Name: name, Type: typ, Durable: durable, Args: args}))
}

func bindQ(t testing.TB, b *Broker, x, q, key string, args map[string]any) {
	t.Helper()
	must(t, b.Bind(BindingDef{VHost: "/", Source: x, DestKind: DestQueue, Dest: q, Key: key, Args: args}))
}

func bindX(t testing.TB, b *Broker, src, dst, key string) {
	t.Helper()
	must(t, b.Bind(BindingDef{VHost: "/", Source: src, DestKind: DestExchange, Dest: dst, Key: key}))
}

// routed returns the sorted queues a message reaches.
func routed(t testing.TB, b *Broker, x string, headers map[string]any, keys ...string) []string {
	t.Helper()
	qs, err := b.Route("/", x, keys, headers, nil)
	if err != nil {
		t.Fatalf("Route(%q, %q): %v", x, keys, err)
	}
	out := slices.Clone(qs)
	slices.Sort(out)
	if len(slices.Compact(slices.Clone(out))) != len(out) {
		t.Fatalf("Route(%q, %q) = %q: duplicates", x, keys, qs)
	}
	return out
}

func wantRoute(t testing.TB, b *Broker, x string, headers map[string]any, keys []string, want ...string) {
	t.Helper()
	if got := routed(t, b, x, headers, keys...); !slices.Equal(got, want) {
		t.Fatalf("Route(%q, %q, %v) = %q, want %q", x, keys, headers, got, want)
	}
}

func exchangeNames(b *Broker, vhost string) []string {
	var out []string
	for _, x := range b.Exchanges(vhost) {
		out = append(out, x.Name)
	}
	return out
}

// Ensure every vhost has RabbitMQ's predeclared exchanges, durable, with
// the trace exchange internal, including a vhost added after Open.
func TestPredeclaredExchanges(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	want := []ExchangeDef{
		{VHost: "/", Name: "", Type: "direct", Durable: true},
		{VHost: "/", Name: "amq.direct", Type: "direct", Durable: true},
		{VHost: "/", Name: "amq.fanout", Type: "fanout", Durable: true},
		{VHost: "/", Name: "amq.headers", Type: "headers", Durable: true},
		{VHost: "/", Name: "amq.match", Type: "headers", Durable: true},
		{VHost: "/", Name: "amq.rabbitmq.trace", Type: "topic", Durable: true, Internal: true},
		{VHost: "/", Name: "amq.topic", Type: "topic", Durable: true},
	}
	got := b.Exchanges("/")
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Type != want[i].Type || got[i].Durable != want[i].Durable ||
			got[i].Internal != want[i].Internal || got[i].AutoDelete || got[i].VHost != "/" {
			t.Fatalf("exchange %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	must(t, b.AddVHost("v2"))
	if got := exchangeNames(b, "v2"); len(got) != len(want) {
		t.Fatalf("v2 exchanges: %q", got)
	}
	if b.Exchanges("nope") != nil {
		t.Fatal("exchanges of a missing vhost")
	}
	if _, err := b.Route("nope", "amq.direct", []string{"k"}, nil, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Route in a missing vhost: %v", err)
	}
	if err := b.DeclareExchange(ExchangeDef{VHost: "nope", Name: "x", Type: "direct"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("declare in a missing vhost: %v", err)
	}
}

// Ensure exchange.declare refuses and checks what RabbitMQ does, with its
// reply texts.
func TestDeclareExchange(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	ex := func(name, typ string) ExchangeDef {
		return ExchangeDef{VHost: "/", Name: name, Type: typ, Durable: true}
	}
	wantErr(t, b.DeclareExchange(ex("x", "foo")), CodePreconditionFailed, "PRECONDITION_FAILED - unknown exchange type 'foo'")
	wantErr(t, b.DeclareExchange(ex("", "direct")), CodeAccessRefused, "ACCESS_REFUSED - operation not permitted on the default exchange")
	wantErr(t, b.DeclareExchange(ex("amq.x", "direct")), CodeAccessRefused, "ACCESS_REFUSED - exchange name 'amq.x' contains reserved prefix 'amq.*'")
	must(t, b.DeclareExchange(ex("amq.direct", "direct")))
	wantErr(t, b.DeclareExchange(ex("amq.direct", "fanout")), CodePreconditionFailed,
		"PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'amq.direct' in vhost '/': received 'fanout' but current is 'direct'")

	x := ExchangeDef{VHost: "/", Name: "x", Type: "direct", Durable: true, Args: map[string]any{"alternate-exchange": "ae1", "other": int32(1)}}
	must(t, b.DeclareExchange(x))
	must(t, b.DeclareExchange(x))
	same := x
	same.Args = map[string]any{"alternate-exchange": "ae1", "other": "ignored"}
	must(t, b.DeclareExchange(same))

	for _, c := range []struct {
		change func(*ExchangeDef)
		text   string
	}{
		{func(d *ExchangeDef) { d.Type = "fanout" },
			"PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'"},
		{func(d *ExchangeDef) { d.Durable = false },
			"PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'x' in vhost '/': received 'false' but current is 'true'"},
		{func(d *ExchangeDef) { d.AutoDelete = true },
			"PRECONDITION_FAILED - inequivalent arg 'auto_delete' for exchange 'x' in vhost '/': received 'true' but current is 'false'"},
		{func(d *ExchangeDef) { d.Internal = true },
			"PRECONDITION_FAILED - inequivalent arg 'internal' for exchange 'x' in vhost '/': received 'true' but current is 'false'"},
		{func(d *ExchangeDef) { d.Args = map[string]any{"alternate-exchange": "ae2"} },
			"PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange 'x' in vhost '/': received 'ae2' but current is 'ae1'"},
		{func(d *ExchangeDef) { d.Args = nil },
			"PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange 'x' in vhost '/': received none but current is the value 'ae1' of type 'longstr'"},
		{func(d *ExchangeDef) { d.Args = map[string]any{"alternate-exchange": int32(1)} },
			"PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange 'x' in vhost '/': received '1' but current is 'ae1'"},
		{func(d *ExchangeDef) { d.Type = "fanout"; d.Durable = false },
			"PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x' in vhost '/': received 'fanout' but current is 'direct'"},
	} {
		d := x
		c.change(&d)
		wantErr(t, b.DeclareExchange(d), CodePreconditionFailed, c.text)
	}
	// The same bytes as binary and longstr are one Erlang term: equivalent,
	// as rabbit_misc:assert_field_equivalence finds.
	equal := x
	equal.Args = map[string]any{"alternate-exchange": []byte("ae1")}
	must(t, b.DeclareExchange(equal))
	// An exchange declared without the argument.
	declare(t, b, "plain", "fanout", false, nil)
	wantErr(t, b.DeclareExchange(ExchangeDef{VHost: "/", Name: "plain", Type: "fanout", Args: map[string]any{"alternate-exchange": "ae"}}),
		CodePreconditionFailed, "PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange 'plain' in vhost '/': received the value 'ae' of type 'longstr' but current is none")
	must(t, b.DeclareExchange(ExchangeDef{VHost: "/", Name: "plain", Type: "fanout", Args: map[string]any{"other": "x"}}))

	wantErr(t, b.DeclareExchange(ExchangeDef{VHost: "/", Name: "badae", Type: "direct", Args: map[string]any{"alternate-exchange": int32(3)}}),
		CodePreconditionFailed, "PRECONDITION_FAILED - invalid type 'signedint' for arg 'alternate-exchange' in exchange 'badae' in vhost '/'")

	got, err := b.Exchange("/", "x")
	must(t, err)
	if got.Name != "x" || got.Type != "direct" || !got.Durable || got.Args["alternate-exchange"] != "ae1" {
		t.Fatalf("Exchange = %+v", got)
	}
	got.Args["alternate-exchange"] = "mutated"
	if again, _ := b.Exchange("/", "x"); again.Args["alternate-exchange"] != "ae1" {
		t.Fatal("Exchange returned the stored argument table")
	}
	_, err = b.Exchange("/", "nope")
	wantErr(t, err, CodeNotFound, "NOT_FOUND - no exchange 'nope' in vhost '/'")
	_, err = b.Exchange("/", "")
	wantErr(t, err, CodeAccessRefused, "ACCESS_REFUSED - operation not permitted on the default exchange")
}

// Ensure exchange.delete: missing is fine, system exchanges are refused,
// if-unused looks at bindings from the exchange only, and bindings from
// and to the exchange go with it.
func TestDeleteExchange(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	b.topoQueueAdded("/", "q", false)
	must(t, b.DeleteExchange("/", "missing", true))
	wantErr(t, b.DeleteExchange("/", "amq.direct", false), CodeAccessRefused,
		"ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed")
	wantErr(t, b.DeleteExchange("/", "amq.nope", false), CodeAccessRefused,
		"ACCESS_REFUSED - deletion of system exchange 'amq.nope' in vhost '/' not allowed")
	wantErr(t, b.DeleteExchange("/", "", false), CodeAccessRefused, "ACCESS_REFUSED - operation not permitted on the default exchange")

	declare(t, b, "src", "direct", false, nil)
	declare(t, b, "mid", "fanout", false, nil)
	bindX(t, b, "src", "mid", "k")
	bindQ(t, b, "mid", "q", "", nil)
	wantErr(t, b.DeleteExchange("/", "src", true), CodePreconditionFailed, "PRECONDITION_FAILED - exchange 'src' in vhost '/' in use")
	wantErr(t, b.DeleteExchange("/", "mid", true), CodePreconditionFailed, "PRECONDITION_FAILED - exchange 'mid' in vhost '/' in use")
	wantRoute(t, b, "src", nil, []string{"k"}, "q")
	must(t, b.DeleteExchange("/", "mid", false))
	if n := len(b.Bindings("/")); n != 0 {
		t.Fatalf("%d bindings left: %+v", n, b.Bindings("/"))
	}
	wantRoute(t, b, "src", nil, []string{"k"})
	must(t, b.DeleteExchange("/", "src", true)) // no longer a source
	if _, err := b.Exchange("/", "src"); AsError(err) == nil || AsError(err).Code != CodeNotFound {
		t.Fatalf("src still there: %v", err)
	}
	_, err := b.Route("/", "mid", []string{"k"}, nil, nil)
	wantErr(t, err, CodeNotFound, "NOT_FOUND - no exchange 'mid' in vhost '/'")
}

// Ensure queue.bind and exchange.bind check as RabbitMQ does (source
// first), are idempotent, and validate per exchange type; unbinding what
// does not exist is fine.
func TestBind(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	b.topoQueueAdded("/", "q", false)
	declare(t, b, "d", "direct", false, nil)
	bq := func(src, q, key string, args map[string]any) BindingDef {
		return BindingDef{VHost: "/", Source: src, DestKind: DestQueue, Dest: q, Key: key, Args: args}
	}
	bx := func(src, dst string) BindingDef {
		return BindingDef{VHost: "/", Source: src, DestKind: DestExchange, Dest: dst}
	}
	wantErr(t, b.Bind(bq("nox", "noq", "k", nil)), CodeNotFound, "NOT_FOUND - no exchange 'nox' in vhost '/'")
	wantErr(t, b.Bind(bq("d", "noq", "k", nil)), CodeNotFound, "NOT_FOUND - no queue 'noq' in vhost '/'")
	wantErr(t, b.Bind(bx("d", "nox")), CodeNotFound, "NOT_FOUND - no exchange 'nox' in vhost '/'")
	wantErr(t, b.Bind(bx("nox", "d")), CodeNotFound, "NOT_FOUND - no exchange 'nox' in vhost '/'")
	deflt := "ACCESS_REFUSED - operation not permitted on the default exchange"
	wantErr(t, b.Bind(bq("", "q", "q", nil)), CodeAccessRefused, deflt)
	wantErr(t, b.Bind(bx("d", "")), CodeAccessRefused, deflt)
	wantErr(t, b.Bind(bx("", "d")), CodeAccessRefused, deflt)
	wantErr(t, b.Unbind(bq("", "q", "q", nil)), CodeAccessRefused, deflt)

	args := map[string]any{"a": int32(1)}
	must(t, b.Bind(bq("d", "q", "k", args)))
	must(t, b.Bind(bq("d", "q", "k", map[string]any{"a": int32(1)})))
	must(t, b.Bind(bq("d", "q", "k", map[string]any{"a": int64(1)}))) // another type: another binding
	must(t, b.Bind(bq("d", "q", "k", nil)))
	must(t, b.Bind(bx("d", "d"))) // to itself
	if got := b.Bindings("/"); len(got) != 4 {
		t.Fatalf("bindings: %+v", got)
	}
	wantRoute(t, b, "d", nil, []string{"k"}, "q")

	declare(t, b, "t", "topic", false, nil)
	must(t, b.Bind(bq("t", "q", "#.b.#", nil)))
	wantErr(t, b.Bind(bq("t", "q", "#.#.#", nil)), CodePreconditionFailed,
		"PRECONDITION_FAILED - Topic binding key '#.#.#' uses 3 '#' wildcards, at most 2 are allowed")
	must(t, b.Bind(bq("d", "q", "#.#.#", nil))) // only topic exchanges count
	declare(t, b, "h", "headers", false, nil)
	wantErr(t, b.Bind(bq("h", "q", "", map[string]any{"x-match": "some"})), CodePreconditionFailed,
		`PRECONDITION_FAILED - Invalid x-match field value <<"some">>; expected all, any, all-with-x, or any-with-x`)
	must(t, b.Bind(bq("h", "q", "", map[string]any{"x-match": "any-with-x"})))
	must(t, b.Bind(bq("d", "q", "", map[string]any{"x-match": "some"}))) // only headers exchanges check

	// Unbind: missing binding, source or destination are fine.
	must(t, b.Unbind(bq("nox", "q", "k", nil)))
	must(t, b.Unbind(bq("d", "noq", "k", nil)))
	must(t, b.Unbind(bx("d", "nox")))
	must(t, b.Unbind(bq("d", "q", "other", nil)))
	must(t, b.Unbind(bq("d", "q", "k", map[string]any{"a": int16(1)})))
	n := len(b.Bindings("/"))
	must(t, b.Unbind(bq("d", "q", "k", map[string]any{"a": int32(1)})))
	if got := len(b.Bindings("/")); got != n-1 {
		t.Fatalf("%d bindings after unbind, want %d", got, n-1)
	}
	must(t, b.Unbind(bq("d", "q", "k", nil)))
	must(t, b.Unbind(bq("d", "q", "k", map[string]any{"a": int64(1)})))
	must(t, b.Unbind(bq("d", "q", "#.#.#", nil)))
	must(t, b.Unbind(bq("d", "q", "", map[string]any{"x-match": "some"})))
	wantRoute(t, b, "d", nil, []string{"k"})

	// Bindings are sorted.
	got := b.Bindings("/")
	if !slices.IsSortedFunc(got, func(a, b BindingDef) int {
		if a.Source != b.Source {
			return cmpStr(a.Source, b.Source)
		}
		return cmpStr(a.Dest, b.Dest)
	}) {
		t.Fatalf("unsorted: %+v", got)
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Ensure an auto-delete exchange goes when its last binding as a source
// goes, by unbind, queue deletion or exchange deletion, transitively, and
// not before.
func TestAutoDeleteExchange(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	b.topoQueueAdded("/", "q1", false)
	b.topoQueueAdded("/", "q2", false)
	ad := func(name string) {
		must(t, b.DeclareExchange(ExchangeDef{VHost: "/", Name: name, Type: "fanout", AutoDelete: true}))
	}
	exists := func(name string) bool {
		_, err := b.Exchange("/", name)
		return err == nil
	}
	ad("never")
	ad("a")
	bindQ(t, b, "a", "q1", "", nil)
	bindQ(t, b, "a", "q2", "", nil)
	must(t, b.Unbind(BindingDef{VHost: "/", Source: "a", DestKind: DestQueue, Dest: "q1"}))
	if !exists("a") {
		t.Fatal("a deleted with a binding left")
	}
	b.topoQueueRemoved("/", "q2")
	if exists("a") {
		t.Fatal("a not deleted with its last binding's queue")
	}
	if !exists("never") {
		t.Fatal("an auto-delete exchange never bound was deleted")
	}

	// up (auto-delete) → mid (auto-delete) → leaf; deleting leaf takes mid,
	// which takes up.
	ad("up")
	ad("mid")
	declare(t, b, "leaf", "fanout", false, nil)
	bindX(t, b, "up", "mid", "")
	bindX(t, b, "mid", "leaf", "")
	must(t, b.DeleteExchange("/", "leaf", false))
	if exists("mid") || exists("up") {
		t.Fatalf("cascade: mid %v up %v", exists("mid"), exists("up"))
	}

	// An exchange bound to itself goes with its last other binding.
	ad("self")
	bindX(t, b, "self", "self", "")
	b.topoQueueAdded("/", "q3", false)
	bindQ(t, b, "self", "q3", "", nil)
	b.topoQueueRemoved("/", "q3")
	if !exists("self") {
		t.Fatal("self deleted while bound to itself")
	}
	must(t, b.Unbind(BindingDef{VHost: "/", Source: "self", DestKind: DestExchange, Dest: "self"}))
	if exists("self") {
		t.Fatal("self not deleted")
	}
}

// Ensure the default exchange routes to the queue named by each key, the
// queue existing, each once.
func TestRouteDefaultExchange(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	b.topoQueueAdded("/", "q1", true)
	b.topoQueueAdded("/", "q2", false)
	wantRoute(t, b, "", nil, []string{"q1"}, "q1")
	wantRoute(t, b, "", nil, []string{"nope"})
	wantRoute(t, b, "", nil, []string{"q1", "q2", "q1", "nope"}, "q1", "q2")
	wantRoute(t, b, "", nil, nil)
	b.topoQueueRemoved("/", "q1")
	wantRoute(t, b, "", nil, []string{"q1"})
	// dst keeps what it held.
	qs, err := b.Route("/", "", []string{"q2"}, nil, []string{"q2"})
	must(t, err)
	if !slices.Equal(qs, []string{"q2", "q2"}) {
		t.Fatalf("got %q", qs)
	}
}

// Ensure each exchange type routes as RabbitMQ's does, CC/BCC keys
// included.
func TestRouteTypes(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	for _, q := range []string{"q1", "q2", "q3"} {
		b.topoQueueAdded("/", q, false)
	}
	bindQ(t, b, "amq.direct", "q1", "a", nil)
	bindQ(t, b, "amq.direct", "q2", "b", nil)
	bindQ(t, b, "amq.direct", "q3", "a", nil)
	wantRoute(t, b, "amq.direct", nil, []string{"a"}, "q1", "q3")
	wantRoute(t, b, "amq.direct", nil, []string{"a", "b"}, "q1", "q2", "q3")
	wantRoute(t, b, "amq.direct", nil, []string{"c"})
	wantRoute(t, b, "amq.direct", nil, nil)

	bindQ(t, b, "amq.fanout", "q1", "ignored", nil)
	bindQ(t, b, "amq.fanout", "q2", "", nil)
	wantRoute(t, b, "amq.fanout", nil, []string{"x"}, "q1", "q2")
	wantRoute(t, b, "amq.fanout", nil, nil, "q1", "q2")

	bindQ(t, b, "amq.topic", "q1", "stock.#", nil)
	bindQ(t, b, "amq.topic", "q2", "*.nyse", nil)
	bindQ(t, b, "amq.topic", "q3", "", nil)
	wantRoute(t, b, "amq.topic", nil, []string{"stock.nyse"}, "q1", "q2")
	wantRoute(t, b, "amq.topic", nil, []string{"bond.nyse"}, "q2")
	wantRoute(t, b, "amq.topic", nil, []string{""}, "q3")
	wantRoute(t, b, "amq.topic", nil, []string{"x", "stock"}, "q1")

	bindQ(t, b, "amq.headers", "q1", "", map[string]any{"x-match": "any", "a": "1", "b": "2"})
	bindQ(t, b, "amq.headers", "q2", "", map[string]any{"a": "1", "b": "2"})
	bindQ(t, b, "amq.match", "q3", "", nil)
	wantRoute(t, b, "amq.headers", map[string]any{"a": "1"}, []string{"k"}, "q1")
	wantRoute(t, b, "amq.headers", map[string]any{"a": "1", "b": "2"}, nil, "q1", "q2")
	wantRoute(t, b, "amq.headers", nil, nil)
	wantRoute(t, b, "amq.match", nil, nil, "q3")
}

// Ensure exchange-to-exchange bindings route with the message's keys and
// headers, a cycle A→B→A visits each exchange once, and each queue comes
// once.
func TestRouteExchangeToExchange(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	for _, q := range []string{"qa", "qb", "qc"} {
		b.topoQueueAdded("/", q, false)
	}
	declare(t, b, "A", "fanout", false, nil)
	declare(t, b, "B", "fanout", false, nil)
	bindX(t, b, "A", "B", "")
	bindX(t, b, "B", "A", "")
	bindQ(t, b, "A", "qa", "", nil)
	bindQ(t, b, "B", "qb", "", nil)
	bindQ(t, b, "B", "qa", "", nil)
	wantRoute(t, b, "A", nil, []string{"k"}, "qa", "qb")
	wantRoute(t, b, "B", nil, []string{"k"}, "qa", "qb")

	// Keys and headers carry through.
	declare(t, b, "T", "topic", false, nil)
	declare(t, b, "H", "headers", false, nil)
	bindX(t, b, "amq.direct", "T", "a.b")
	bindX(t, b, "T", "H", "a.*")
	bindQ(t, b, "H", "qc", "", map[string]any{"h": int32(1)})
	wantRoute(t, b, "amq.direct", map[string]any{"h": int64(1)}, []string{"a.b"}, "qc")
	wantRoute(t, b, "amq.direct", map[string]any{"h": int64(2)}, []string{"a.b"})
	wantRoute(t, b, "amq.direct", map[string]any{"h": int64(1)}, []string{"a.c"})

	// Through an internal exchange.
	must(t, b.DeclareExchange(ExchangeDef{VHost: "/", Name: "I", Type: "direct", Internal: true}))
	bindX(t, b, "amq.fanout", "I", "")
	bindQ(t, b, "I", "qc", "k", nil)
	wantRoute(t, b, "amq.fanout", nil, []string{"k"}, "qc")
	_, err := b.Route("/", "I", []string{"k"}, nil, nil)
	wantErr(t, err, CodeAccessRefused, "ACCESS_REFUSED - cannot publish to internal exchange 'I' in vhost '/'")
	_, err = b.Route("/", "amq.rabbitmq.trace", []string{"k"}, nil, nil)
	wantErr(t, err, CodeAccessRefused, "ACCESS_REFUSED - cannot publish to internal exchange 'amq.rabbitmq.trace' in vhost '/'")
	_, err = b.Route("/", "nope", []string{"k"}, nil, nil)
	wantErr(t, err, CodeNotFound, "NOT_FOUND - no exchange 'nope' in vhost '/'")
}

// Ensure alternate exchanges are tried when an exchange matches no
// binding, along a chain, and that a loop ends.
func TestRouteAlternateExchange(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	b.topoQueueAdded("/", "main", false)
	b.topoQueueAdded("/", "unrouted", false)
	declare(t, b, "x", "direct", false, map[string]any{"alternate-exchange": "ae1"})
	declare(t, b, "ae1", "direct", false, map[string]any{"alternate-exchange": "ae2"})
	declare(t, b, "ae2", "fanout", false, nil)
	bindQ(t, b, "x", "main", "k", nil)
	bindQ(t, b, "ae2", "unrouted", "", nil)
	wantRoute(t, b, "x", nil, []string{"k"}, "main")
	wantRoute(t, b, "x", nil, []string{"other"}, "unrouted")
	wantRoute(t, b, "x", nil, []string{"k", "other"}, "main")

	// A match to an exchange counts as a match even if it routes nowhere.
	declare(t, b, "empty", "fanout", false, nil)
	bindX(t, b, "x", "empty", "e")
	wantRoute(t, b, "x", nil, []string{"e"})

	// A loop: l1 ⇄ l2, both matching nothing.
	declare(t, b, "l1", "direct", false, map[string]any{"alternate-exchange": "l2"})
	declare(t, b, "l2", "direct", false, map[string]any{"alternate-exchange": "l1"})
	wantRoute(t, b, "l1", nil, []string{"k"})
	bindQ(t, b, "l2", "main", "k", nil)
	wantRoute(t, b, "l1", nil, []string{"k"}, "main")

	// A missing alternate exchange, and the default exchange as one: it
	// routes nothing when not published to (RabbitMQ routes it as a
	// direct exchange without bindings).
	declare(t, b, "m", "direct", false, map[string]any{"alternate-exchange": "missing"})
	wantRoute(t, b, "m", nil, []string{"main"})
	declare(t, b, "d", "direct", false, map[string]any{"alternate-exchange": ""})
	wantRoute(t, b, "d", nil, []string{"main"})
}

// Ensure only queues that exist are routed to: a removed queue's
// bindings go with it.
func TestRouteQueueRemoved(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	b.topoQueueAdded("/", "q", false)
	bindQ(t, b, "amq.fanout", "q", "", nil)
	bindQ(t, b, "amq.topic", "q", "#", nil)
	wantRoute(t, b, "amq.fanout", nil, nil, "q")
	b.topoQueueRemoved("/", "q")
	b.topoQueueRemoved("/", "q")
	wantRoute(t, b, "amq.fanout", nil, nil)
	wantRoute(t, b, "amq.topic", nil, []string{"a"})
	if n := len(b.Bindings("/")); n != 0 {
		t.Fatalf("%d bindings left", n)
	}
	b.topoQueueAdded("/", "q", false)
	wantRoute(t, b, "amq.fanout", nil, nil)
	wantRoute(t, b, "", nil, []string{"q"}, "q")
}

// Ensure durable exchanges and bindings between durable ends survive a
// restart with their typed arguments, transient ones do not, and bindings
// to queues that are not recovered are dropped at the end of recovery.
func TestTopologyPersistence(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	for _, q := range []struct {
		name    string
		durable bool
	}{{"dq", true}, {"tq", false}, {"gone", true}} {
		_, _, _, err := b.DeclareQueue(DeclareOptions{Def: QueueDef{VHost: "/", Name: q.name, Durable: q.durable}})
		must(t, err)
	}
	declare(t, b, "dx", "headers", true, map[string]any{"alternate-exchange": "ae", "n": int16(3)})
	declare(t, b, "ae", "fanout", true, nil)
	declare(t, b, "tx", "direct", false, nil)
	must(t, b.DeclareExchange(ExchangeDef{VHost: "/", Name: "ad", Type: "topic", Durable: true, AutoDelete: true, Internal: true}))
	hargs := map[string]any{"x-match": "any", "i": int32(7), "s": "v", "void": nil, "t": map[string]any{"k": uint8(1)}}
	bindQ(t, b, "dx", "dq", "", hargs)          // durable
	bindQ(t, b, "dx", "tq", "", hargs)          // to a transient queue
	bindQ(t, b, "tx", "dq", "k", nil)           // from a transient exchange
	bindQ(t, b, "ad", "dq", "a.#", nil)         // durable
	bindQ(t, b, "amq.direct", "gone", "g", nil) // durable, to a queue not recovered
	bindX(t, b, "amq.topic", "ad", "x.*")       // durable e2e
	bindX(t, b, "amq.topic", "tx", "y")         // to a transient exchange
	bindX(t, b, "dx", "ae", "")                 // durable e2e
	before := b.Bindings("/")
	// As if the queue's record were lost: recovery does not bring it back.
	must(t, b.cat.delete(queueKey("/", "gone")))
	must(t, b.Close())

	b = openBroker(t, dir) // recovers dq only
	if got, want := exchangeNames(b, "/"), []string{"", "ad", "ae", "amq.direct", "amq.fanout", "amq.headers",
		"amq.match", "amq.rabbitmq.trace", "amq.topic", "dx"}; !slices.Equal(got, want) {
		t.Fatalf("exchanges after restart: %q, want %q", got, want)
	}
	dx, err := b.Exchange("/", "dx")
	must(t, err)
	if dx.Type != "headers" || !dx.Durable || dx.Args["alternate-exchange"] != "ae" || dx.Args["n"] != int16(3) {
		t.Fatalf("dx after restart: %+v", dx)
	}
	ad, err := b.Exchange("/", "ad")
	must(t, err)
	if !ad.AutoDelete || !ad.Internal || ad.Type != "topic" {
		t.Fatalf("ad after restart: %+v", ad)
	}
	var want []BindingDef
	for _, bd := range before {
		if bd.Source == "tx" || bd.Dest == "tx" || bd.Dest == "tq" || bd.Dest == "gone" {
			continue
		}
		want = append(want, bd)
	}
	got := b.Bindings("/")
	if len(got) != len(want) {
		t.Fatalf("bindings after restart:\n%+v\nwant\n%+v", got, want)
	}
	for i := range got {
		if got[i].Source != want[i].Source || got[i].Dest != want[i].Dest || got[i].DestKind != want[i].DestKind ||
			got[i].Key != want[i].Key || got[i].Ident() != want[i].Ident() {
			t.Fatalf("binding %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	// The typed headers arguments still match as before.
	wantRoute(t, b, "dx", map[string]any{"i": int64(7)}, nil, "dq")
	wantRoute(t, b, "dx", map[string]any{"t": map[string]any{"k": uint8(1)}}, nil, "dq")
	wantRoute(t, b, "dx", map[string]any{"t": map[string]any{"k": int8(1)}}, nil) // → ae, which routes nowhere
	wantRoute(t, b, "amq.topic", nil, []string{"x.y"})                            // ad is internal: through it
	must(t, b.Unbind(BindingDef{VHost: "/", Source: "dx", DestKind: DestQueue, Dest: "dq", Args: hargs}))
	must(t, b.Close())

	// Unbinding persisted; the binding to "gone" was dropped; a new queue
	// of that name starts unbound.
	b = openBroker(t, dir)
	b.topoQueueAdded("/", "dq", true)
	must(t, b.topoQueuesRecovered())
	b.topoQueueAdded("/", "gone", true)
	for _, bd := range b.Bindings("/") {
		if bd.Source == "dx" && bd.Dest == "dq" || bd.Dest == "gone" {
			t.Fatalf("binding back after restart: %+v", bd)
		}
	}
	wantRoute(t, b, "amq.direct", nil, []string{"g"})
	// Deleting the durable exchanges persists too.
	must(t, b.DeleteExchange("/", "dx", false))
	b.topoQueueRemoved("/", "dq") // takes ad (auto-delete) with its last binding
	must(t, b.Close())
	b = openBroker(t, dir)
	must(t, b.topoQueuesRecovered())
	if got := exchangeNames(b, "/"); slices.Contains(got, "dx") || slices.Contains(got, "ad") || !slices.Contains(got, "ae") {
		t.Fatalf("exchanges: %q", got)
	}
	if n := len(b.Bindings("/")); n != 0 {
		t.Fatalf("bindings: %+v", b.Bindings("/"))
	}
	must(t, b.Close())
}

// Ensure a deleted vhost's topology goes from memory and the catalog.
func TestTopologyVHostDeleted(t *testing.T) {
	dir := t.TempDir()
	b := newTopoBroker(t, dir)
	must(t, b.AddVHost("v"))
	must(t, b.DeclareExchange(ExchangeDef{VHost: "v", Name: "x", Type: "fanout", Durable: true}))
	must(t, b.Bind(BindingDef{VHost: "v", Source: "amq.fanout", DestKind: DestExchange, Dest: "x"}))
	must(t, b.DeleteVHost("v"))
	must(t, b.topoVHostDeleted("v"))
	must(t, b.AddVHost("v"))
	if got := exchangeNames(b, "v"); slices.Contains(got, "x") {
		t.Fatalf("exchanges of the new vhost: %q", got)
	}
	if n := len(b.Bindings("v")); n != 0 {
		t.Fatalf("bindings of the new vhost: %d", n)
	}
}

// Ensure routing runs concurrently with topology changes (run with -race).
func TestRouteConcurrentChanges(t *testing.T) {
	b := newTopoBroker(t, t.TempDir())
	b.topoQueueAdded("/", "stable", false)
	bindQ(t, b, "amq.topic", "stable", "a.#", nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			dst := make([]string, 0, 8)
			for {
				select {
				case <-stop:
					return
				default:
				}
				qs, err := b.Route("/", "amq.topic", []string{"a.b.c"}, nil, dst[:0])
				if err != nil || !slices.Contains(qs, "stable") {
					t.Errorf("Route = %q, %v", qs, err)
					return
				}
			}
		})
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	for i := 0; time.Now().Before(deadline); i++ {
		q := "q" + string(rune('a'+i%20))
		b.topoQueueAdded("/", q, false)
		bindQ(t, b, "amq.topic", q, "a.*.c", nil)
		declare(t, b, "x"+q, "fanout", false, nil)
		bindX(t, b, "amq.topic", "x"+q, "#")
		b.topoQueueRemoved("/", q)
		must(t, b.DeleteExchange("/", "x"+q, false))
	}
	close(stop)
	wg.Wait()
}

// catalogCount counts the catalog keys with prefix.
func catalogCount(t *testing.T, b *Broker, prefix string) int {
	t.Helper()
	n := 0
	must(t, b.cat.scan([]byte(prefix), func(_, _ []byte) error { n++; return nil }))
	return n
}

// Ensure a restart removes the records of a vhost deleted without its
// topology and bindings whose exchange is gone, but keeps an exchange of
// a type it does not know, with its bindings.
func TestTopologyStaleRecords(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	must(t, b.AddVHost("v"))
	must(t, b.DeclareExchange(ExchangeDef{VHost: "v", Name: "x", Type: "fanout", Durable: true}))
	must(t, b.Bind(BindingDef{VHost: "v", Source: "amq.fanout", DestKind: DestExchange, Dest: "x"}))
	must(t, b.DeleteVHost("v")) // without topoVHostDeleted
	must(t, b.cat.put(exchangeKey("/", "future"), exchangeRecord{VHost: "/", Name: "future", Type: "x-future", Durable: true}))
	must(t, b.cat.put(bindingKey("/", BindingDef{Source: "future", DestKind: DestExchange, Dest: "amq.direct"}.Ident()),
		bindingRecord{VHost: "/", Source: "future", DestKind: DestExchange, Dest: "amq.direct"}))
	must(t, b.cat.put(bindingKey("/", BindingDef{Source: "gone", DestKind: DestExchange, Dest: "amq.direct"}.Ident()),
		bindingRecord{VHost: "/", Source: "gone", DestKind: DestExchange, Dest: "amq.direct"}))
	must(t, b.Close())

	b = openBroker(t, dir)
	defer b.Close()
	if n := catalogCount(t, b, "e/v\x00") + catalogCount(t, b, "b/v\x00"); n != 0 {
		t.Fatalf("%d records of the deleted vhost left", n)
	}
	if n := catalogCount(t, b, "e/"); n != 1 {
		t.Fatalf("%d exchange records, want the unknown type's", n)
	}
	if n := catalogCount(t, b, "b/"); n != 1 {
		t.Fatalf("%d binding records, want the unknown type's", n)
	}
	if slices.Contains(exchangeNames(b, "/"), "future") {
		t.Fatal("exchange of an unknown type loaded")
	}
}
