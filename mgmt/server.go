package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/warren-mq/warren/mgmt/console"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/qerr"
	"github.com/warren-mq/warren/superstream"
)

// Config configures a Server.
type Config struct {
	Broker *queues.Broker
	// SuperStreams is the super stream manager the stream front end uses
	// (one per broker: it serialises creation and deletion).
	SuperStreams *superstream.Manager
	// ConsumerGroups lists the stream protocol's single-active-consumer
	// groups (nil: none).
	ConsumerGroups func() []superstream.GroupInfo
	Logger         *slog.Logger
	// Node is the node name shown in objects ("warren@<host>" by default).
	Node string
	// Listeners are the broker's listeners, for the overview and the
	// port-listener health check.
	Listeners []Listener
	// DataDir is the broker's data directory, whose file system's free
	// space the node object shows ("" : not shown).
	DataDir string
	// StatsInterval is how often rates are sampled (RabbitMQ's
	// collect_statistics_interval; default 5 s; negative: never, rates
	// stay 0).
	StatsInterval time.Duration
	// Peers returns the cluster's other nodes as this node sees them
	// (nil: a single node). /api/nodes lists them after this node.
	Peers func() []Peer
	// Forget removes another node from the cluster for good (DELETE
	// /api/nodes/{node}, Warren's; warrenctl forget_cluster_node); nil:
	// a single node. Its errors: queues.ErrNotFound (not a node of the
	// cluster) answers 404, queues.ErrNotApplied 503, others 400 with
	// their text (the node is running, or is this one).
	Forget func(ctx context.Context, node string) error
}

// Peer is another node of the cluster.
type Peer struct {
	Name    string
	Running bool // reachable from this node
}

// Listener is one of the broker's listening sockets.
type Listener struct {
	Protocol string // "amqp", "stream", "http", as RabbitMQ names them
	Addr     net.Addr
}

// Server serves the management HTTP API.
type Server struct {
	cfg    Config
	b      *queues.Broker
	log    *slog.Logger
	routes []route
	rates  *sampler
	start  time.Time
	ui     *console.Handler // the web console, at "/"

	mu     sync.Mutex
	http   *http.Server
	closed bool // Close was called: a later Serve returns at once
}

// New returns a Server; Serve starts it.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Node == "" {
		host, _ := os.Hostname()
		if i := strings.IndexByte(host, '.'); i > 0 {
			host = host[:i]
		}
		cfg.Node = "warren@" + host
	}
	if cfg.StatsInterval == 0 {
		cfg.StatsInterval = 5 * time.Second
	}
	if cfg.SuperStreams == nil {
		cfg.SuperStreams = superstream.NewManager(cfg.Broker)
	}
	s := &Server{cfg: cfg, b: cfg.Broker, log: cfg.Logger, start: time.Now(), ui: console.New()}
	s.rates = newSampler(s, cfg.StatsInterval)
	s.register()
	return s
}

// Serve serves HTTP on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil // Close came first
	}
	s.http = hs
	s.mu.Unlock()
	s.rates.start()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving and the rate sampler.
func (s *Server) Close() error {
	s.rates.stop()
	s.mu.Lock()
	s.closed = true
	hs := s.http
	s.mu.Unlock()
	if hs != nil {
		return hs.Close()
	}
	return nil
}

// access is what an endpoint requires of the user.
type access uint8

const (
	accessManagement access = iota // any management tag
	accessPolicymaker
	accessMonitoring
	accessAdmin
)

// route is one endpoint: a method and a path of literal and {variable}
// segments. Variables are matched against the unescaped segments of the
// escaped path, so "%2F" is a vhost named "/".
type route struct {
	method string
	segs   []string
	need   access
	h      func(*request) error
}

func (s *Server) handle(method, pattern string, need access, h func(*request) error) {
	s.routes = append(s.routes, route{method: method, segs: strings.Split(strings.Trim(pattern, "/"), "/"), need: need, h: h})
}

// request is one API call being served.
type request struct {
	s    *Server
	w    http.ResponseWriter
	r    *http.Request
	user queues.User
	vars map[string]string
}

// Var returns a path variable.
func (q *request) Var(name string) string { return q.vars[name] }

