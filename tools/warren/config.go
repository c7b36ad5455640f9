package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/queues/alarm"
)

// Config is the daemon's configuration: flags, or a file in
// rabbitmq.conf syntax given with -config (conffile.go; flags given
// explicitly win over the file).
type Config struct {
	DataDir string
	// AMQPListen and StreamListen are listen addresses; empty turns that
	// protocol off.
	AMQPListen   string
	StreamListen string
	// StreamAdvertise is the host:port stream clients are told to connect
	// to; an empty host means localhost, an empty port the stream
	// listener's (all of it empty: localhost:<stream port>).
	StreamAdvertise string
	// FrameMax and Heartbeat (seconds) are offered to stream clients; 0
	// means the stream server's defaults.
	FrameMax  uint32
	Heartbeat uint32
	// AMQPFrameMax, AMQPChannelMax and AMQPHeartbeat (seconds) are offered
	// in connection.tune; 0 means RabbitMQ's defaults (131072, 2047, 60).
	AMQPFrameMax   uint32
	AMQPChannelMax uint16
	AMQPHeartbeat  uint16
	// MaxMessageSize (bytes; 0: 16 MiB), ConsumerMaxPerChannel (0: no
	// limit) and HandshakeTimeout (0: 10 s) are RabbitMQ's
	// max_message_size, consumer_max_per_channel and handshake_timeout,
	// for AMQP 0-9-1.
	MaxMessageSize uint64
	// AMQPInitialFrameMax and StreamInitialFrameMax bound frames before
	// the connection is tuned (AMQP) or open (stream); 0: 8192, as
	// RabbitMQ's initial_frame_max and stream.initial_frame_max.
	AMQPInitialFrameMax   uint32
	StreamInitialFrameMax uint32
	ConsumerMaxPerChannel int
	HandshakeTimeout      time.Duration
	// DenyTransientNonExclusive refuses durable=false exclusive=false
	// queues as RabbitMQ 4.3 does (off: the ≤4.2 behaviour).
	DenyTransientNonExclusive bool
	// RetentionInterval is how often stream retention runs besides on
	// segment roll (a Go duration such as "1m").
	RetentionInterval string
	// LogLevel is the least level logged (to stderr): one of RabbitMQ's
	// levels (debug, info, notice, warning, error, critical, alert,
	// emergency, none) or slog's (warn, INFO+2, ...). none logs nothing.
	LogLevel string
	// DebugListen, when set, serves Go's runtime profiles
	// (/debug/pprof/...) over HTTP on that address. Off by default; bind
	// it to loopback: profiles reveal internals and cost CPU while taken.
	DebugListen string
	// HTTPListen is the management HTTP API's listen address; empty
	// turns it off.
	HTTPListen string
	// PrometheusListen is the Prometheus endpoint's listen address
	// (/metrics, /metrics/per-object, /metrics/detailed); empty turns it
	// off.
	PrometheusListen string
	// LoadDefinitions is the path of a definitions file (RabbitMQ's JSON
	// export) to import at start; empty: none.
	LoadDefinitions string
	// Bootstrap is the identity a new data directory gets; zero fields
	// take RabbitMQ's defaults (guest/guest, vhost /).
	Bootstrap queues.Bootstrap
	// LoopbackUsers may only connect from loopback; nil means RabbitMQ's
	// default, {"guest"}, and an empty non-nil slice nobody.
	LoopbackUsers []string
	// Alarms are the memory high watermark and the free disk limit
	// (vm_memory_high_watermark.*, disk_free_limit.*); zero fields take
	// RabbitMQ's defaults (0.6 of the memory, 50 MB).
	Alarms alarm.Limits
	// TLS is the TLS listeners and their certificates (conftls.go).
	TLS TLSConfig
	// SASL is auth_mechanisms and the ANONYMOUS credentials (zero:
	// RabbitMQ 4.x's PLAIN, AMQPLAIN, ANONYMOUS as guest).
	SASL sasl.Config
	// ConnectionMax (connection_max) and StreamConnectionMax
	// (stream.max_connections) bound each AMQP and stream listener's
	// connections; ChannelMaxPerNode (channel_max_per_node) the node's
	// channels. Zero means no limit; a negative connection limit refuses
	// every connection.
	ConnectionMax, StreamConnectionMax, ChannelMaxPerNode int
	// Cluster makes the node one of a cluster (confcluster.go).
	Cluster ClusterConfig
}

func defaults() Config {
	return Config{
		DataDir:           "warren-data",
		AMQPListen:        ":5672",
		StreamListen:      ":5552",
		RetentionInterval: "1m",
		LogLevel:          "info",
		HTTPListen:        ":15672",
		PrometheusListen:  ":15692",
	}
}

