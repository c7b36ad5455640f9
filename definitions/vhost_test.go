package definitions

import (
	"errors"
	"strings"
	"testing"

	"github.com/warren-mq/warren/queues"
)

// Ensure a vhost's export has no vhost fields nor broker-wide lists, and
// imports into another vhost (of another broker) as the same topology.
func TestSingleVHostExportImport(t *testing.T) {
	b := openBroker(t)
	importFile(t, b, fixtureHTTP)
	exported := exportJSON(t, b, "defs-a")
	for _, absent := range []string{`"vhost"`, `"users"`, `"vhosts"`, `"permissions"`, `"topic_permissions"`, `"global_parameters"`, "defs-b"} {
		if strings.Contains(exported, absent) {
			t.Errorf("the vhost's export has %s", absent)
		}
	}
	for _, present := range []string{`"rabbitmq_definition_format": "single_virtual_host"`, `"original_vhost_name": "defs-a"`,
		`"name": "defs-cq"`, `"component": "vhost-limits"`, `"name": "defs-cq-policy"`} {
		if !strings.Contains(exported, present) {
			t.Errorf("the vhost's export lacks %s", present)
		}
	}

	other := openBroker(t)
	if _, err := other.PutVHost(queues.VHost{Name: "copy"}); err != nil {
		t.Fatal(err)
	}
	d := mustParse(t, exported)
	if err := Import(other, d, "copy"); err != nil {
		t.Fatalf("import into copy: %v", err)
	}
	copied := exportJSON(t, other, "copy")
	want := strings.ReplaceAll(exported, `"defs-a"`, `"copy"`)
	want = strings.ReplaceAll(want, `virtual host 'defs-a'`, `virtual host 'copy'`)
	if copied != want {
		t.Errorf("copy exports\n%s\nwant\n%s", copied, want)
	}
	if v, _ := other.GetVHost("copy"); v.Limits["max-queues"] != 50 {
		t.Errorf("copy's limits %v, want those of defs-a's vhost-limits parameter", v.Limits)
	}
}

// Ensure an import into a vhost puts every entity there whatever vhost it
// names (RabbitMQ 3.x's single vhost export keeps the policies' vhost
// fields) and ignores users, vhosts, permissions and global parameters.
func TestImportIntoVHostIgnoresBrokerWideLists(t *testing.T) {
	b := openBroker(t)
	if _, err := b.PutVHost(queues.VHost{Name: "target"}); err != nil {
		t.Fatal(err)
	}
	d := mustParse(t, `{
		"users": [{"name": "ignored", "password_hash": "", "tags": []}],
		"vhosts": [{"name": "ignored-vhost"}],
		"permissions": [{"user": "nobody", "vhost": "nowhere", "configure": "(", "write": "", "read": ""}],
		"global_parameters": [{"name": "ignored-gp", "value": 1}],
		"policies": [{"vhost": "elsewhere", "name": "p", "pattern": "^q", "apply-to": "queues", "definition": {"max-length": 2}, "priority": 0}],
		"exchanges": [{"name": "x", "vhost": "elsewhere", "type": "fanout"}],
		"queues": [{"name": "q", "vhost": "elsewhere", "arguments": {}}, {"name": "q2"}],
		"bindings": [{"source": "x", "destination": "q", "destination_type": "queue", "routing_key": "", "arguments": {}}]
	}`)
	if err := Import(b, d, "target"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetUser("ignored"); !errors.Is(err, queues.ErrNotFound) {
		t.Errorf("user imported into a vhost: %v", err)
	}
	if b.VHostExists("ignored-vhost") || b.VHostExists("elsewhere") {
		t.Error("a vhost was made")
	}
	if _, err := b.GetGlobalParameter("ignored-gp"); !errors.Is(err, queues.ErrNotFound) {
		t.Errorf("global parameter imported into a vhost: %v", err)
	}
	if _, err := b.Policy("target", "p"); err != nil {
		t.Errorf("policy: %v", err)
	}
	dst, err := b.Route("target", "x", []string{""}, nil, nil)
	if err != nil || strings.Join(dst, ",") != "q" {
		t.Errorf("Route(target, x) = %v, %v", dst, err)
	}
	if _, err := b.Queue("target", "q2"); err != nil {
		t.Errorf("q2: %v", err)
	}
}

// Ensure a missing vhost is ErrNotFound, and a bad vhost document
// applies nothing.
func TestSingleVHostErrors(t *testing.T) {
	b := openBroker(t)
	if _, err := Export(b, "nowhere"); !errors.Is(err, queues.ErrNotFound) {
		t.Errorf("Export(nowhere) = %v, want ErrNotFound", err)
	}
	if err := Import(b, &Definitions{}, "nowhere"); !errors.Is(err, queues.ErrNotFound) {
		t.Errorf("Import(nowhere) = %v, want ErrNotFound", err)
	}
	before := exportJSON(t, b, "/")
	d := mustParse(t, `{"exchanges": [{"name": "x", "type": "topic"}], "queues": [{"name": "q"}],
		"bindings": [{"source": "x", "destination": "q", "destination_type": "queue", "routing_key": "a.#.#.#", "arguments": {}}]}`)
	err := Import(b, d, "/")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "uses 3 '#' wildcards") {
		t.Errorf("Import = %v", err)
	}
	if after := exportJSON(t, b, "/"); after != before {
		t.Errorf("the refused import changed the vhost:\n%s", after)
	}
}

// Ensure a queue without x-queue-type takes the type a 4.x export gives
// beside its arguments, else its vhost's default queue type, as
// RabbitMQ's augment_declare_args does (not for an auto-delete queue,
// which a quorum queue cannot be).
func TestImportQueueTypes(t *testing.T) {
	b := openBroker(t)
	d := mustParse(t, `{
		"vhosts": [{"name": "v", "metadata": {"default_queue_type": "quorum"}}, {"name": "undef", "default_queue_type": "undefined"}],
		"queues": [
			{"name": "by-default", "vhost": "v"},
			{"name": "typed", "vhost": "v", "type": "stream"},
			{"name": "explicit", "vhost": "v", "arguments": {"x-queue-type": "classic"}},
			{"name": "transient", "vhost": "v", "durable": false, "auto_delete": true},
			{"name": "plain", "vhost": "undef"}
		]
	}`)
	if err := Import(b, d, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ vhost, name, typ string }{
		{"v", "by-default", queues.QueueQuorum}, {"v", "explicit", queues.QueueClassic},
		{"v", "transient", queues.QueueClassic}, {"undef", "plain", queues.QueueClassic},
	} {
		if q, err := b.Queue(tc.vhost, tc.name); err != nil || q.Def().Type != tc.typ {
			t.Errorf("queue %s: %v, want %s", tc.name, err, tc.typ)
		}
	}
	if _, ok := b.LookupStream("v", "typed"); !ok {
		t.Error("typed is not a stream")
	}
	if v, _ := b.GetVHost("undef"); v.DefaultQueueType != "" {
		t.Errorf("default queue type 'undefined' kept as %q", v.DefaultQueueType)
	}
}