// apiError is an error answer: RabbitMQ's {"error": ..., "reason": ...}.
type apiError struct {
	code   int
	err    string
	reason string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.code, e.err, e.reason) }

func errNotFound() error { return &apiError{http.StatusNotFound, "Object Not Found", "Not Found"} }
func errBadRequest(reason string) error {
	return &apiError{http.StatusBadRequest, "bad_request", reason}
}

// errUnavailable is a change the cluster did not apply (no quorum, no
// leader): 503, and the client may retry, as after RabbitMQ's timeouts of
// a Khepri command.
func errUnavailable(err error) error {
	return &apiError{http.StatusServiceUnavailable, "timeout", err.Error()}
}

// badRequestOr is a 400 with err's text, or a 503 when err is a change
// the cluster did not apply.
func badRequestOr(err error) error {
	if errors.Is(err, queues.ErrNotApplied) {
		return errUnavailable(err)
	}
	return errBadRequest(err.Error())
}

func errNotAuthorised(reason string) error {
	return &apiError{http.StatusUnauthorized, "not_authorised", reason}
}

// ServeHTTP routes, authenticates and answers: paths under /api/ are the
// API (an unknown one is a JSON 404), the others the web console's files.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; p != "/api" && !strings.HasPrefix(p, "/api/") {
		s.ui.ServeHTTP(w, r)
		return
	}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("management API handler panicked", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			writeError(w, &apiError{http.StatusInternalServerError, "internal_server_error", fmt.Sprint(v)})
		}
	}()
	segs, ok := splitPath(r.URL.EscapedPath())
	if !ok {
		writeError(w, errNotFound())
		return
	}
	var allowed []string
	for i := range s.routes {
		rt := &s.routes[i]
		vars, ok := rt.match(segs)
		if !ok {
			continue
		}
		if rt.method != r.Method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
			allowed = append(allowed, rt.method)
			continue
		}
		q := &request{s: s, w: w, r: r, vars: vars}
		if err := s.authenticate(q, rt.need); err != nil {
			writeError(w, err)
			return
		}
		if err := rt.h(q); err != nil {
			writeError(w, s.translate(err))
		}
		return
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, &apiError{http.StatusMethodNotAllowed, "method_not_allowed", "Method Not Allowed"})
		return
	}
	writeError(w, errNotFound())
}

