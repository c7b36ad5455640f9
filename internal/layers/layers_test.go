package layers

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/warren-mq/warren/"

// rank is a package's level: it may import packages of lower levels only.
// The longest matching prefix decides.
var rank = []struct {
	prefix string
	level  int
}{
	{"internal/", 0},
	{"internal/amqp10/frame", 1},      // the AMQP 1.0 transport, over the amqp10 types
	{"internal/msgconv", 2},           // 0-9-1 <-> 1.0 message conversion, over amqp/wire and amqp10
	{"amqp/wire/internal/specgen", 0}, // the generator's parser of the XML spec
	{"amqp/wire", 1},
	{"streamproto/wire", 1},
	{"segment", 1},
	{"osiris", 2},
	{"queues/qerr", 3},
	{"queues/internal/", 3},
	{"queues/", 4}, // classic, route, policy: never queues itself
	{"queues", 5},
	{"cluster/nodenet", 1}, // node-to-node links: imports nothing of ours
	{"cluster/raft", 1},    // the multi-group raft host: nothing of ours either
	{"cluster/node", 6},    // a cluster node: the broker's catalog over raft and nodenet
	{"superstream", 6},
	{"definitions", 6}, // beside superstream: neither imports the other
	{"amqp", 7},
	{"streamproto", 7},    // beside amqp: neither imports the other
	{"amqp1", 7},          // AMQP 1.0, beside amqp: amqp hands it connections through a hook
	{"mgmt", 8},           // the management API: above the front ends it reports on
	{"mgmt/console", 0},   // the web console's embedded files: imports nothing of ours
	{"mgmt/mgmttest", 9},  // a whole Warren for tests of the API's clients
	{"mgmt/prom", 8},      // the Prometheus endpoint: beside the API, neither imports the other
	{"bench/leanamqp", 8}, // clients light enough not to set the pace
	{"bench/leanstream", 8},
	{"bench/perf", 9},
	{"bench/cmd/", 10},
	{"tools/", 11},
}

func levelOf(pkg string) (int, bool) {
	best, level := -1, 0
	for _, r := range rank {
		match := pkg == strings.TrimSuffix(r.prefix, "/") || strings.HasPrefix(pkg, r.prefix) ||
			(!strings.HasSuffix(r.prefix, "/") && strings.HasPrefix(pkg, r.prefix+"/"))
		if match && len(r.prefix) > best {
			best, level = len(r.prefix), r.level
		}
	}
	return level, best >= 0
}

// Ensure every import of a repository package by a non-test file of
// another goes to a lower level (generated code's own internal helpers
// under a package count as that package).
func TestImportsGoDownwards(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		from, ok := levelOf(pkg)
		if !ok {
			t.Errorf("%s: package %s has no level in the layer map", path, pkg)
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			dep := strings.TrimPrefix(p, module)
			if strings.HasPrefix(dep, pkg+"/") {
				continue // a package's own sub-packages (amqp/wire/internal/...)
			}
			to, _ := levelOf(dep)
			checked++
			if to >= from {
				t.Errorf("%s imports %s: level %d imports level %d", filepath.ToSlash(filepath.Join(rel, filepath.Base(path))), dep, from, to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d imports checked: the walk missed the tree", checked)
	}
}
