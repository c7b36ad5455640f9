// Command warren is the Warren broker daemon.
//
//	go run ./tools/warren [-data-dir warren-data] [-amqp-listen :5672]
//	                      [-stream-listen :5552] [-stream-advertise localhost:5552]
//	                      [-config warren.json]
//
// It serves AMQP 0-9-1 (port 5672) and the RabbitMQ stream protocol (port
// 5552); an empty listen address turns that protocol off. A data directory is used by one broker at a time (a lock file says so).
// SIGINT and SIGTERM shut down cleanly: stop accepting, close connections,
// flush the stream writers, close the files.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto"
	"golang.org/x/sys/unix"
)

// Config is the daemon's configuration: flags, or a JSON file given with
// -config (flags given explicitly win over the file).
type Config struct {
	DataDir         string `json:"data_dir"`
	AMQPListen      string `json:"amqp_listen"`
	StreamListen    string `json:"stream_listen"`
	StreamAdvertise string `json:"stream_advertise"` // default localhost:<stream port>
	// FrameMax and Heartbeat (seconds) are offered to stream clients.
	FrameMax  uint32 `json:"frame_max"`
	Heartbeat uint32 `json:"heartbeat"`
	// AMQPFrameMax, AMQPChannelMax and AMQPHeartbeat (seconds) are offered
	// in connection.tune; 0 means RabbitMQ's defaults (131072, 2047, 60).
	AMQPFrameMax   uint32 `json:"amqp_frame_max"`
	AMQPChannelMax uint16 `json:"amqp_channel_max"`
	AMQPHeartbeat  uint16 `json:"amqp_heartbeat"`
	// DenyTransientNonExclusive refuses durable=false exclusive=false
	// queues as RabbitMQ 4.3 does (off: the ≤4.2 behaviour).
	DenyTransientNonExclusive bool `json:"deny_transient_nonexclusive_queues"`
	// RetentionInterval is how often stream retention runs besides on
	// segment roll (a Go duration such as "1m").
	RetentionInterval string `json:"retention_interval"`
	LogLevel          string `json:"log_level"` // debug, info, warn, error
	// DebugListen, when set, serves Go's runtime profiles
	// (/debug/pprof/...) over HTTP on that address. Off by default; bind
	// it to loopback: profiles reveal internals and cost CPU while taken.
	DebugListen string `json:"debug_listen"`
}

func defaults() Config {
	return Config{
		DataDir:           "warren-data",
		AMQPListen:        ":5672",
		StreamListen:      ":5552",
		RetentionInterval: "1m",
		LogLevel:          "info",
	}
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "log level:", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger, nil); err != nil {
		logger.Error("warren", "err", err)
		os.Exit(1)
	}
}

// bindFlags registers the flags onto cfg.
func bindFlags(fs *flag.FlagSet, cfg *Config) *string {
	configFile := fs.String("config", "", "JSON configuration file (flags given explicitly override it)")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory for all broker data")
	fs.StringVar(&cfg.AMQPListen, "amqp-listen", cfg.AMQPListen, "AMQP 0-9-1 listen address (empty: off)")
	fs.StringVar(&cfg.StreamListen, "stream-listen", cfg.StreamListen, "stream protocol listen address (empty: off)")
	fs.StringVar(&cfg.StreamAdvertise, "stream-advertise", cfg.StreamAdvertise, "host:port stream clients are told to connect to (default localhost:<stream port>)")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
	fs.StringVar(&cfg.DebugListen, "debug-listen", cfg.DebugListen, "address for Go profiles over HTTP at /debug/pprof/ (empty: off; use loopback)")
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
	b, err := os.ReadFile(*configFile)
	if err != nil {
		return cfg, err
	}
	fileCfg := defaults()
	if err := json.Unmarshal(b, &fileCfg); err != nil {
		return cfg, fmt.Errorf("config %s: %w", *configFile, err)
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

// lockDataDir takes an exclusive lock on dataDir/LOCK, held until the
// returned file is closed (or the process dies).
func lockDataDir(dataDir string) (*os.File, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dataDir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another Warren (lock %s held)", dataDir, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}

// readyAddrs are the bound listen addresses (nil for a protocol that is
// off).
type readyAddrs struct {
	Stream, AMQP net.Addr
}

// run starts the broker and serves until ctx ends. ready, if not nil,
// receives the bound addresses once listening.
func run(ctx context.Context, cfg Config, logger *slog.Logger, ready chan<- readyAddrs) error {
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer lock.Close()
	retention, err := time.ParseDuration(cfg.RetentionInterval)
	if err != nil {
		return fmt.Errorf("retention_interval: %w", err)
	}
	broker, err := queues.Open(cfg.DataDir, queues.Options{
		Logger:        logger,
		StreamOptions: osiris.Options{RetentionInterval: retention, Logger: logger},
	})
	if err != nil {
		return err
	}
	defer broker.Close()

	type server interface {
		Serve(net.Listener) error
		Close() error
	}
	var servers []server
	var listeners []net.Listener
	closeAll := func() {
		for _, s := range servers {
			s.Close()
		}
		for _, ln := range listeners[len(servers):] {
			ln.Close()
		}
	}
	var addrs readyAddrs
	if cfg.StreamListen != "" {
		ln, err := net.Listen("tcp", cfg.StreamListen)
		if err != nil {
			return err
		}
		listeners = append(listeners, ln)
		addrs.Stream = ln.Addr()
		advertise := cfg.StreamAdvertise
		if advertise == "" {
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			advertise = net.JoinHostPort("localhost", port)
		}
		srv, err := streamproto.NewServer(streamproto.Config{
			Broker: broker, Logger: logger, Advertise: advertise, FrameMax: cfg.FrameMax, Heartbeat: cfg.Heartbeat,
		})
		if err != nil {
			closeAll()
			return err
		}
		servers = append(servers, srv)
		logger.Info("stream protocol listening", "addr", ln.Addr().String(), "advertise", advertise)
	}
	if cfg.AMQPListen != "" {
		ln, err := net.Listen("tcp", cfg.AMQPListen)
		if err != nil {
			closeAll()
			return err
		}
		listeners = append(listeners, ln)
		addrs.AMQP = ln.Addr()
		servers = append(servers, amqp.NewServer(amqp.Config{
			Broker: broker, Logger: logger, FrameMax: cfg.AMQPFrameMax, ChannelMax: cfg.AMQPChannelMax,
			Heartbeat: cfg.AMQPHeartbeat, DenyTransientNonExclusive: cfg.DenyTransientNonExclusive,
		}))
		logger.Info("AMQP 0-9-1 listening", "addr", ln.Addr().String())
	}
	if len(servers) == 0 {
		return errors.New("nothing to serve: both amqp_listen and stream_listen are empty")
	}
	if cfg.DebugListen != "" {
		ln, err := net.Listen("tcp", cfg.DebugListen)
		if err != nil {
			closeAll()
			return fmt.Errorf("debug_listen: %w", err)
		}
		defer serveDebug(ln, logger)()
	}
	logger.Info("warren started", "data_dir", cfg.DataDir)
	errc := make(chan error, len(servers))
	for i, s := range servers {
		go func() { errc <- s.Serve(listeners[i]) }()
	}
	if ready != nil {
		ready <- addrs
	}
	var err2 error
	select {
	case <-ctx.Done():
		logger.Info("warren shutting down")
	case err2 = <-errc:
	}
	for _, s := range servers {
		s.Close()
	}
	if err2 != nil {
		return err2
	}
	logger.Info("warren stopped")
	return nil
}