// bindFlags registers the flags onto cfg and returns the -config flag.
func bindFlags(fs *flag.FlagSet, cfg *Config) *string {
	configFile := fs.String("config", "", "configuration file in rabbitmq.conf syntax (flags given explicitly override it)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for all broker data")
	fs.StringVar(&cfg.AMQPListen, "amqp-listen", cfg.AMQPListen, "AMQP 0-9-1 listen address (empty: off)")
	fs.StringVar(&cfg.StreamListen, "stream-listen", cfg.StreamListen, "stream protocol listen address (empty: off)")
	fs.StringVar(&cfg.StreamAdvertise, "stream-advertise", cfg.StreamAdvertise, "host:port stream clients are told to connect to (default localhost:<stream port>; an empty host or port takes its default)")
	fs.StringVar(&cfg.HTTPListen, "http-listen", cfg.HTTPListen, "management HTTP API listen address (empty: off)")
	fs.StringVar(&cfg.PrometheusListen, "prometheus-listen", cfg.PrometheusListen, "Prometheus metrics listen address (empty: off)")
	fs.StringVar(&cfg.TLS.AMQPListen, "amqps-listen", cfg.TLS.AMQPListen, "AMQP 0-9-1 over TLS listen address (empty: off; certificates: ssl_options.* in -config)")
	fs.StringVar(&cfg.TLS.StreamListen, "stream-tls-listen", cfg.TLS.StreamListen, "stream protocol over TLS listen address (empty: off; certificates: ssl_options.* in -config)")
	fs.StringVar(&cfg.TLS.HTTPSListen, "https-listen", cfg.TLS.HTTPSListen, "management HTTP API over HTTPS listen address (empty: off; certificates: management.ssl.* in -config)")
	fs.StringVar(&cfg.TLS.PrometheusListen, "prometheus-tls-listen", cfg.TLS.PrometheusListen, "Prometheus metrics over HTTPS listen address (empty: off; certificates: prometheus.ssl.* in -config)")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warning, error or none (RabbitMQ's levels; slog's warn and INFO+2 forms too)")
	fs.StringVar(&cfg.DebugListen, "debug-listen", cfg.DebugListen, "address for Go profiles over HTTP at /debug/pprof/ (empty: off; use loopback)")
	fs.StringVar(&cfg.Cluster.NodeName, "node-name", cfg.Cluster.NodeName, "this node's name in the cluster (one of -cluster-peers)")
	fs.StringVar(&cfg.Cluster.Peers, "cluster-peers", cfg.Cluster.Peers, "every node of the cluster as name=host:port,... (the same list on every node; empty: a single node)")
	fs.StringVar(&cfg.Cluster.Listen, "cluster-listen", cfg.Cluster.Listen, "node-to-node listen address (default: this node's address in -cluster-peers)")
	fs.StringVar(&cfg.Cluster.Secret, "cluster-secret", cfg.Cluster.Secret, "shared secret the nodes prove to each other (the same on every node)")
	fs.StringVar(&cfg.Cluster.Name, "cluster-name", cfg.Cluster.Name, "the cluster's name: nodes of another cluster are refused (default warren)")
	fs.BoolVar(&cfg.Cluster.Join, "cluster-join", cfg.Cluster.Join, "join a running cluster with this new node (an empty data directory; every node lists it in -cluster-peers) instead of forming a new one")
	fs.DurationVar(&cfg.Cluster.CommandTimeout, "cluster-command-timeout", cfg.Cluster.CommandTimeout, "how long a change of users, vhosts, policies or exchanges waits for the cluster (default 30s)")
	return configFile
}

// parseFlags reads the flags and, with -config, the file under them.
func parseFlags(args []string) (Config, error) {
	cfg := defaults()
	fs := flag.NewFlagSet("warren", flag.ContinueOnError)
	configFile := bindFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if *configFile == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(*configFile)
	if err != nil {
		return cfg, err
	}
	fileCfg := defaults()
	if err := applyConfFile(*configFile, data, &fileCfg); err != nil {
		return cfg, err
	}
	// Parse again onto the file's values: only flags given explicitly
	// change them.
	fs = flag.NewFlagSet("warren", flag.ContinueOnError)
	bindFlags(fs, &fileCfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	return fileCfg, nil
}

// logLevels are RabbitMQ's log levels as slog levels: notice sits
// between info and warning, critical, alert and emergency above error
// (Warren logs nothing above error, so they log nothing).
var logLevels = map[string]slog.Level{
	"debug":     slog.LevelDebug,
	"info":      slog.LevelInfo,
	"notice":    slog.LevelInfo + 2,
	"warning":   slog.LevelWarn,
	"error":     slog.LevelError,
	"critical":  slog.LevelError + 4,
	"alert":     slog.LevelError + 8,
	"emergency": slog.LevelError + 12,
}

// newLogger returns the logger for level (Config.LogLevel), writing
// text to stderr.
func newLogger(level string) (*slog.Logger, error) {
	if level == "none" {
		return slog.New(slog.DiscardHandler), nil
	}
	l, ok := logLevels[strings.ToLower(level)]
	if !ok {
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return nil, fmt.Errorf("log level %q: not one of debug, info, notice, warning, error, critical, alert, emergency, none", level)
		}
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
