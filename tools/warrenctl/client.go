package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxResponse bounds a response body; definitions of a large broker are
// the biggest thing the API returns.
const maxResponse = 1 << 30

// client calls the management HTTP API.
type client struct {
	base     string // scheme://host[:port][/prefix], no trailing slash
	user     string
	password string
	hc       *http.Client
	timeout  time.Duration // for messages; the deadline is on the context
	verb     string        // for messages
}

// apiPath builds an /api path from segments, each escaped on its own: the
// vhost "/" becomes %2F, a connection name's spaces %20.
func apiPath(segments ...string) string {
	var b strings.Builder
	b.WriteString("/api")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// request is one call; path is already escaped (apiPath).
type request struct {
	method string
	path   string
	query  url.Values
	header http.Header
	body   []byte // sent as application/json; nil sends no body
}

// do sends a request and returns the body of a 2xx response. Anything else
// is an error: *httpError for an error status, *exitError for a server that
// cannot be reached or did not answer in time.
func (c *client) do(ctx context.Context, r request) ([]byte, error) {
	uri := r.path
	if len(r.query) > 0 {
		uri += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.base+uri, body)
	if err != nil {
		return nil, failf(exitUsage, "invalid request %s %s: %v", r.method, c.base+uri, err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "warrenctl")
	req.SetBasicAuth(c.user, c.password)

	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, r.method, uri, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, c.transportError(ctx, r.method, uri, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newHTTPError(r.method, uri, resp.StatusCode, data)
	}
	return data, nil
}

// transportError classifies a failure to get a response.
func (c *client) transportError(ctx context.Context, method, uri string, err error) error {
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return failf(exitTempFail, "operation %s timed out after %v (%s %s)", c.verb, c.timeout, method, uri)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return failf(exitTempFail, "operation %s interrupted (%s %s)", c.verb, method, uri)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return failf(exitUnavailable, "unable to reach the management API at %s: %v", c.base, err)
}

// get returns the JSON document at path.
func (c *client) get(ctx context.Context, path string) (jv, error) {
	data, err := c.do(ctx, request{method: http.MethodGet, path: path})
	if err != nil {
		return jv{}, err
	}
	v, err := parseJSON(data)
	if err != nil {
		return jv{}, failf(exitSoftware, "unexpected response to GET %s: not JSON: %.80q", path, data)
	}
	return v, nil
}

// getList returns the JSON array at path.
func (c *client) getList(ctx context.Context, path string) ([]jv, error) {
	v, err := c.get(ctx, path)
	if err != nil {
		return nil, err
	}
	if v.kind != kArray {
		return nil, failf(exitSoftware, "unexpected response to GET %s: not a JSON array", path)
	}
	return v.vals, nil
}

// send makes a request with a JSON body (nil: none) and discards the
// response body.
func (c *client) send(ctx context.Context, method, path string, body any) error {
	r := request{method: method, path: path}
	if body != nil {
		// An Encoder, unlike json.Marshal, can leave <, > and & alone:
		// patterns and definitions go out as the user typed them.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(body); err != nil {
			return fmt.Errorf("warrenctl: encode %s %s: %w", method, path, err)
		}
		r.body = bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	}
	_, err := c.do(ctx, r)
	return err
}
