package wire

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-mq/warren/amqp/wire/internal/specgen"
)

// generate runs the generator on the checked-in XML, as
// `go generate ./amqp/wire` does.
func generate(t *testing.T) []byte {
	t.Helper()
	main, err := os.Open("spec/amqp0-9-1.extended.xml")
	if err != nil {
		t.Fatal(err)
	}
	defer main.Close()
	extra, err := os.Open("spec/amqp0-9-1.access.xml")
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	spec, err := specgen.Parse(main, extra)
	if err != nil {
		t.Fatal(err)
	}
	src, err := specgen.Generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// spec_gen.go is what the generator makes of the checked-in XML: CI fails
// when either changes without the other.
func TestGeneratedUpToDate(t *testing.T) {
	src := generate(t)
	tmp := filepath.Join(t.TempDir(), "spec_gen.go")
	if err := os.WriteFile(tmp, src, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("spec_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(have, fresh) {
		return
	}
	haveLines, freshLines := strings.Split(string(have), "\n"), strings.Split(string(fresh), "\n")
	for i := range max(len(haveLines), len(freshLines)) {
		var h, f string
		if i < len(haveLines) {
			h = haveLines[i]
		}
		if i < len(freshLines) {
			f = freshLines[i]
		}
		if h != f {
			t.Fatalf("spec_gen.go is stale; run `go generate ./amqp/wire`.\nfirst difference at line %d:\nchecked in: %s\ngenerated:  %s", i+1, h, f)
		}
	}
}

func TestGeneratorDeterministic(t *testing.T) {
	a, b := generate(t), generate(t)
	if !bytes.Equal(a, b) {
		t.Fatal("two runs differ")
	}
	if !bytes.HasPrefix(a, []byte(specgen.Header+"\n")) {
		t.Fatalf("header: %q", a[:100])
	}
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"reserved-1":   "Reserved1",
		"no-wait":      "NoWait",
		"auto-delete":  "AutoDelete",
		"consumer-tag": "ConsumerTag",
		"delivery-tag": "DeliveryTag",
		"class-id":     "ClassID",
		"get-ok":       "GetOk",
		"tx":           "Tx",
	} {
		if got := specgen.GoName(in); got != want {
			t.Errorf("GoName(%q) = %q, want %q", in, got, want)
		}
	}
}
