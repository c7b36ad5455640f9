package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/warren-mq/warren/mgmt/mgmttest"
)

// waitFor bounds each wait for the page; the console refreshes every
// 5 s, so a value that needs a refresh shows within about 5 s.
const waitFor = 15 * time.Second

// chromiumPath returns Debian's chromium, or "" when it is not installed.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	return ""
}

// browser is a headless Chromium tab on the console of a test broker. It
// records every JavaScript console error, uncaught exception, and failed
// or refused request to the broker that the test did not expect; the test
// fails on any of them when it ends.
type browser struct {
	t         *testing.T
	tb        *mgmttest.Broker
	ctx       context.Context // the tab; cancelled at cleanup
	artifacts string

	mu struct {
		sync.Mutex
		problems []string
		expected map[string]int    // "status path-prefix" → how many more may happen
		urls     map[string]string // by network request id, for failures
		apiGets  []string          // every /api/queues request's URL
	}
}

func newBrowser(t *testing.T, tb *mgmttest.Broker) *browser {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("SKIPPED: the web console's browser tests need Chromium, which is not installed. " +
			"Install it with `apt-get install -y --no-install-recommends chromium` (.ci/run does this).")
	}
	b := &browser{t: t, tb: tb}
	b.mu.expected = map[string]int{}
	b.mu.urls = map[string]string{}
	b.artifacts = os.Getenv("WARREN_TEST_ARTIFACTS")
	if b.artifacts == "" {
		b.artifacts = filepath.Join(t.TempDir(), "screenshots")
	}
	b.artifacts = filepath.Join(b.artifacts, t.Name())
	if err := os.MkdirAll(b.artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots go to %s", b.artifacts)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(b.listen))
	b.ctx = ctx
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // stops Chromium and removes its profile
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.mu.problems {
			t.Errorf("browser: %s", p)
		}
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("starting Chromium %s: %v", path, err)
	}
	return b
}

// listen runs in the tab's event loop: it only records.
func (b *browser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				if a.Description != "" {
					args = append(args, a.Description)
				} else {
					args = append(args, string(a.Value))
				}
			}
			b.mu.problems = append(b.mu.problems, "console."+string(ev.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		b.mu.problems = append(b.mu.problems, fmt.Sprintf("uncaught exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
	case *log.EventEntryAdded:
		// Network entries ("Failed to load resource") are judged below,
		// against what the test expected.
		if ev.Entry.Level == log.EntryLevelError && ev.Entry.Source != log.EntrySourceNetwork {
			b.mu.problems = append(b.mu.problems, fmt.Sprintf("log %s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
		}
	case *network.EventRequestWillBeSent:
		b.mu.urls[string(ev.RequestID)] = ev.Request.URL
		if strings.HasPrefix(ev.Request.URL, b.tb.URL+"/api/queues") {
			b.mu.apiGets = append(b.mu.apiGets, ev.Request.URL)
		}
	case *network.EventResponseReceived:
		u := ev.Response.URL
		if !strings.HasPrefix(u, b.tb.URL) || ev.Response.Status < 400 {
			return
		}
		path := strings.TrimPrefix(u, b.tb.URL)
		for k, n := range b.mu.expected {
			status, prefix, _ := strings.Cut(k, " ")
			if n > 0 && status == fmt.Sprint(ev.Response.Status) && strings.HasPrefix(path, prefix) {
				b.mu.expected[k] = n - 1
				return
			}
		}
		b.mu.problems = append(b.mu.problems, fmt.Sprintf("unexpected HTTP %d for %s", ev.Response.Status, path))
	case *network.EventLoadingFailed:
		u := b.mu.urls[string(ev.RequestID)]
		if strings.HasPrefix(u, b.tb.URL) && !ev.Canceled {
			b.mu.problems = append(b.mu.problems, fmt.Sprintf("request to %s failed: %s %s", u, ev.ErrorText, ev.BlockedReason))
		}
	}
}

// expect allows one answer with status to a path starting with prefix.
func (b *browser) expect(status int, prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.expected[fmt.Sprint(status, " ", prefix)]++
}

// queueRequests returns the URLs of the console's /api/queues requests.
func (b *browser) queueRequests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.mu.apiGets...)
}

// do runs actions with a timeout.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("failed-" + sanitize(what))
		b.t.Fatalf("%s: %v", what, err)
	}
}

