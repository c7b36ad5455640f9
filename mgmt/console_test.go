package mgmt

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// Ensure the web console's files are served at / beside the API, with
// their types and caching, and that unknown API paths stay JSON 404s.
func TestConsoleServing(t *testing.T) {
	tb := startBroker(t)
	get := func(path string, hdr ...string) resp {
		t.Helper()
		return tb.call("GET", path, "", "", nil, hdr...)
	}

	idx := get("/")
	want(t, idx, 200)
	if ct := idx.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("index Content-Type %q", ct)
	}
	if cc := idx.header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("index Cache-Control %q, want no-cache", cc)
	}
	v := tb.api.ui.Version()
	body := string(idx.body)
	if !strings.Contains(body, `src="/app.js?v=`+v+`"`) || !strings.Contains(body, `"/chart.js":"/chart.js?v=`+v+`"`) {
		t.Fatalf("index does not load the versioned modules:\n%s", body)
	}
	// The import map is the one inline script, allowed by its hash.
	m := regexp.MustCompile(`<script type="importmap">(.*?)</script>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no import map")
	}
	sum := sha256.Sum256([]byte(m[1]))
	csp := idx.header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") || !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("CSP %q does not allow the import map", csp)
	}

	for path, ct := range map[string]string{
		"/app.js": "text/javascript; charset=utf-8", "/app.css": "text/css; charset=utf-8", "/favicon.svg": "image/svg+xml",
	} {
		r := get(path + "?v=" + v)
		want(t, r, 200)
		if got := r.header.Get("Content-Type"); got != ct {
			t.Errorf("%s Content-Type %q, want %q", path, got, ct)
		}
		if cc := r.header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("%s?v= Cache-Control %q", path, cc)
		}
		r = get(path)
		if cc := r.header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s without the version: Cache-Control %q, want no-cache", path, cc)
		}
		want(t, get(path, "If-None-Match", r.header.Get("ETag")), http.StatusNotModified)
	}

	nf := get("/no-such-file.js")
	want(t, nf, 404)
	if ct := nf.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("console 404 Content-Type %q", ct)
	}
	want(t, tb.call("POST", "/", "", "", "x"), http.StatusMethodNotAllowed)
	// The API's own answers are untouched.
	want(t, tb.guest("GET", "/api/no-such-thing", nil), 404, "Object Not Found", "Not Found")
	want(t, tb.guest("GET", "/api", nil), 404, "Object Not Found", "Not Found")
	want(t, tb.guest("GET", "/api/overview", nil), 200)
	want(t, tb.call("GET", "/api/overview", "", "", nil), 401)
}
