package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Ensure the shipped exclusion list parses and gives every entry a
// reason, and that malformed lines are refused.
func TestExclusions(t *testing.T) {
	ex, err := parseExclusions(exclusionsText)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) == 0 {
		t.Fatal("no exclusions parsed")
	}
	known := map[string]bool{}
	for _, s := range knownSuites {
		known[s.Name] = true
	}
	for _, e := range ex {
		if !known[e.suite] || strings.TrimSpace(e.reason) == "" {
			t.Errorf("exclusion %+v: unknown suite or no reason", e)
		}
	}
	for _, bad := range []string{"amqp091-go\tTestX", "amqp091-go\tTestX\t ", "\tTestX\treason", "a b c"} {
		if _, err := parseExclusions(bad); err == nil {
			t.Errorf("parseExclusions(%q) accepted", bad)
		}
	}
}

// Ensure the TAP of Node's test runner yields its leaf tests with their
// outcomes and full titles, a failure for a file or suite that failed by
// itself (a timeout or a hook cuts its tests short), and no result for
// suites whose only failure is their subtests'.
func TestTAPParser(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "node.tap"))
	if err != nil {
		t.Fatal(err)
	}
	var p tapParser
	for _, l := range strings.Split(string(b), "\n") {
		p.line(l)
	}
	got := p.results()
	want := []result{
		{name: "Connect Connect API Connection refused", state: "passed"},
		{name: "Connect Connect API serverProperties", state: "failed"},
		{name: "Connect Connect API skipped one", state: "skipped"},
		{name: "/tmp/amqplib/test/callback_api.test.js", state: "failed"},
		{name: "Channel API ack", state: "passed"},
		{name: "Broken first", state: "passed"},
		{name: "Broken: hookFailed", state: "failed"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("results\n got %+v\nwant %+v", got, want)
	}
}

// Ensure mocha's TAP yields each test by its full title with its
// outcome, a failed hook as a failure, log lines that merely contain
// "ok N" as nothing, and a test reported twice once, with its worse
// outcome.
func TestMochaTAP(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "mocha.tap"))
	if err != nil {
		t.Fatal(err)
	}
	var p mochaTAP
	for _, l := range strings.Split(string(b), "\n") {
		p.line(l)
	}
	got := p.results()
	want := []result{
		{name: "connect using parameters", state: "passed"},
		{name: "connect using EXTERNAL auth", state: "failed"},
		{name: "connect declaring connection name", state: "passed"},
		{name: "Stream cache skipped one", state: "skipped"},
		{name: `declare consumer "before each" hook for "declaring a consumer on an existing stream - the consumer should handle the message"`, state: "failed"},
		{name: "publish twice", state: "failed"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("results\n got %+v\nwant %+v", got, want)
	}
}

// Ensure a Ginkgo JSON report yields one result per spec named by its
// containers and text, failed setup nodes as failures, and successful
// setup nodes not at all.
func TestReadGinkgo(t *testing.T) {
	report := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(report, []byte(`[{"SuiteDescription":"S","SpecReports":[
		{"ContainerHierarchyTexts":["A","B"],"LeafNodeText":"works","LeafNodeType":"It","State":"passed"},
		{"ContainerHierarchyTexts":["A"],"LeafNodeText":"breaks","LeafNodeType":"It","State":"failed","Failure":{"Message":"Expected\n  1 to equal 2"}},
		{"ContainerHierarchyTexts":["A"],"LeafNodeText":"later","LeafNodeType":"It","State":"pending"},
		{"ContainerHierarchyTexts":[],"LeafNodeText":"","LeafNodeType":"SynchronizedBeforeSuite","State":"passed"},
		{"ContainerHierarchyTexts":[],"LeafNodeText":"","LeafNodeType":"SynchronizedAfterSuite","State":"failed","Failure":{"Message":"http error (404)"}}
	]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readGinkgo(report)
	if err != nil {
		t.Fatal(err)
	}
	want := []result{
		{name: "A B works", state: "passed"},
		{name: "A breaks: Expected", state: "failed"},
		{name: "A later", state: "skipped"},
		{name: "SynchronizedAfterSuite : http error (404)", state: "failed"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("results\n got %+v\nwant %+v", got, want)
	}
}

// Ensure readLines yields every line, cuts one longer than the limit
// instead of stopping, and keeps a last line without a newline.
func TestReadLines(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	in := "ok 1 a\n" + long + "\nok 2 b\r\nlast"
	var got []string
	if err := readLines(strings.NewReader(in), 1000, func(l string) { got = append(got, l) }); err != nil {
		t.Fatal(err)
	}
	want := []string{"ok 1 a", long[:1000], "ok 2 b", "last"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d lines %.40q, want %d %.40q", len(got), got, len(want), want)
	}
}
