// Command peer-suites runs the client libraries' own integration test
// suites, unchanged, against a Warren it starts: the conformance tests
// the project holds itself to.
//
//	go run ./tools/peer-suites                       # the Go suites
//	go run ./tools/peer-suites -suites stream-go     # one of them
//	go run ./tools/peer-suites -amqplib ~/src/amqplib # and amqplib's
//	go run ./tools/peer-suites -suites stream-js -stream-js /tmp/stream-js
//
// Suites:
//
//   - amqp091-go: github.com/rabbitmq/amqp091-go's integration tests (build
//     tag integration), at the version in go.mod, from the module cache;
//   - stream-go: github.com/rabbitmq/rabbitmq-stream-go-client's pkg/stream
//     suite (Ginkgo), likewise;
//   - amqplib: the Node.js client's test/connect, test/channel_api and
//     test/callback_api (Node's own test runner), from a checkout of its
//     repository at v2.0.1, since the npm package ships no tests: git
//     clone -b v2.0.1 https://github.com/amqp-node/amqplib, then -amqplib
//     <dir> (those three files need no npm packages). Local only: CI has
//     no copy of that repository;
//   - stream-js: the Node.js stream client's (rabbitmq-stream-js-client)
//     own mocha suite, test/unit and test/e2e, as its npm test runs it
//     (TypeScript through tsx), from a checkout of its repository at
//     v0.6.2, since the npm package ships no tests (v0.6.2 is its newest
//     release tag; npm's 1.0.0, which streamproto/nodejs uses, has none):
//     git clone -b v0.6.2
//     https://github.com/coders51/rabbitmq-stream-js-client, npm ci in it
//     (its dev dependencies: mocha, tsx, got, amqplib...), then -stream-js
//     <dir>. Its tests log in as rabbit/rabbit (RABBITMQ_USER,
//     RABBITMQ_PASSWORD; one helper always uses rabbit), manage queues,
//     exchanges and bindings through the management API, and expect a
//     super stream super-stream-test with partitions -0 and -1 (its CI
//     makes one with rabbitmq-streams): the harness creates that user, an
//     administrator, and that super stream before the suite runs. It runs
//     mocha with a reporter of its own (mocha-tap.js) and --exit. Local
//     only, like amqplib.
//
// The suites expect a broker on fixed ports (localhost:5672, :5552 and
// the management API on :15672), so the harness runs them in a private
// network namespace (unshare -n, as root): the ports are free there and
// nothing outside is touched. Without one (-no-netns) the ports must be
// free on the machine.
//
// exclusions.txt lists the tests not run, each with its reason; the
// command fails when any other test fails, and prints the counts.
package main

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

//go:embed exclusions.txt
var exclusionsText string

// mochaReporter is the reporter the mocha suites run with (see the file).
//
//go:embed mocha-tap.js
var mochaReporter []byte

// phaseEnv marks the re-executed process that runs inside the namespace;
// its value is the JSON of the prepared suites.
const phaseEnv = "WARREN_PEER_SUITES_RUN"

func main() {
	log.SetFlags(0)
	if spec := os.Getenv(phaseEnv); spec != "" {
		os.Exit(runInside(spec))
	}
	os.Exit(prepareAndRun(os.Args[1:]))
}

// suite is one client library's test suite.
type suite struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // "go" (testing), "ginkgo", "node" (node --test) or "mocha"
	Module string `json:"module,omitempty"`
	Pkg    string `json:"pkg,omitempty"` // package inside the module
	Tags   string `json:"tags,omitempty"`
	// Set by prepare:
	Bin string `json:"bin,omitempty"` // the test binary (mocha: the runner)
	// Reporter is the mocha reporter's path.
	Reporter string   `json:"reporter,omitempty"`
	Dir      string   `json:"dir,omitempty"` // where it runs
	Env      []string `json:"env,omitempty"`
}

