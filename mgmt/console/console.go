// Package console is Warren's management web console: a single-page
// application in plain JavaScript modules (no build step, no libraries,
// no fonts or scripts from elsewhere) embedded in the binary and served
// by the management API's listener at "/". It talks only to the
// management HTTP API under /api/ with HTTP basic credentials, which it
// keeps in the tab's sessionStorage, as RabbitMQ's management UI does.
//
// index.html is never cached. It loads the modules through an import map
// whose URLs carry a hash of all the files (?v=HASH), so those may be
// cached for good; the same files asked for without the current hash are
// served with no-cache and an ETag.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
)

//go:embed index.html *.js *.css favicon.svg
var files embed.FS

// importMapMarker is the line of index.html replaced by the import map.
const importMapMarker = "<!--importmap-->"

// asset is one file ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the console's files.
type Handler struct {
	version string            // hash of every file
	assets  map[string]*asset // by URL path
	csp     string            // index.html's Content-Security-Policy
	modTime time.Time
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// New returns a Handler over the embedded files.
func New() *Handler {
	h := &Handler{assets: map[string]*asset{}, modTime: time.Now()}
	names, err := fs.Glob(files, "*")
	if err != nil {
		panic(err) // the pattern is constant
	}
	slices.Sort(names)
	all := sha256.New()
	bodies := map[string][]byte{}
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			panic(err) // embedded: cannot fail
		}
		bodies[n] = b
		all.Write([]byte(n))
		all.Write(b)
	}
	h.version = hex.EncodeToString(all.Sum(nil))[:12]

	imports := map[string]string{}
	for _, n := range names {
		if strings.HasSuffix(n, ".js") {
			imports["/"+n] = "/" + n + "?v=" + h.version
		}
	}
	im, _ := json.Marshal(map[string]any{"imports": imports})
	script := string(im)
	sum := sha256.Sum256([]byte(script))
	h.csp = "default-src 'self'; script-src 'self' 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; " +
		"style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
	for n, b := range bodies {
		if n == "index.html" {
			b = bytes.Replace(b, []byte(importMapMarker), []byte(`<script type="importmap">`+script+`</script>`), 1)
			b = bytes.ReplaceAll(b, []byte("{{version}}"), []byte(h.version))
		}
		ct := contentTypes[path.Ext(n)]
		if ct == "" {
			ct = "application/octet-stream"
		}
		tag := sha256.Sum256(b)
		h.assets["/"+n] = &asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(tag[:8]) + `"`}
	}
	h.assets["/"] = h.assets["/index.html"]
	return h
}

// Version is the hash of the console's files that versioned URLs carry.
func (h *Handler) Version() string { return h.version }

// ServeHTTP answers GET and HEAD for the console's files; anything else
// is a 404 or 405 in plain text.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := h.assets[r.URL.Path]
	if a == nil {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("ETag", a.etag)
	switch {
	case a == h.assets["/index.html"]:
		hd.Set("Cache-Control", "no-cache")
		hd.Set("Content-Security-Policy", h.csp)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
	case r.URL.Query().Get("v") == h.version:
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	default:
		hd.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", h.modTime, bytes.NewReader(a.body))
}
