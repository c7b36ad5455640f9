package definitions

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/superstream"
)

// Ensure RabbitMQ 3.10.8's HTTP export imports and reproduces its
// topology: users that log in with their passwords, vhosts, permissions,
// topic permissions, policies, queues of each type with their arguments,
// exchanges, bindings, the super stream and the global parameters.
func TestImportRabbitMQ3108(t *testing.T) {
	b := openBroker(t)
	importFile(t, b, fixtureHTTP)

	for _, login := range []struct{ user, password string }{
		{"defs-alice", "alice-secret"}, // hashed by RabbitMQ (SHA-256)
		{"defs-bob", "bob-secret"},     // SHA-512
		{"guest", "guest"},
	} {
		if _, err := b.Authenticate(login.user, login.password, nil); err != nil {
			t.Errorf("Authenticate(%s): %v", login.user, err)
		}
		if _, err := b.Authenticate(login.user, "wrong", nil); !errors.Is(err, queues.ErrAuthFailed) {
			t.Errorf("Authenticate(%s, wrong) = %v, want ErrAuthFailed", login.user, err)
		}
	}
	if _, err := b.Authenticate("defs-carol", "", nil); !errors.Is(err, queues.ErrAuthFailed) {
		t.Errorf("passwordless defs-carol logged in: %v", err)
	}
	users := map[string]queues.User{}
	all, err := b.Users()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range all {
		users[u.Name] = u
	}
	for name, want := range map[string]struct {
		tags   []string
		algo   string
		limits map[string]int64
	}{
		"defs-alice": {[]string{"management", "policymaker"}, queues.HashSHA256, map[string]int64{"max-channels": 20, "max-connections": 10}},
		"defs-bob":   {[]string{"monitoring"}, queues.HashSHA512, nil},
		"defs-carol": {[]string{}, queues.HashSHA256, nil},
		"guest":      {[]string{"administrator"}, queues.HashSHA256, nil},
	} {
		u := users[name]
		if !slices.Equal(u.Tags, want.tags) || u.HashingAlgorithm != want.algo || !maps.Equal(u.Limits, want.limits) {
			t.Errorf("user %s = tags %q algo %s limits %v; want %q %s %v", name, u.Tags, u.HashingAlgorithm, u.Limits, want.tags, want.algo, want.limits)
		}
	}

	if v, err := b.GetVHost("defs-a"); err != nil || !maps.Equal(v.Limits, map[string]int64{"max-connections": 100, "max-queues": 50}) {
		t.Errorf("vhost defs-a = %+v, %v; want the limits of its vhost-limits parameter", v, err)
	}
	if !b.VHostExists("defs-b") {
		t.Error("vhost defs-b missing")
	}

	for _, p := range []struct {
		user, vhost string
		want        queues.Permissions
	}{
		{"defs-alice", "defs-a", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}},
		{"defs-alice", "defs-b", queues.Permissions{Configure: "^defs-", Write: "^defs-", Read: "^defs-"}},
		{"defs-bob", "defs-a", queues.Permissions{Read: ".*"}},
		{"guest", "defs-b", queues.Permissions{Configure: ".*", Write: ".*", Read: ".*"}},
	} {
		if got, err := b.GetPermissions(p.user, p.vhost); err != nil || got != p.want {
			t.Errorf("permissions of %s in %s = %+v, %v; want %+v", p.user, p.vhost, got, err, p.want)
		}
	}
	tps, err := b.TopicPermissions()
	if err != nil {
		t.Fatal(err)
	}
	wantTP := []queues.TopicPermission{
		{User: "defs-alice", VHost: "defs-a", Exchange: "amq.topic", Write: `^defs\.alice\.`, Read: ".*"},
		{User: "defs-bob", VHost: "defs-a", Exchange: "defs-topic", Write: "^$", Read: `^logs\.`},
	}
	if !slices.Equal(tps, wantTP) {
		t.Errorf("topic permissions = %+v, want %+v", tps, wantTP)
	}

	pol, err := b.Policy("defs-a", "defs-cq-policy")
	if err != nil || pol.Pattern != "^defs-cq$" || pol.ApplyTo != "queues" || pol.Priority != 1 ||
		!reflect.DeepEqual(pol.Definition, map[string]any{"max-length-bytes": int64(1000000), "expires": int64(86400000)}) {
		t.Errorf("policy defs-cq-policy = %+v, %v", pol, err)
	}
	if pol, ok := b.EffectivePolicy("defs-a", "defs-stream", queues.QueueStream); !ok || pol.Name != "defs-stream-policy" {
		t.Errorf("the policy of stream defs-stream = %+v, %v", pol, ok)
	}
	if got := len(b.Policies("defs-a")) + len(b.Policies("defs-b")); got != 4 {
		t.Errorf("%d policies, want 4", got)
	}

	queue := func(vhost, name string) queues.QueueDef {
		t.Helper()
		q, err := b.Queue(vhost, name)
		if err != nil {
			t.Fatalf("queue %s: %v", name, err)
		}
		return q.Def()
	}
	cq := queue("defs-a", "defs-cq")
	if cq.Type != queues.QueueClassic || !cq.Durable || cq.Args["x-max-length"] != int64(500) ||
		cq.Args["x-overflow"] != "reject-publish" || cq.Args["x-dead-letter-exchange"] != "defs-dlx" || cq.Args["x-max-priority"] != int64(10) {
		t.Errorf("defs-cq = %+v", cq)
	}
	if tq := queue("defs-a", "defs-transient"); tq.Durable || tq.Args["x-expires"] != int64(3600000) {
		t.Errorf("defs-transient = %+v", tq)
	}
	if qq := queue("defs-a", "defs-qq"); qq.Type != queues.QueueQuorum || qq.Args["x-delivery-limit"] != int64(3) {
		t.Errorf("defs-qq = %+v", qq)
	}
	if qq := queue("defs-b", "defs-b-qq"); qq.Type != queues.QueueQuorum || qq.Args["x-dead-letter-strategy"] != "at-least-once" {
		t.Errorf("defs-b-qq = %+v", qq)
	}
	streams, err := b.Streams("defs-a")
	if err != nil || len(streams) != 1 || streams[0].Name != "defs-stream" ||
		!maps.Equal(streams[0].Args, map[string]string{"max-age": "7D", "max-length-bytes": "100000000", "stream-max-segment-size-bytes": "5000000"}) {
		t.Errorf("streams of defs-a = %+v, %v", streams, err)
	}

	exchange := func(name string) queues.ExchangeDef {
		t.Helper()
		x, err := b.Exchange("defs-a", name)
		if err != nil {
			t.Fatalf("exchange %s: %v", name, err)
		}
		return x
	}
	for name, typ := range map[string]string{"defs-direct": "direct", "defs-topic": "topic", "defs-fanout": "fanout", "defs-headers": "headers"} {
		if x := exchange(name); x.Type != typ || !x.Durable || x.Internal || x.AutoDelete {
			t.Errorf("exchange %s = %+v, want a durable %s", name, x, typ)
		}
	}
	if x := exchange("defs-internal"); !x.Internal {
		t.Errorf("defs-internal = %+v", x)
	}
	if x := exchange("defs-autodelete"); !x.AutoDelete {
		t.Errorf("defs-autodelete = %+v", x)
	}
	if x := exchange("defs-with-ae"); x.Args["alternate-exchange"] != "defs-ae" {
		t.Errorf("defs-with-ae = %+v", x)
	}

	var bindings []string
	for _, v := range []string{"defs-a", "defs-b"} {
		for _, bd := range b.Bindings(v) {
			bindings = append(bindings, fmt.Sprintf("%s %s->%d:%s %q %v", v, bd.Source, bd.DestKind, bd.Dest, bd.Key, bd.Args))
		}
	}
	wantB := []string{
		`defs-a amq.topic->0:defs-qq "defs.alice.#" map[]`,
		`defs-a defs-ae->0:defs-dead "" map[]`,
		`defs-a defs-autodelete->0:defs-dead "ad" map[]`,
		`defs-a defs-direct->0:defs-cq "k1" map[]`,
		`defs-a defs-direct->0:defs-qq "k1" map[x-note:direct binding with an argument]`,
		`defs-a defs-dlx->0:defs-dead "dead" map[]`,
		`defs-a defs-fanout->0:defs-stream "" map[]`,
		`defs-a defs-fanout->1:defs-internal "" map[]`,
		`defs-a defs-headers->0:defs-cq "" map[format:zip size:42 x-match:any]`,
		`defs-a defs-headers->0:defs-dead "" map[format:pdf type:report x-match:all]`,
		`defs-a defs-topic->0:defs-cq "defs.#" map[]`,
		`defs-a defs-topic->1:defs-fanout "audit.*" map[]`,
		`defs-b defs-b-topic->0:defs-b-qq "#" map[]`,
		`defs-b defs-ss->0:defs-ss-0 "0" map[x-stream-partition-order:0]`,
		`defs-b defs-ss->0:defs-ss-1 "1" map[x-stream-partition-order:1]`,
		`defs-b defs-ss->0:defs-ss-2 "2" map[x-stream-partition-order:2]`,
	}
	if !slices.Equal(bindings, wantB) {
		t.Errorf("bindings:\n%q\nwant\n%q", bindings, wantB)
	}
	// The headers binding routes by its (typed) arguments.
	dst, err := b.Route("defs-a", "defs-headers", []string{""}, map[string]any{"format": "zip"}, nil)
	if err != nil || !slices.Equal(dst, []string{"defs-cq"}) {
		t.Errorf("Route(defs-headers, format=zip) = %v, %v", dst, err)
	}
	// The alternate exchange of the policy applies to defs-direct.
	dst, err = b.Route("defs-a", "defs-direct", []string{"unbound"}, nil, nil)
	if err != nil || !slices.Equal(dst, []string{"defs-dead"}) {
		t.Errorf("Route(defs-direct, unbound) = %v, %v; want defs-dead through the policy's alternate exchange", dst, err)
	}

	parts, err := superstream.NewManager(b).Partitions("guest", "defs-b", "defs-ss")
	if err != nil || !slices.Equal(parts, []string{"defs-ss-0", "defs-ss-1", "defs-ss-2"}) {
		t.Errorf("super stream defs-ss partitions = %v, %v", parts, err)
	}

	if v, err := b.GetGlobalParameter("defs-note"); err != nil || string(v) != `{"made-by":"definitions/testdata/rabbitmq-fixture.sh"}` {
		t.Errorf("global parameter defs-note = %s, %v", v, err)
	}
	if _, err := b.GetGlobalParameter("internal_cluster_id"); !errors.Is(err, queues.ErrNotFound) {
		t.Errorf("internal_cluster_id imported: %v", err)
	}

	// Importing it again changes nothing.
	before := exportJSON(t, b, "")
	importFile(t, b, fixtureHTTP)
	if after := exportJSON(t, b, ""); after != before {
		t.Errorf("a second import changed the broker:\n%s", after)
	}
}

