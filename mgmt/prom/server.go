// Package prom is Warren's Prometheus endpoint, as RabbitMQ's
// rabbitmq_prometheus plugin serves it on 15692: /metrics (aggregated:
// one sample per metric for the node), /metrics/per-object (one per
// queue, stream, channel and connection) and /metrics/detailed (only
// the families asked for with ?family=, filtered by ?vhost= and
// ?queue=<regex>, prefixed rabbitmq_detailed_). Names, types, help texts
// and labels are RabbitMQ 4.x's where RabbitMQ has the metric, so its
// Grafana dashboards (RabbitMQ-Overview, RabbitMQ-Stream) work as they
// are; what only Warren measures is prefixed warren_.
//
// Nothing is counted for the endpoint: a scrape reads the counters the
// protocol front ends and the logs keep anyway (queues.Counters,
// osiris.Metrics, the queues' and streams' own statistics) and the
// broker's connection registry.
package prom

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/warren-mq/warren/queues"
)

// Config configures a Server.
type Config struct {
	Broker *queues.Broker
	// Node is the rabbitmq_node label ("warren@host"); Cluster the
	// rabbitmq_cluster label (default: Node, as the management API's
	// cluster_name).
	Node, Cluster string
	// Version is the rabbitmq_version label of rabbitmq_build_info.
	Version string
	// DataDir is where disk_space_available_bytes is measured.
	DataDir string
	Logger  *slog.Logger
	// Started is when the node started (erlang_uptime_seconds); zero:
	// when New was called.
	Started time.Time
}

// Server answers scrapes. It is an http.Handler; Serve runs it on a
// listener.
type Server struct {
	cfg    Config
	log    *slog.Logger
	agg    http.Handler // /metrics
	perObj http.Handler // /metrics/per-object

	mu     sync.Mutex
	hs     *http.Server
	closed bool

	idMu sync.Mutex
	id   string // the permanent cluster id, once read (data.go)
}

// maxQueueFilter bounds the queue regex of /metrics/detailed, as
// RabbitMQ does.
const maxQueueFilter = 2000

// New makes a Server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Cluster == "" {
		cfg.Cluster = cfg.Node
	}
	if cfg.Version == "" {
		cfg.Version = "4.2.0"
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	s.agg = s.handler(s.registry(&scrape{s: s, mode: modeAggregated}, true))
	s.perObj = s.handler(s.registry(&scrape{s: s, mode: modePerObject}, true))
	return s
}

// registry is a registry with the collector c and, for the two general
// endpoints, the process and Go runtime collectors (RabbitMQ's
// prometheus_process_collector gives the same process_ names).
func (s *Server) registry(c prometheus.Collector, process bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if process {
		reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg.MustRegister(collectors.NewGoCollector())
	}
	return reg
}

func (s *Server) handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      slogAdapter{s.log},
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// ServeHTTP routes a scrape.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "/metrics":
		s.agg.ServeHTTP(w, r)
	case "/metrics/per-object":
		s.perObj.ServeHTTP(w, r)
	case "/metrics/detailed":
		sc, msg := s.detailed(r)
		if sc == nil {
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		s.handler(s.registry(sc, false)).ServeHTTP(w, r)
	case "":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<html><head><title>Warren Prometheus exporter</title></head><body><h1>Warren Prometheus exporter</h1><p><a href="/metrics">/metrics</a> · <a href="/metrics/per-object">/metrics/per-object</a> · /metrics/detailed?family=...</p></body></html>`))
	default:
		http.Error(w, "Unknown Registry", http.StatusNotFound)
	}
}

// detailed reads /metrics/detailed's filters: family (repeated; unknown
// names are ignored), vhost (repeated; unknown vhosts are ignored) and
// queue (one regular expression). It returns nil and RabbitMQ's text
// for a bad queue filter.
func (s *Server) detailed(r *http.Request) (*scrape, string) {
	q := r.URL.Query()
	sc := &scrape{s: s, mode: modeDetailed, families: map[string]bool{}}
	for _, f := range q["family"] {
		sc.families[f] = true
	}
	if vs, ok := q["vhost"]; ok {
		sc.vhosts = map[string]bool{}
		for _, v := range vs {
			sc.vhosts[v] = true
		}
	}
	switch qs := q["queue"]; {
	case len(qs) > 1:
		return nil, "Only one 'queue' query parameter is allowed"
	case len(qs) == 1 && qs[0] != "":
		if len(qs[0]) > maxQueueFilter {
			return nil, "'queue' regex too long"
		}
		re, err := regexp.Compile(qs[0])
		if err != nil {
			return nil, "Invalid 'queue' regex: " + err.Error()
		}
		sc.queueRe = re
	}
	return sc, ""
}

// Serve answers scrapes on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.hs = hs
	s.mu.Unlock()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops Serve.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.hs == nil {
		return nil
	}
	return s.hs.Close()
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Println(v ...any) {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteByte(' ')
		}
		if err, ok := x.(error); ok {
			b.WriteString(err.Error())
		} else if str, ok := x.(string); ok {
			b.WriteString(str)
		}
	}
	a.l.Warn("prometheus: " + b.String())
}