// waitJS polls a JavaScript expression until it is true.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(waitFor))); err != nil {
		b.shot("failed-" + sanitize(what))
		got, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('main')?.innerText?.slice(0, 2000) ?? document.body.innerText.slice(0, 2000)`))
		b.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, got)
	}
}

// text returns the text of the first element matching a CSS selector.
func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.innerText ?? ''`, sel)))
	if err != nil {
		b.t.Fatal(err)
	}
	return strings.TrimSpace(s)
}

// waitText waits until the element's text is want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%s to read %q", sel, want),
		fmt.Sprintf(`(document.querySelector(%q)?.innerText ?? '').trim() === %q`, sel, want))
}

// waitContains waits until the element's text contains want.
func (b *browser) waitContains(sel, want string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%s to contain %q", sel, want),
		fmt.Sprintf(`(document.querySelector(%q)?.innerText ?? '').includes(%q)`, sel, want))
}

// statValue is the big number of a stat box.
func statValue(id string) string { return "#" + id + " .stat-value" }

// visit goes to a console route (the part after #) and waits for sel.
func (b *browser) visit(route, sel string) {
	b.t.Helper()
	b.do("visit "+route, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, "#"+route)),
		chromedp.WaitVisible(chromedp.CSS(sel)))
}

// fill waits for a form control and sets its value as typing would
// (input and change events).
func (b *browser) fill(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); })()`,
		sel, value)))
}

// click clicks the first element matching a CSS selector.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)
}

// clickText clicks the element matching sel whose text is text (a
// button or a link), from JavaScript.
func (b *browser) clickText(sel, text string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%s %q to click", sel, text), fmt.Sprintf(
		`(() => { const e = [...document.querySelectorAll(%q)].find((x) => x.innerText.trim() === %q); if (!e) return false; e.click(); return true; })()`, sel, text))
}

// clickInRow clicks the button or link with text text in the first row
// of the table in sel whose text contains row.
func (b *browser) clickInRow(sel, row, text string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%q in the %q row of %s", text, row, sel), fmt.Sprintf(
		`(() => { const r = [...document.querySelectorAll(%q + ' tbody tr')].find((tr) => tr.innerText.includes(%q)); if (!r) return false; const e = [...r.querySelectorAll('button, a')].find((x) => x.innerText.trim() === %q); if (!e) return false; e.click(); return true; })()`,
		sel, row, text))
}

// shot saves a PNG of the whole page as name.png in the artifacts
// directory.
func (b *browser) shot(name string) {
	b.t.Helper()
	buf, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.artifacts, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// docShot saves a viewport PNG (1280×800) for the README into
// $WARREN_CONSOLE_SCREENSHOTS (relative to the repository), when set.
func (b *browser) docShot(name string) {
	b.t.Helper()
	dir := os.Getenv("WARREN_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) { // relative to the repository, not the package
		wd, err := os.Getwd()
		if err != nil {
			b.t.Fatal(err)
		}
		for root := wd; ; root = filepath.Dir(root) {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				dir = filepath.Join(root, dir)
				break
			}
			if filepath.Dir(root) == root {
				b.t.Fatal("no go.mod above " + wd)
			}
		}
	}
	b.do("scroll to top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	buf, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("README screenshot %s", filepath.Join(dir, name+".png"))
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, s)
}

// login logs in from the log-in form.
func (b *browser) login(user, pass string) {
	b.t.Helper()
	b.do("log in as "+user, chromedp.WaitVisible(chromedp.CSS("#login")),
		b.fill("#login-user", user), b.fill("#login-password", pass), click("#login button[type=submit]"))
}

// apiStatus calls the management API as guest and returns the status.
func apiStatus(t *testing.T, tb *mgmttest.Broker, method, path string) int {
	t.Helper()
	req, err := http.NewRequest(method, tb.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// apiCall calls the management API as guest and decodes the answer.
func apiCall(t *testing.T, tb *mgmttest.Broker, method, path string, body any, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, tb.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}