var knownSuites = []suite{
	{Name: "amqp091-go", Kind: "go", Module: "github.com/rabbitmq/amqp091-go", Pkg: ".", Tags: "integration",
		Env: []string{"AMQP_URL=amqp://guest:guest@127.0.0.1:5672/"}},
	{Name: "stream-go", Kind: "ginkgo", Module: "github.com/rabbitmq/rabbitmq-stream-go-client", Pkg: "./pkg/stream"},
	{Name: "amqplib", Kind: "node"},
	{Name: "stream-js", Kind: "mocha", Env: []string{
		"RABBITMQ_USER=" + streamJSUser, "RABBITMQ_PASSWORD=" + streamJSPassword, "RABBIT_MQ_TEST_NODES=localhost:5552"}},
}

// plan is what the inside phase runs.
type plan struct {
	Suites  []suite `json:"suites"`
	Work    string  `json:"work"`
	Verbose bool    `json:"verbose"`
}

func prepareAndRun(args []string) int {
	fs := flag.NewFlagSet("peer-suites", flag.ContinueOnError)
	names := fs.String("suites", "amqp091-go,stream-go", "suites to run, comma-separated (amqplib needs -amqplib, stream-js -stream-js)")
	amqplib := fs.String("amqplib", "", "a checkout of github.com/amqp-node/amqplib at v2.0.1: run its suite too")
	streamJS := fs.String("stream-js", "", "a checkout of github.com/coders51/rabbitmq-stream-js-client at v0.6.2, after npm ci: run its suite too")
	noNetns := fs.Bool("no-netns", false, "run in this network namespace (the suites' ports must be free)")
	verbose := fs.Bool("v", false, "show the suites' own output")
	keep := fs.Bool("keep", false, "keep the work directory (copies of the suites, binaries, reports)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	want := strings.Split(*names, ",")
	if *amqplib != "" && !slices.Contains(want, "amqplib") {
		want = append(want, "amqplib")
	}
	if *streamJS != "" && !slices.Contains(want, "stream-js") {
		want = append(want, "stream-js")
	}
	work, err := os.MkdirTemp("", "warren-peer-suites-work-")
	if err != nil {
		log.Print(err)
		return 1
	}
	if !*keep {
		defer os.RemoveAll(work)
	}
	p := plan{Work: work, Verbose: *verbose}
	for _, name := range want {
		i := slices.IndexFunc(knownSuites, func(s suite) bool { return s.Name == name })
		if i < 0 {
			log.Printf("unknown suite %q", name)
			return 2
		}
		s := knownSuites[i]
		start := time.Now()
		switch s.Kind {
		case "go", "ginkgo":
			err = prepareGo(&s, work)
		case "node":
			err = prepareNode(&s, *amqplib)
		case "mocha":
			err = prepareMocha(&s, *streamJS, work)
		}
		if err != nil {
			log.Printf("%s: %v", s.Name, err)
			return 1
		}
		log.Printf("%s: prepared in %v", s.Name, time.Since(start).Round(time.Second))
		p.Suites = append(p.Suites, s)
	}
	spec, err := json.Marshal(p)
	if err != nil {
		log.Print(err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		log.Print(err)
		return 1
	}
	var cmd *exec.Cmd
	if !*noNetns && exec.Command("unshare", "--net", "true").Run() != nil {
		// Not root, or no util-linux: the machine's own ports, if free.
		log.Print("no private network namespace (unshare --net fails): using this one; the suites' ports must be free")
		*noNetns = true
	}
	if *noNetns {
		cmd = exec.Command(self)
	} else {
		cmd = exec.Command("unshare", "--net", self)
	}
	cmd.Env = append(os.Environ(), phaseEnv+"="+string(spec))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		log.Print(err)
		return 1
	}
	return 0
}

// prepareGo copies the suite's module from the module cache (writable,
// as go test wants) and builds its test binary. It needs the network
// (go.mod's versions, the suite's own dependencies).
func prepareGo(s *suite, work string) error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", s.Module).Output()
	if err != nil {
		return fmt.Errorf("go list -m %s: %w", s.Module, err)
	}
	dir, version, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if dir == "" {
		if err := exec.Command("go", "mod", "download", s.Module).Run(); err != nil {
			return fmt.Errorf("go mod download %s: %w", s.Module, err)
		}
		return prepareGo(s, work)
	}
	src := filepath.Join(work, s.Name)
	if err := os.CopyFS(src, os.DirFS(dir)); err != nil {
		return fmt.Errorf("copy %s: %w", dir, err)
	}
	if err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(path, mode)
	}); err != nil {
		return err
	}
	s.Bin = filepath.Join(work, s.Name+".test")
	args := []string{"test", "-c", "-o", s.Bin}
	if s.Tags != "" {
		args = append(args, "-tags", s.Tags)
	}
	build := exec.Command("go", append(args, s.Pkg)...)
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s@%s tests: %v\n%s", s.Module, version, err, out)
	}
	s.Dir = filepath.Join(src, s.Pkg)
	log.Printf("%s: %s@%s", s.Name, s.Module, version)
	return nil
}

