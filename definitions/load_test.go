package definitions

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-mq/warren/queues"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Ensure LoadFile imports a file.
func TestLoadFile(t *testing.T) {
	b := openBroker(t)
	if err := LoadFile(b, fixtureHTTP); err != nil {
		t.Fatal(err)
	}
	want := openBroker(t)
	importFile(t, want, fixtureHTTP)
	if got, want := exportJSON(t, b, ""), exportJSON(t, want, ""); got != want {
		t.Errorf("LoadFile imported\n%s\nwant\n%s", got, want)
	}
	if err := LoadFile(b, filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// Ensure LoadFile imports a directory's *.json files in name order as
// one document (a later file may use what an earlier one defines), skips
// other files and subdirectories, and applies nothing when one file is
// bad, naming it.
func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "10-identity.json"), `{"rabbit_version": "3.5.7",
		"users": [{"name": "old", "password_hash": "dGVzdCF98Z2UKkqZDr7tY6mDKS8=", "tags": "administrator"}],
		"vhosts": [{"name": "app"}],
		"permissions": [{"user": "old", "vhost": "app", "configure": ".*", "write": ".*", "read": ".*"}]}`)
	writeFile(t, filepath.Join(dir, "20-topology.json"), `{"rabbit_version": "3.13.0",
		"exchanges": [{"name": "events", "vhost": "app", "type": "topic", "durable": true}],
		"queues": [{"name": "audit", "vhost": "app", "durable": true}],
		"bindings": [{"source": "events", "vhost": "app", "destination": "audit", "destination_type": "queue", "routing_key": "#", "arguments": {}}]}`)
	writeFile(t, filepath.Join(dir, "notes.txt"), "not definitions")
	writeFile(t, filepath.Join(dir, "sub", "30-ignored.json"), `{"vhosts": [{"name": "from-sub"}]}`)

	b := openBroker(t)
	if err := LoadFile(b, dir); err != nil {
		t.Fatal(err)
	}
	// The first file's users have no hashing algorithm: 3.5's default,
	// MD5 (the hash is MD5 of salt "test" and "secret").
	u, err := b.GetUser("old")
	if err != nil || u.HashingAlgorithm != queues.HashMD5 {
		t.Fatalf("user old = %+v, %v; want MD5", u, err)
	}
	if _, err := b.Authenticate("old", "secret", nil); err != nil {
		t.Errorf("old: %v", err)
	}
	dst, err := b.Route("app", "events", []string{"a.b"}, nil, nil)
	if err != nil || strings.Join(dst, ",") != "audit" {
		t.Errorf("Route(app, events) = %v, %v", dst, err)
	}
	if b.VHostExists("from-sub") {
		t.Error("a subdirectory's file was read")
	}

	// A bad file: nothing of the directory is applied, the file is named.
	writeFile(t, filepath.Join(dir, "15-more.json"), `{"vhosts": [{"name": "more"}],
		"queues": [{"name": "bad", "vhost": "more", "arguments": {"x-max-length": -1}}]}`)
	fresh := openBroker(t)
	before := exportJSON(t, fresh, "")
	err = LoadFile(fresh, dir)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "invalid arg 'x-max-length' for queue 'bad' in vhost 'more'") {
		t.Fatalf("LoadFile with a bad file = %v", err)
	}
	if after := exportJSON(t, fresh, ""); after != before {
		t.Errorf("a refused directory changed the broker:\n%s", after)
	}
	writeFile(t, filepath.Join(dir, "15-more.json"), `{"queues": [{"name": "orphan"}]}`)
	err = LoadFile(fresh, dir)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), filepath.Join(dir, "15-more.json")+": queues[0] 'orphan' has no vhost") {
		t.Fatalf("LoadFile with a single vhost's export = %v", err)
	}
	writeFile(t, filepath.Join(dir, "15-more.json"), `{"queues": `)
	if err := LoadFile(fresh, dir); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "15-more.json: not a JSON object") {
		t.Fatalf("LoadFile with a broken file = %v", err)
	}

	// An empty directory imports nothing.
	if err := LoadFile(fresh, t.TempDir()); err != nil {
		t.Errorf("an empty directory: %v", err)
	}
}
