package definitions

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/warren-mq/warren/queues"
)

// Fixtures made by testdata/rabbitmq-fixture.sh (see testdata/README.md).
const (
	fixtureHTTP = "testdata/rabbitmq-3.10.8.json"     // GET /api/definitions
	fixtureCtl  = "testdata/rabbitmq-3.10.8-ctl.json" // rabbitmqctl export_definitions
)

// openBroker opens a broker in a new directory, closed at the end of the
// test.
func openBroker(t testing.TB) *queues.Broker {
	t.Helper()
	b, err := queues.Open(t.TempDir(), queues.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("broker close: %v", err)
		}
	})
	return b
}

// parseFile parses a file of testdata.
func parseFile(t testing.TB, path string) *Definitions {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", path, err)
	}
	return d
}

// importFile imports a file of testdata into b.
func importFile(t testing.TB, b *queues.Broker, path string) {
	t.Helper()
	if err := Import(b, parseFile(t, path), ""); err != nil {
		t.Fatalf("Import(%s): %v", path, err)
	}
}

// exportJSON returns b's export (of vhost, "" for all) as indented JSON.
func exportJSON(t testing.TB, b *queues.Broker, vhost string) string {
	t.Helper()
	d, err := Export(b, vhost)
	if err != nil {
		t.Fatalf("Export(%q): %v", vhost, err)
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatalf("marshal the export: %v", err)
	}
	return string(out)
}

// mustParse parses a document given as text.
func mustParse(t testing.TB, doc string) *Definitions {
	t.Helper()
	d, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse(%s): %v", doc, err)
	}
	return d
}

// jsonOf returns d as exportJSON writes it.
func jsonOf(t testing.TB, d *Definitions) string {
	t.Helper()
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(out)
}
