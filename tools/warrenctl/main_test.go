package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"github.com/warren-mq/warren/internal/testutil"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the commands' output")

// TestMain fails the run if a test leaves a goroutine of this package or an
// HTTP client connection behind: run must close its transport's idle
// connections, and a test must close its server.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 {
		if leaks := leakedGoroutines(); leaks != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaks)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines returns the stacks of suspect goroutines, giving exiting
// goroutines a bounded number of chances to finish.
func leakedGoroutines() string {
	return testutil.LeakedGoroutines("\nmain.", "net/http.(*persistConn)", "net/http.(*conn).serve")
}

// route is one canned response of the fake management API.
type route struct {
	method string
	uri    string // RequestURI: the escaped path and the query
	status int
	file   string // body, relative to testdata ("rabbitmq-3.10.8/users.json")
	body   string // body when file is ""
}

// sent is a request a command must make; commands make them in order.
type sent struct {
	method string
	uri    string
	header map[string]string // headers that must have exactly these values
	body   string            // the exact body; "" for none
}

// cliCase runs warrenctl against the fake API. Output (stdout, stderr and
// exit code) is compared with testdata/golden/<name>.txt.
type cliCase struct {
	name   string
	args   []string // after --url
	stdin  string
	routes []route
	want   []sent
	code   int
	auth   string // user:password every request must carry; "" means guest:guest
	// env is the environment; "$URL" in a value is the fake API's URL.
	// With WARRENCTL_URL set, args get no --url.
	env map[string]string
	// check, if set, runs after the command; tmp is the directory "$TMP"
	// in args stands for.
	check func(t *testing.T, tmp string)
}

// Shorthands for routes.
func get(uri, file string) route { return route{method: "GET", uri: uri, status: 200, file: file} }
func rmq(name string) string     { return "rabbitmq-3.10.8/" + name }
func wrn(name string) string     { return "warren/" + name }

// Fixtures shared by many cases.
var (
	notFound404 = func(method, uri string) route {
		return route{method: method, uri: uri, status: 404, file: rmq("not-found.json")}
	}
	noContent = func(method, uri string) route { return route{method: method, uri: uri, status: 204} }
	created   = func(method, uri string) route { return route{method: method, uri: uri, status: 201} }
	emptyList = func(uri string) route { return route{method: "GET", uri: uri, status: 200, body: "[]"} }
)

func req(method, uri string) sent { return sent{method: method, uri: uri} }

func withBody(method, uri, body string) sent {
	return sent{method: method, uri: uri, body: body}
}

// recorded is a request the fake API received.
type recorded struct {
	method string
	uri    string
	header http.Header
	body   string
}

// fakeAPI serves a case's routes and records every request.
type fakeAPI struct {
	t      *testing.T
	routes []route
	mu     struct {
		sync.Mutex
		reqs []recorded
	}
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.mu.reqs = append(f.mu.reqs, recorded{method: r.Method, uri: r.RequestURI, header: r.Header.Clone(), body: string(body)})
	f.mu.Unlock()
	for _, rt := range f.routes {
		if rt.method != r.Method || rt.uri != r.RequestURI {
			continue
		}
		data := []byte(rt.body)
		if rt.file != "" {
			var err error
			data, err = os.ReadFile(filepath.Join("testdata", rt.file))
			if err != nil {
				f.t.Errorf("route %s %s: %v", rt.method, rt.uri, err)
			}
		}
		if len(data) > 0 {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(rt.status)
		w.Write(data)
		return
	}
	f.t.Errorf("unexpected request %s %s", r.Method, r.RequestURI)
	w.WriteHeader(http.StatusInternalServerError)
	io.WriteString(w, `{"error":"test","reason":"no route for this request"}`)
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.mu.reqs...)
}

// runCLI runs warrenctl in-process and returns its exit code and output.
func runCLI(ctx context.Context, args []string, stdin string, env Env) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	env.Stdin = strings.NewReader(stdin)
	code = run(ctx, args, &out, &errOut, env)
	return code, out.String(), errOut.String()
}

// shellWords renders args for the golden file's first line.
func shellWords(args []string) string {
	safe := regexp.MustCompile(`^[A-Za-z0-9_./:=@,%+-]+$`)
	words := make([]string, len(args))
	for i, a := range args {
		if safe.MatchString(a) {
			words[i] = a
		} else {
			words[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

// checkGolden compares a run's output with testdata/golden/<name>.txt, or
// rewrites that file with -update. replace maps run-specific strings (the
// server's URL, a temporary directory) to stable placeholders.
func checkGolden(t *testing.T, name string, args []string, code int, stdout, stderr string, replace map[string]string) {
	t.Helper()
	got := fmt.Sprintf("$ warrenctl %s\nexit %d\n--- stdout\n%s--- stderr\n%s", shellWords(args), code, stdout, stderr)
	// Longest first: one string may contain another (a URL its host).
	froms := make([]string, 0, len(replace))
	for from := range replace {
		froms = append(froms, from)
	}
	sort.Slice(froms, func(i, j int) bool { return len(froms[i]) > len(froms[j]) })
	for _, from := range froms {
		got = strings.ReplaceAll(got, from, replace[from])
	}
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (-update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func runCase(t *testing.T, tc cliCase) {
	t.Helper()
	api := &fakeAPI{t: t, routes: tc.routes}
	srv := httptest.NewServer(api)
	defer srv.Close()

	tmp := t.TempDir()
	var args []string
	if _, ok := tc.env["WARRENCTL_URL"]; !ok {
		args = []string{"--url", srv.URL}
	}
	for _, a := range tc.args {
		args = append(args, strings.ReplaceAll(a, "$TMP", tmp))
	}
	env := Env{Getenv: func(k string) string { return strings.ReplaceAll(tc.env[k], "$URL", srv.URL) }}
	code, stdout, stderr := runCLI(context.Background(), args, tc.stdin, env)
	if code != tc.code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
	}

	auth := tc.auth
	if auth == "" {
		auth = "guest:guest"
	}
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(auth))
	got := api.requests()
	for i, r := range got {
		if i >= len(tc.want) {
			t.Errorf("request %d: unexpected %s %s", i, r.method, r.uri)
			continue
		}
		w := tc.want[i]
		if r.method != w.method || r.uri != w.uri {
			t.Errorf("request %d: got %s %s, want %s %s", i, r.method, r.uri, w.method, w.uri)
		}
		if r.body != w.body {
			t.Errorf("request %d (%s %s): body\n got %s\nwant %s", i, r.method, r.uri, r.body, w.body)
		}
		if h := r.header.Get("Authorization"); h != wantAuth {
			t.Errorf("request %d: Authorization %q, want %q", i, h, wantAuth)
		}
		if ct := r.header.Get("Content-Type"); (w.body != "") != (ct == "application/json") {
			t.Errorf("request %d: Content-Type %q with body %q", i, ct, w.body)
		}
		for k, v := range w.header {
			if h := r.header.Values(k); len(h) != 1 || h[0] != v {
				t.Errorf("request %d: header %s = %q, want %q", i, k, h, v)
			}
		}
	}
	for i := len(got); i < len(tc.want); i++ {
		t.Errorf("request %d: missing %s %s", i, tc.want[i].method, tc.want[i].uri)
	}
	checkGolden(t, tc.name, tc.args, code, stdout, stderr, map[string]string{srv.URL: "$URL", tmp: "$TMP"})
	if tc.check != nil {
		tc.check(t, tmp)
	}
}

func runCases(t *testing.T, cases []cliCase) {
	t.Helper()
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("two cases named %s", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) { runCase(t, tc) })
	}
}