func splitPath(escaped string) ([]string, bool) {
	raw := strings.Split(strings.Trim(escaped, "/"), "/")
	out := make([]string, len(raw))
	for i, seg := range raw {
		v, err := url.PathUnescape(seg)
		if err != nil {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

func (rt *route) match(segs []string) (map[string]string, bool) {
	if len(segs) != len(rt.segs) {
		return nil, false
	}
	var vars map[string]string
	for i, p := range rt.segs {
		if len(p) > 2 && p[0] == '{' && p[len(p)-1] == '}' {
			if vars == nil {
				vars = map[string]string{}
			}
			vars[p[1:len(p)-1]] = segs[i]
			continue
		}
		if p != segs[i] {
			return nil, false
		}
	}
	return vars, true
}

// authenticate checks HTTP basic credentials against the broker's users
// and the tags the endpoint needs, with RabbitMQ's answers.
func (s *Server) authenticate(q *request, need access) error {
	name, pass, ok := q.r.BasicAuth()
	if !ok {
		q.w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
		return &apiError{code: http.StatusUnauthorized}
	}
	u, err := s.b.Authenticate(name, pass, remoteAddr(q.r))
	if err != nil {
		return &apiError{http.StatusUnauthorized, "not_authorized", "Login failed"}
	}
	q.user = *u
	if !isManagement(u) {
		return errNotAuthorised("Not management user")
	}
	switch need {
	case accessAdmin:
		if !u.HasTag("administrator") {
			return errNotAuthorised("Not administrator user")
		}
	case accessMonitoring:
		if !u.HasTag("administrator") && !u.HasTag("monitoring") {
			return errNotAuthorised("Not monitor user")
		}
	case accessPolicymaker:
		if !u.HasTag("administrator") && !u.HasTag("policymaker") {
			return errNotAuthorised("Not policymaker user")
		}
	}
	return nil
}

func isManagement(u *queues.User) bool {
	for _, t := range []string{"administrator", "monitoring", "policymaker", "management"} {
		if u.HasTag(t) {
			return true
		}
	}
	return false
}

// seesAllVHosts: administrators and monitoring users see every virtual
// host; other management users those they have permissions in.
func (q *request) seesAllVHosts() bool {
	return q.user.HasTag("administrator") || q.user.HasTag("monitoring")
}

// canSee reports whether the user may see objects of vhost.
func (q *request) canSee(vhost string) bool {
	if q.seesAllVHosts() {
		return q.s.b.VHostExists(vhost)
	}
	return q.s.b.CheckVHostAccess(q.user.Name, vhost) == nil
}

// vhost returns the {vhost} path variable after checking it exists (404)
// and that the user may see it (401, as RabbitMQ).
func (q *request) vhost() (string, error) {
	v := q.Var("vhost")
	if !q.s.b.VHostExists(v) {
		return "", errNotFound()
	}
	if !q.canSee(v) {
		return "", errNotAuthorised("User not authorised to access virtual host")
	}
	return v, nil
}

// visibleVHosts returns the vhosts the user may see, by name.
func (q *request) visibleVHosts() ([]queues.VHost, error) {
	all, err := q.s.b.VHosts()
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, v := range all {
		if q.seesAllVHosts() || q.s.b.CheckVHostAccess(q.user.Name, v.Name) == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// checkPerm checks the user's configure, write or read permission on a
// resource, as the AMQP front end would.
func (q *request) checkPerm(vhost string, kind queues.Perm, resource string) error {
	if err := q.s.b.CheckPermission(q.user.Name, vhost, kind, resource); err != nil {
		return errNotAuthorised(fmt.Sprintf("access to %s in vhost '%s' refused for user '%s'", resource, vhost, q.user.Name))
	}
	return nil
}

func remoteAddr(r *http.Request) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		return &net.TCPAddr{} // not loopback: loopback-only users are refused
	}
	return a
}

// translate maps the model's errors onto HTTP answers.
func (s *Server) translate(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	switch {
	case errors.Is(err, queues.ErrNotFound):
		return errNotFound().(*apiError)
	case errors.Is(err, queues.ErrAccessRefused):
		return errNotAuthorised(err.Error()).(*apiError)
	case errors.Is(err, queues.ErrNotApplied):
		return errUnavailable(err).(*apiError)
	}
	var qe *qerr.Error
	if errors.As(err, &qe) {
		return badOr(err).(*apiError)
	}
	s.log.Warn("management API error", "err", err)
	return &apiError{http.StatusInternalServerError, "internal_server_error", err.Error()}
}

func writeError(w http.ResponseWriter, err error) {
	ae, _ := err.(*apiError)
	if ae == nil {
		ae = &apiError{http.StatusInternalServerError, "internal_server_error", err.Error()}
	}
	if ae.err == "" {
		w.WriteHeader(ae.code)
		return
	}
	writeJSON(w, ae.code, map[string]string{"error": ae.err, "reason": ae.reason})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal_server_error","reason":"encoding"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(code)
	w.Write(b)
}

// reply answers 200 with v as JSON.
func (q *request) reply(v any) error {
	writeJSON(q.w, http.StatusOK, v)
	return nil
}

// noContent answers 204 (or 201 when created).
func (q *request) noContent(created bool) error {
	if created {
		q.w.WriteHeader(http.StatusCreated)
	} else {
		q.w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

// maxBody bounds request bodies (definitions files can be large).
const maxBody = 64 << 20

// decode reads a JSON request body into v; an empty body leaves v as is.
// Malformed JSON is RabbitMQ's 400 not_json.
func (q *request) decode(v any) error {
	body, err := io.ReadAll(io.LimitReader(q.r.Body, maxBody+1))
	if err != nil {
		return badRequestOr(err)
	}
	if len(body) > maxBody {
		return &apiError{http.StatusRequestEntityTooLarge, "bad_request", "request body too large"}
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	d := json.NewDecoder(strings.NewReader(string(body)))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return errBadRequest("not_json")
	}
	return nil
}