// amqplibTests are the amqplib test files the suite runs: the ones that
// talk to a broker.
var amqplibTests = []string{"test/connect.test.js", "test/channel_api.test.js", "test/callback_api.test.js"}

// prepareNode checks an amqplib checkout.
func prepareNode(s *suite, dir string) error {
	if dir == "" {
		return errors.New("needs -amqplib <checkout of amqplib v2.0.1>")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for _, f := range amqplibTests {
		if _, err := os.Stat(filepath.Join(abs, f)); err != nil {
			return fmt.Errorf("%s is not an amqplib checkout: %w", abs, err)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		return err
	}
	s.Dir = abs
	s.Env = []string{"URL=amqp://guest:guest@localhost:5672"}
	return nil
}

// prepareMocha checks a rabbitmq-stream-js-client checkout with its dev
// dependencies installed, and writes the reporter into work.
func prepareMocha(s *suite, dir, work string) error {
	if dir == "" {
		return errors.New("needs -stream-js <checkout of rabbitmq-stream-js-client v0.6.2, after npm ci>")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for _, f := range []string{".mocharc.js", "test/e2e", "test/support/rabbit.ts"} {
		if _, err := os.Stat(filepath.Join(abs, f)); err != nil {
			return fmt.Errorf("%s is not a rabbitmq-stream-js-client checkout: %w", abs, err)
		}
	}
	for _, f := range []string{"node_modules/.bin/mocha", "node_modules/.bin/tsx"} {
		if _, err := os.Stat(filepath.Join(abs, f)); err != nil {
			return fmt.Errorf("%s: no dev dependencies (run npm ci there): %w", abs, err)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		return err
	}
	s.Dir = abs
	s.Bin = filepath.Join(abs, "node_modules/.bin/mocha")
	s.Reporter = filepath.Join(work, "mocha-tap.js")
	return os.WriteFile(s.Reporter, mochaReporter, 0o644)
}

// exclusion is a test the harness does not run.
type exclusion struct {
	suite, test, reason string
}

func parseExclusions(text string) ([]exclusion, error) {
	var out []exclusion
	for i, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[0] == "" || f[1] == "" || strings.TrimSpace(f[2]) == "" {
			return nil, fmt.Errorf("exclusions.txt:%d: want suite<TAB>test<TAB>reason", i+1)
		}
		out = append(out, exclusion{f[0], f[1], f[2]})
	}
	return out, nil
}

// result is one test's outcome.
type result struct {
	name  string
	state string // passed, failed, skipped (by the suite itself)
	// tail is the suite's output before a Go test's failure line, so a
	// failure in CI can be read without rerunning with -v.
	tail string
}

// failureContext is how many lines of output a failed Go test keeps.
const failureContext = 40

// counts summarises a suite's results.
type counts struct {
	passed, failed, skipped, excluded int
	failures                          []string
	tails                             []string // each failure's output, when kept
}

func runInside(spec string) int {
	var p plan
	if err := json.Unmarshal([]byte(spec), &p); err != nil {
		log.Print(err)
		return 1
	}
	if err := exec.Command("ip", "link", "set", "lo", "up").Run(); err != nil {
		// Outside a new namespace (-no-netns) loopback is up already.
		log.Printf("ip link set lo up: %v (continuing)", err)
	}
	excl, err := parseExclusions(exclusionsText)
	if err != nil {
		log.Print(err)
		return 1
	}
	logPath := filepath.Join(p.Work, "warren.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		log.Print(err)
		return 1
	}
	defer logFile.Close()
	logger := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sb, err := startBroker(logger)
	if err != nil {
		log.Printf("start Warren: %v", err)
		return 1
	}
	defer sb.close()

	failed := false
	var summary []string
	for _, s := range p.Suites {
		var ex []exclusion
		for _, e := range excl {
			if e.suite == s.Name {
				ex = append(ex, e)
			}
		}
		start := time.Now()
		if err := sb.setup(s.Name); err != nil {
			log.Printf("%s: set up Warren: %v", s.Name, err)
			failed = true
			continue
		}
		rs, err := runSuite(s, ex, p)
		if err != nil {
			log.Printf("%s: %v", s.Name, err)
			failed = true
		}
		c := counts{excluded: len(ex)}
		for _, r := range rs {
			if slices.ContainsFunc(ex, func(e exclusion) bool { return e.test == r.name }) {
				continue // ran, as the runner cannot skip it (node, a mocha hook): not counted
			}
			switch r.state {
			case "passed":
				c.passed++
			case "skipped":
				c.skipped++
			default:
				c.failed++
				c.failures = append(c.failures, r.name)
				c.tails = append(c.tails, r.tail)
			}
		}
		if c.failed > 0 || len(rs) == 0 {
			failed = true
		}
		line := fmt.Sprintf("%-10s %4d passed, %d failed, %d skipped by the suite, %d excluded (%v)",
			s.Name, c.passed, c.failed, c.skipped, c.excluded, time.Since(start).Round(time.Second))
		summary = append(summary, line)
		log.Print(line)
		for i, f := range c.failures {
			log.Printf("    FAIL %s", f)
			if c.tails[i] != "" {
				log.Printf("      | %s", strings.ReplaceAll(c.tails[i], "\n", "\n      | "))
			}
		}
	}
	log.Print("== peer suites")
	for _, l := range summary {
		log.Print(l)
	}
	if b, _ := os.ReadFile(logPath); len(b) > 0 {
		log.Printf("== Warren's warnings and errors (%s)\n%s", logPath, b)
	}
	if failed {
		return 1
	}
	return 0
}

// suiteTimeout bounds one suite's run.
const suiteTimeout = 40 * time.Minute

// runSuite runs one suite, excluding ex, and returns its results.
func runSuite(s suite, ex []exclusion, p plan) ([]result, error) {
	// A bound on the whole suite, for the runners that have none of
	// their own (node --test, mocha).
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	var cmd *exec.Cmd
	report := filepath.Join(p.Work, s.Name+"-report.json")
	var skip []string
	for _, e := range ex {
		skip = append(skip, regexp.QuoteMeta(e.test))
	}
	switch s.Kind {
	case "go":
		args := []string{"-test.v", "-test.timeout", "20m", "-test.count", "1"}
		if len(skip) > 0 {
			args = append(args, "-test.skip", "^("+strings.Join(skip, "|")+")$")
		}
		cmd = exec.CommandContext(ctx, s.Bin, args...)
	case "ginkgo":
		args := []string{"-test.timeout", "30m", "-ginkgo.no-color", "-ginkgo.json-report", report}
		if p.Verbose {
			args = append(args, "-ginkgo.v")
		}
		if len(skip) > 0 {
			// Ginkgo matches "<suite description> <spec text>".
			desc, err := ginkgoDescription(s, filepath.Join(p.Work, s.Name+"-dry.json"))
			if err != nil {
				return nil, err
			}
			args = append(args, "-ginkgo.skip", "^"+regexp.QuoteMeta(desc)+" ("+strings.Join(skip, "|")+")$")
		}
		cmd = exec.CommandContext(ctx, s.Bin, args...)
	case "node":
		// Node 20's runner cannot skip by name: excluded tests run, and
		// their outcome is not counted.
		args := append([]string{"--test", "--test-reporter=tap", "--test-timeout=10000"}, amqplibTests...)
		cmd = exec.CommandContext(ctx, "node", args...)
	case "mocha":
		// As its npm test ("mocha test", with its .mocharc.js), but
		// with a TAP reporter, and --exit: a failed test leaves its
		// clients open, and mocha would wait for them. --grep matches
		// a test's full title; a failing hook cannot be skipped by it,
		// so an exclusion naming a hook drops its outcome instead.
		args := []string{"--reporter", s.Reporter, "--exit"}
		if len(skip) > 0 {
			args = append(args, "--grep", "^("+strings.Join(skip, "|")+")$", "--invert")
		}
		cmd = exec.CommandContext(ctx, s.Bin, append(args, "test")...)
	}
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	var w io.Writer = io.Discard
	if p.Verbose {
		w = os.Stdout
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var rs []result
	var tap tapParser
	var mocha mochaTAP
	goResult := regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+)`)
	var recent []string // the last failureContext lines
	readErr := readLines(out, maxLine, func(line string) {
		fmt.Fprintln(w, line)
		switch s.Kind {
		case "go":
			if m := goResult.FindStringSubmatch(line); m != nil {
				r := result{name: m[2], state: map[string]string{"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}[m[1]]}
				if r.state == "failed" {
					r.tail = strings.Join(recent, "\n")
				}
				rs = append(rs, r)
			}
			if len(recent) == failureContext {
				recent = recent[1:]
			}
			recent = append(recent, line)
		case "node":
			tap.line(line)
		case "mocha":
			mocha.line(line)
		}
	})
	if readErr != nil {
		log.Printf("%s: reading its output: %v", s.Name, readErr)
	}
	runErr := cmd.Wait()
	switch s.Kind {
	case "ginkgo":
		return readGinkgo(report)
	case "node":
		rs = tap.results()
	case "mocha":
		rs = mocha.results()
	}
	if runErr != nil && len(rs) == 0 {
		return nil, runErr
	}
	return rs, nil
}

// maxLine is where readLines cuts a line. The stream-js suite prints
// errors that embed whole HTTP responses on one line.
const maxLine = 64 << 10

// readLines calls fn with each line of r, without its newline, until EOF;
// a line longer than max is cut to max bytes. It reads everything, so a
// writer never blocks on a full pipe however long its lines.
func readLines(r io.Reader, max int, fn func(string)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		frag, isPrefix, err := br.ReadLine()
		if len(line) < max {
			line = append(line, frag[:min(len(frag), max-len(line))]...)
		}
		if err != nil {
			if len(line) > 0 {
				fn(string(line))
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
		if !isPrefix {
			fn(string(line))
			line = line[:0]
		}
	}
}

// ginkgoDescription reads a Ginkgo suite's description from a dry run.
func ginkgoDescription(s suite, report string) (string, error) {
	cmd := exec.Command(s.Bin, "-ginkgo.dry-run", "-ginkgo.json-report", report)
	cmd.Dir = s.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("dry run: %v\n%s", err, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		return "", err
	}
	var reports []struct{ SuiteDescription string }
	if err := json.Unmarshal(b, &reports); err != nil || len(reports) == 0 {
		return "", fmt.Errorf("%s: no suite description (%v)", report, err)
	}
	return reports[0].SuiteDescription, nil
}

// readGinkgo reads a Ginkgo JSON report: one result per spec, named by
// its containers' texts and its own, space-separated (what
// -ginkgo.skip matches).
func readGinkgo(path string) ([]result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reports []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			LeafNodeType            string
			State                   string
			Failure                 struct{ Message string }
		}
	}
	if err := json.Unmarshal(b, &reports); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var rs []result
	for _, r := range reports {
		for _, sr := range r.SpecReports {
			name := strings.Join(append(slices.Clone(sr.ContainerHierarchyTexts), sr.LeafNodeText), " ")
			state := sr.State
			switch {
			case sr.LeafNodeType != "It":
				if state == "passed" || state == "skipped" {
					continue // suite setup that worked
				}
				name = sr.LeafNodeType + " " + name
			case state == "pending":
				state = "skipped"
			}
			if state != "passed" && state != "skipped" {
				name += ": " + firstLine(sr.Failure.Message)
				state = "failed"
			}
			rs = append(rs, result{name: name, state: state})
		}
	}
	return rs, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
