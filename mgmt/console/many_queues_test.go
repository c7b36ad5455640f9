package console_test

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/warren-mq/warren/mgmt/mgmttest"
	"github.com/warren-mq/warren/queues"
)

// Ensure the queues page pages, filters and sorts 10,000 queues on the
// server: every request it makes asks for one page, never all of them;
// and that the 5 s refresh neither stacks behind a slow answer nor runs
// while the page is hidden.
func TestConsoleTenThousandQueues(t *testing.T) {
	if chromiumPath() == "" {
		newBrowser(t, nil) // skips, saying why
	}
	// Each queue is a directory and files: on tmpfs 10,000 take about 3 s,
	// on this machine's disk about 20 s.
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "warren-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			t.Setenv("TMPDIR", "/dev/shm")
		}
	}
	tb := mgmttest.Start(t)
	const n = 10_000
	for i := range n {
		_, _, _, err := tb.Broker.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "/", Name: fmt.Sprintf("q-%05d", i), Durable: false}, Owner: t})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Three messages in q-01234, the deepest queue.
	q, err := tb.Broker.Queue("/", "q-01234")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		done := make(chan error, 1)
		q.Publish(queues.EncodeRecord(nil, &queues.Message{RoutingKey: "q-01234", Props: []byte{0, 0}, Body: fmt.Appendf(nil, "m%d", i)}), false, func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	b := newBrowser(t, tb)
	b.do("open the console", chromedp.Navigate(tb.URL+"/#/queues"))
	b.login("guest", "guest")
	firstRow := "#queues-table tbody tr:first-child td.name"
	b.waitText("#queues-summary", "1\u201350 of 10,000 queues and streams")
	b.waitText("#queues-page", "Page 1 of 200")
	b.waitText(firstRow, "q-00000")
	b.shot("01-first-page")

	// Forward a page, then the last page.
	b.do("next page", click("#queues-next"))
	b.waitText("#queues-page", "Page 2 of 200")
	b.waitText(firstRow, "q-00050")
	b.waitText("#queues-summary", "51\u2013100 of 10,000 queues and streams")
	b.do("last page", click("#queues-last"))
	b.waitText("#queues-page", "Page 200 of 200")
	b.waitText("#queues-table tbody tr:last-child td.name", "q-09999")

	// Filter by name (back to page 1), then by a regular expression.
	b.do("filter", b.fill("#queues-filter", "q-0424"))
	b.waitText("#queues-summary", "1\u201310 of 10 queues and streams (filtered from 10,000)")
	b.waitText(firstRow, "q-04240")
	b.shot("02-filtered")
	b.do("regex", click("#queues-regex"), b.fill("#queues-filter", "^q-0(1234|9999)$"))
	b.waitText("#queues-summary", "1\u20132 of 2 queues and streams (filtered from 10,000)")
	b.waitText("#queues-table tbody tr:last-child td.name", "q-09999")
	// A bad expression is told, not thrown. The page's 5 s refresh may
	// ask once more with it before the filter is cleared (a slow browser
	// under -race did, in CI).
	b.expect(400, "/api/queues")
	b.expect(400, "/api/queues")
	b.do("bad regex", b.fill("#queues-filter", "q-(("))
	b.waitContains(".filter-error", "Not a valid regular expression")
	b.do("clear the filter", click("#queues-regex"), b.fill("#queues-filter", ""))
	b.waitText("#queues-summary", "1\u201350 of 10,000 queues and streams")

	// Sort: by name descending, then by total messages descending.
	b.clickText("#queues-table th button", "Name \u25b2")
	b.waitText(firstRow, "q-09999")
	b.clickText("#queues-table th button", "Total")
	b.waitText("#queues-table th.sorted", "Total \u25b2")
	b.clickText("#queues-table th button", "Total \u25b2")
	b.waitText(firstRow, "q-01234")
	b.waitText("#queues-table tbody tr:first-child td.messages", "3")
	b.shot("03-sorted-by-depth")

	// A refresh slower than the 5 s period is not stacked: the page's
	// fetch is wrapped so the next /api/queues answer takes 5.5 s, and
	// no other /api/queues request starts meanwhile although the 5 s
	// timer fires during it.
	b.do("slow the next answer", chromedp.Evaluate[chromedp.Void](`(() => {
		const w = window.__slow = { started: 0, duringSlow: -1 };
		const orig = window.fetch;
		window.fetch = async (url, opts) => {
			if (!String(url).startsWith('/api/queues')) return orig(url, opts);
			w.started++;
			if (w.started > 1) return orig(url, opts);
			await new Promise((r) => setTimeout(r, 5500));
			w.duringSlow = w.started;
			return orig(url, opts);
		};
	})()`))
	b.do("next page, slowly", click("#queues-next"))
	b.waitJS("the slow refresh's end", `window.__slow.duringSlow >= 1`)
	if n, _ := chromedp.Run(b.ctx, chromedp.Evaluate[int](`window.__slow.duringSlow`)); n != 1 {
		t.Fatalf("%d /api/queues requests started during a slow refresh, want 1", n)
	}
	b.waitText("#queues-page", "Page 2 of 200")

	// A hidden page does not refresh: with document.visibilityState
	// hidden for 5.5 s (more than a period), no request starts; shown
	// again, it refreshes at once.
	b.do("hide the page", chromedp.Evaluate[chromedp.Void](`(() => {
		const w = window.__slow;
		w.hidden = true;
		w.startedHidden = w.started;
		Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (w.hidden ? 'hidden' : 'visible') });
		document.dispatchEvent(new Event('visibilitychange'));
		setTimeout(() => { w.afterPeriod = w.started; }, 5500);
	})()`))
	b.waitJS("a period hidden", `window.__slow.afterPeriod !== undefined`)
	if n, _ := chromedp.Run(b.ctx, chromedp.Evaluate[int](`window.__slow.afterPeriod - window.__slow.startedHidden`)); n != 0 {
		t.Fatalf("%d /api/queues requests while the page was hidden", n)
	}
	b.do("show the page", chromedp.Evaluate[chromedp.Void](`window.__slow.hidden = false; document.dispatchEvent(new Event('visibilitychange'))`))
	b.waitJS("a refresh once shown", `window.__slow.started > window.__slow.afterPeriod`)

	// The page fetched one page at a time: every /api/queues request was
	// paginated with at most 500 items.
	reqs := b.queueRequests()
	if len(reqs) < 8 {
		t.Fatalf("only %d /api/queues requests seen", len(reqs))
	}
	for _, r := range reqs {
		u, err := url.Parse(r)
		if err != nil {
			t.Fatal(err)
		}
		qs := u.Query()
		size, err := strconv.Atoi(qs.Get("page_size"))
		if qs.Get("page") == "" || err != nil || size > 500 || !strings.Contains(qs.Get("columns"), "name") {
			t.Errorf("unpaginated request %s", r)
		}
	}
}