// Ensure rabbitmqctl export_definitions' form imports too: the vhosts'
// metadata, and their limits as lists of pairs.
//
// rabbitmqctl leaves internal exchanges out of its export
// (rabbit_definitions:list_exchanges) but not the bindings to them: 3.10
// drops such a binding on import without a word; Import refuses the
// document, naming it, and takes it once the binding is gone.
func TestImportRabbitMQ3108Ctl(t *testing.T) {
	b := openBroker(t)
	d := parseFile(t, fixtureCtl)
	err := Import(b, d, "")
	const reason = "binding of exchange 'defs-fanout' in vhost 'defs-a' with the empty key to exchange 'defs-internal': " +
		"no exchange 'defs-internal' in vhost 'defs-a' (it neither exists nor is in the definitions)"
	var ie *InvalidError
	if !errors.As(err, &ie) || !slices.Equal(ie.Reasons, []string{reason}) {
		t.Fatalf("Import = %v, want the one reason %q", err, reason)
	}
	d.Bindings = slices.DeleteFunc(d.Bindings, func(bd Binding) bool { return bd.Destination == "defs-internal" })
	if err := Import(b, d, ""); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]queues.VHost{
		"defs-a": {Name: "defs-a", Description: "definitions fixture A", Tags: []string{"fixture", "a"}, DefaultQueueType: "classic",
			Limits: map[string]int64{"max-connections": 100, "max-queues": 50}},
		"defs-b": {Name: "defs-b", Description: "definitions fixture B", Tags: []string{"fixture"}, DefaultQueueType: "quorum"},
	} {
		if v, err := b.GetVHost(name); err != nil || !reflect.DeepEqual(v, want) {
			t.Errorf("vhost %s = %+v, %v; want %+v", name, v, err, want)
		}
	}
	if _, err := b.Authenticate("defs-bob", "bob-secret", nil); err != nil {
		t.Errorf("defs-bob: %v", err)
	}
	// The same topology as the HTTP export's, but the internal exchange.
	other := openBroker(t)
	importFile(t, other, fixtureHTTP)
	if err := other.DeleteExchange("defs-a", "defs-internal", false); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"defs-a", "defs-b"} {
		if got, want := exportJSON(t, b, v), exportJSON(t, other, v); got != stripMetadata(t, got, want) {
			t.Errorf("vhost %s differs from the HTTP export's import:\n%s\nwant\n%s", v, got, want)
		}
	}
}

// stripMetadata returns want with got's vhost metadata and limits (which
// only the rabbitmqctl export has), for comparing the rest.
func stripMetadata(t *testing.T, got, want string) string {
	t.Helper()
	g, w := mustParse(t, got), mustParse(t, want)
	w.Metadata, w.Description, w.DefaultQueueType, w.Limits, w.Parameters = g.Metadata, g.Description, g.DefaultQueueType, g.Limits, g.Parameters
	return jsonOf(t, w)
}
