package definitions

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/superstream"
)

// populate adds to b what the fixture lacks: a vhost with metadata and a
// default queue type (and a classic queue declared before it had one), a user with a password given in clear, a global
// cluster_name, typed and float arguments, a consistent-hash exchange, a
// super stream made by the stream protocol's manager, and an exclusive
// queue with a binding (neither exported).
func populate(t *testing.T, b *queues.Broker) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	meta := queues.VHost{Name: "meta", Description: "with metadata", Tags: []string{"t1", "t2"}, Limits: map[string]int64{"max-queues": 9}}
	_, err := b.PutVHost(meta)
	must(err)
	must(b.AddUser("zed", "zed-pw", "management"))
	must(b.SetPermissions("zed", "meta", queues.Permissions{Configure: "^zed", Write: ".*", Read: ""}))
	must(b.SetGlobalParameter("cluster_name", json.RawMessage(`"warren@test"`)))
	must(b.SetGlobalParameter("internal_secret", json.RawMessage(`"never exported"`)))
	decl := func(def queues.QueueDef, owner any) {
		t.Helper()
		_, _, _, err := b.DeclareQueue(queues.DeclareOptions{Def: def, Owner: owner})
		must(err)
	}
	decl(queues.QueueDef{VHost: "meta", Name: "q-classic", Durable: true, Args: map[string]any{"x-queue-type": "classic", "x-message-ttl": int32(1500)}}, nil)
	decl(queues.QueueDef{VHost: "meta", Name: "q-quorum", Durable: true, Args: map[string]any{"x-queue-type": "quorum"}}, nil)
	decl(queues.QueueDef{VHost: "meta", Name: "q-untyped", Durable: true}, nil) // classic, before the vhost's default
	meta.DefaultQueueType = "quorum"
	_, err = b.PutVHost(meta)
	must(err)
	decl(queues.QueueDef{VHost: "meta", Name: "q-by-default", Durable: true}, nil) // quorum, by the vhost's default
	decl(queues.QueueDef{VHost: "meta", Name: "q-excl", Exclusive: true}, new(int))
	must(b.DeclareExchange(queues.ExchangeDef{VHost: "meta", Name: "x-hash", Type: queues.ExchangeConsistentHash, Durable: true,
		Args: map[string]any{"hash-header": "h"}}))
	must(b.DeclareExchange(queues.ExchangeDef{VHost: "meta", Name: "x-headers", Type: queues.ExchangeHeaders, Durable: true,
		Args: map[string]any{"x-weight": 1.5, "x-bytes": []byte("raw"), "x-nested": map[string]any{"a": []any{int8(1), "two", true}}}}))
	must(b.Bind(queues.BindingDef{VHost: "meta", Source: "x-hash", Dest: "q-classic", Key: "10"}))
	must(b.Bind(queues.BindingDef{VHost: "meta", Source: "x-headers", Dest: "q-excl", Args: map[string]any{"x-match": "any"}}))
	must(b.Bind(queues.BindingDef{VHost: "meta", Source: "x-headers", Dest: "q-quorum", Args: map[string]any{"x-match": "all", "ratio": 0.25}}))
	must(superstream.NewManager(b).Create("guest", "/", "orders", []string{"orders-0", "orders-1"}, []string{"eu", "us"},
		map[string]string{"max-length-bytes": "1000000"}))
}

// Ensure an export imported into a new broker exports the same again,
// byte for byte, and imports into its own broker changing nothing.
func TestExportImportExport(t *testing.T) {
	b := openBroker(t)
	importFile(t, b, fixtureHTTP)
	populate(t, b)
	first := exportJSON(t, b, "")
	for _, absent := range []string{"q-excl", "internal_secret", `"name": "amq.`, `"password"`} {
		if strings.Contains(first, absent) {
			t.Errorf("the export has %s", absent)
		}
	}
	for _, present := range []string{`"x-weight": 1.5`, `"ratio": 0.25`, `"x-bytes": "raw"`, `"x-super-stream": true`,
		`"x-stream-partition-order": 1`, `"cluster_name"`, `"component": "vhost-limits"`} {
		if !strings.Contains(first, present) {
			t.Errorf("the export lacks %s", present)
		}
	}

	other := openBroker(t)
	if err := Import(other, mustParse(t, first), ""); err != nil {
		t.Fatalf("import of the export: %v", err)
	}
	if second := exportJSON(t, other, ""); second != first {
		t.Errorf("export after import differs:\n%s\nfirst:\n%s", second, first)
	}
	if _, err := other.Authenticate("zed", "zed-pw", nil); err != nil {
		t.Errorf("zed after the round trip: %v", err)
	}
	if q, err := other.Queue("meta", "q-untyped"); err != nil || q.Def().Type != queues.QueueClassic {
		t.Errorf("q-untyped after the round trip: %v; want it classic despite the vhost's default", err)
	}
	if q, err := other.Queue("meta", "q-by-default"); err != nil || q.Def().Type != queues.QueueQuorum {
		t.Errorf("q-by-default after the round trip: %v; want it quorum", err)
	}
	parts, err := superstream.NewManager(other).Partitions("guest", "/", "orders")
	if err != nil || strings.Join(parts, ",") != "orders-0,orders-1" {
		t.Errorf("super stream after the round trip: %v %v", parts, err)
	}

	// Importing a broker's own export changes nothing.
	if err := Import(b, mustParse(t, first), ""); err != nil {
		t.Fatalf("import into the exporting broker: %v", err)
	}
	if again := exportJSON(t, b, ""); again != first {
		t.Errorf("export after importing its own export differs:\n%s", again)
	}
}

// Ensure a document parsed, marshalled and parsed again is the same.
func TestParseMarshalParse(t *testing.T) {
	for _, path := range []string{fixtureHTTP, fixtureCtl} {
		d := parseFile(t, path)
		once := jsonOf(t, d)
		if twice := jsonOf(t, mustParse(t, once)); twice != once {
			t.Errorf("%s: marshal, parse, marshal differs:\n%s\nwant\n%s", path, twice, once)
		}
	}
}
