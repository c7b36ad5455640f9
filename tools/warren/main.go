// Command warren is the Warren broker daemon.
//
//	go run ./tools/warren [-config warren.conf] [-data-dir warren-data]
//	                      [-amqp-listen :5672] [-stream-listen :5552]
//	                      [-stream-advertise localhost:5552] [-http-listen :15672]
//	                      [-prometheus-listen :15692]
//	                      [-amqps-listen :5671] [-stream-tls-listen :5551]
//	                      [-https-listen :15671] [-prometheus-tls-listen :15691]
//	                      [-log-level info] [-debug-listen 127.0.0.1:6060]
//
// It serves AMQP 0-9-1 (port 5672) and the RabbitMQ stream protocol (port
// 5552); an empty listen address turns that protocol off. A data
// directory is used by one broker at a time (a lock file says so).
// SIGINT and SIGTERM shut down cleanly: stop accepting, close
// connections, flush the stream writers, close the files. SIGHUP reloads
// the TLS certificates (tls.go).
//
// -config names a file in RabbitMQ's rabbitmq.conf syntax (key = value,
// # comments) with RabbitMQ's keys for what Warren does (listeners.tcp.*,
// stream.*, heartbeat, frame_max, channel_max, default_user and the
// other default_* keys, loopback_users, management.tcp.*, prometheus.tcp.*,
// listeners.ssl.*, ssl_options.*, management.ssl.*, prometheus.ssl.*,
// load_definitions, log.console.*, vm_memory_high_watermark.*,
// disk_free_limit.*) and warren.* keys for what only
// Warren has (warren.data_dir, warren.retention_interval,
// warren.debug_listen); warren.conf.example lists them all. A key of
// RabbitMQ's that Warren does not act on, an unknown key or a malformed
// value stops the start with an error naming the line. Flags given
// explicitly win over the file.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/warren-mq/warren/amqp"
	"github.com/warren-mq/warren/amqp1"
	clusternode "github.com/warren-mq/warren/cluster/node"
	"github.com/warren-mq/warren/definitions"
	"github.com/warren-mq/warren/internal/netserve"
	"github.com/warren-mq/warren/mgmt"
	"github.com/warren-mq/warren/mgmt/prom"
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto"
	"github.com/warren-mq/warren/superstream"
	"golang.org/x/sys/unix"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	logger, err := newLogger(cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger, nil); err != nil {
		if !logger.Enabled(ctx, slog.LevelError) { // logging is off; still say why
			fmt.Fprintln(os.Stderr, "warren:", err)
		}
		logger.Error("warren", "err", err)
		os.Exit(1)
	}
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
	Stream, AMQP, HTTP, Prometheus net.Addr
	// The TLS listeners'.
	StreamTLS, AMQPS, HTTPS, PrometheusTLS net.Addr
	// Cluster is the node-to-node listener's (nil: a single node).
	Cluster net.Addr
}

// run starts the broker and serves until ctx ends. ready, if not nil,
// receives the bound addresses once listening.
func run(ctx context.Context, cfg Config, logger *slog.Logger, ready chan<- readyAddrs) error {
	started := time.Now()
	var peers []clusterPeer
	if cfg.Cluster.enabled() {
		var err error
		if peers, err = cfg.Cluster.peers(); err != nil {
			return err
		}
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer lock.Close()
	retention, err := time.ParseDuration(cfg.RetentionInterval)
	if err != nil {
		return fmt.Errorf("retention interval: %w", err)
	}
	boot := currentBootID()
	trustTail := sameBoot(cfg.DataDir, boot)
	if !trustTail {
		logger.Info("validating every chunk of each stream's last segment: first start since the machine booted")
	}
	broker, err := queues.Open(cfg.DataDir, queues.Options{
		Logger:            logger,
		StreamOptions:     osiris.Options{RetentionInterval: retention, Logger: logger, TrustTail: trustTail},
		LoopbackUsers:     cfg.LoopbackUsers,
		Bootstrap:         cfg.Bootstrap,
		ChannelMaxPerNode: cfg.ChannelMaxPerNode,
		Clustered:         cfg.Cluster.enabled(),
		NodeName:          cfg.Cluster.NodeName,
	})
	if err != nil {
		return err
	}
	defer broker.Close()
	var cnode *clusternode.Node
	if cfg.Cluster.enabled() {
		addrs := map[string]string{}
		for _, p := range peers {
			addrs[p.name] = p.addr
		}
		cnode, err = clusternode.Start(clusternode.Config{
			Name: cfg.Cluster.NodeName, Cluster: cfg.Cluster.Name, Peers: addrs, Secret: cfg.Cluster.Secret,
			Listen: cfg.Cluster.listenAddr(peers), Dir: filepath.Join(cfg.DataDir, "raft"), Broker: broker,
			Logger: logger, CommandTimeout: cfg.Cluster.CommandTimeout, Join: cfg.Cluster.Join,
		})
		if err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		defer cnode.Close() // before the broker closes
		logger.Info("cluster node started", "node", cfg.Cluster.NodeName, "listen", cnode.Addr().String(), "peers", cfg.Cluster.Peers)
	}
	if err := recordBoot(cfg.DataDir, boot); err != nil {
		return err
	}
	stopAlarms, err := startAlarms(broker, cfg, logger)
	if err != nil {
		return err
	}
	defer stopAlarms()
	certs, err := loadCerts(cfg.TLS)
	if err != nil {
		return err
	}
	hupCtx, stopHUP := context.WithCancel(ctx)
	defer stopHUP()
	certs.reloadOnSIGHUP(hupCtx, logger)
	if cfg.LoadDefinitions != "" {
		// As RabbitMQ's load_definitions: applied at every start; a
		// file that does not import stops the start.
		if err := definitions.LoadFile(broker, cfg.LoadDefinitions); err != nil {
			return fmt.Errorf("load_definitions %s: %w", cfg.LoadDefinitions, err)
		}
		logger.Info("definitions loaded", "path", cfg.LoadDefinitions)
	}

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
	super := superstream.NewManager(broker)
	var consumerGroups func() []superstream.GroupInfo
	var mgmtListeners []mgmt.Listener
	var node string // the management API's node name
	if cfg.StreamListen != "" || cfg.TLS.StreamListen != "" {
		lns, listed, err := listenEach(
			listenSpec{cfg.StreamListen, nil, "stream", &addrs.Stream},
			listenSpec{cfg.TLS.StreamListen, certs.broker, "stream/ssl", &addrs.StreamTLS})
		if err != nil {
			closeAll()
			return err
		}
		listeners = append(listeners, lns...)
		advertise, err := advertiseAddr(cfg.StreamAdvertise, lns[0].Addr())
		if err != nil {
			closeAll()
			return err
		}
		advertiseTLS, err := advertiseTLSAddr(cfg.TLS.StreamAdvertise, advertise, addrs.StreamTLS)
		if err != nil {
			closeAll()
			return err
		}
		srv, err := streamproto.NewServer(streamproto.Config{
			Broker: broker, Logger: logger, Advertise: advertise, FrameMax: cfg.FrameMax, Heartbeat: cfg.Heartbeat,
			SuperStreams: super, AdvertiseTLS: advertiseTLS, SASL: cfg.SASL, CertLogin: cfg.TLS.CertLogin, ConnectionMax: cfg.StreamConnectionMax,
			InitialFrameMax: cfg.StreamInitialFrameMax,
		})
		if err != nil {
			closeAll()
			return err
		}
		for range lns {
			servers = append(servers, srv) // one Serve per listener
		}
		consumerGroups = srv.ConsumerGroups
		// As RabbitMQ's rabbit@<host> advertising <host>: clients that
		// look up a stream's node in the API find the host to connect to.
		if h, p, err := net.SplitHostPort(advertise); err == nil {
			node = "warren@" + h
			if cnode != nil {
				port, _ := strconv.Atoi(p)
				cnode.Advertise(h, port) // for the other nodes' Metadata
			}
		}
		mgmtListeners = append(mgmtListeners, listed...)
		for _, l := range listed {
			logger.Info("stream protocol listening", "addr", l.Addr.String(), "protocol", l.Protocol, "advertise", advertise, "advertise_tls", advertiseTLS)
		}
	}
	if cnode != nil {
		node = cfg.Cluster.NodeName // the cluster's name for this node, in every API
		addrs.Cluster = cnode.Addr()
		mgmtListeners = append(mgmtListeners, mgmt.Listener{Protocol: "clustering", Addr: cnode.Addr()})
	}
	if cfg.AMQPListen != "" || cfg.TLS.AMQPListen != "" {
		lns, listed, err := listenEach(
			listenSpec{cfg.AMQPListen, nil, "amqp", &addrs.AMQP},
			listenSpec{cfg.TLS.AMQPListen, certs.broker, "amqp/ssl", &addrs.AMQPS})
		if err != nil {
			closeAll()
			return err
		}
		listeners = append(listeners, lns...)
		srv := amqp.NewServer(amqp.Config{
			Broker: broker, Logger: logger, FrameMax: cfg.AMQPFrameMax, ChannelMax: cfg.AMQPChannelMax,
			Heartbeat: cfg.AMQPHeartbeat, DenyTransientNonExclusive: cfg.DenyTransientNonExclusive,
			SASL: cfg.SASL, CertLogin: cfg.TLS.CertLogin, ConnectionMax: cfg.ConnectionMax,
			MaxMessageSize: cfg.MaxMessageSize, ConsumerMaxPerChannel: cfg.ConsumerMaxPerChannel,
			HandshakeTimeout: cfg.HandshakeTimeout, InitialFrameMax: cfg.AMQPInitialFrameMax,
			// AMQP 1.0 on the same port, as RabbitMQ 4.x.
			AMQP10: amqp1.NewServer(amqp1.Config{
				Broker: broker, Logger: logger, MaxMessageSize: cfg.MaxMessageSize,
				HandshakeTimeout: cfg.HandshakeTimeout, SASL: cfg.SASL, CertLogin: cfg.TLS.CertLogin,
				MaxFrameSize: cfg.AMQPFrameMax, Heartbeat: int(cfg.AMQPHeartbeat),
				DefaultVHost:  cfg.Bootstrap.VHost, // default_vhost, as RabbitMQ's 1.0 reader
				ConnectionMax: cfg.ConnectionMax,
				Node:          node, // the management node's leader and replicas, as the API's
			}).Handoff,
		})
		for range lns {
			servers = append(servers, srv) // one Serve per listener
		}
		mgmtListeners = append(mgmtListeners, listed...)
		for _, l := range listed {
			logger.Info("AMQP 0-9-1 listening", "addr", l.Addr.String(), "protocol", l.Protocol)
		}
	}
	if len(servers) == 0 {
		closeAll()
		return errors.New("nothing to serve: AMQP and stream are both off (-amqp-listen, -stream-listen, -amqps-listen, -stream-tls-listen; listeners.tcp, stream.listeners.tcp, listeners.ssl, stream.listeners.ssl)")
	}
	if cfg.PrometheusListen != "" || cfg.TLS.PrometheusListen != "" {
		lns, listed, err := listenEach(
			listenSpec{cfg.PrometheusListen, nil, "http/prometheus", &addrs.Prometheus},
			listenSpec{cfg.TLS.PrometheusListen, certs.prometheus, "https/prometheus", &addrs.PrometheusTLS})
		if err != nil {
			closeAll()
			return fmt.Errorf("prometheus listener: %w", err)
		}
		listeners = append(listeners, netserve.Merge(lns...)) // one Serve for both
		servers = append(servers, prom.New(prom.Config{
			Broker: broker, Node: node, DataDir: cfg.DataDir, Logger: logger, Started: started,
		}))
		mgmtListeners = append(mgmtListeners, listed...)
		for _, l := range listed {
			logger.Info("Prometheus metrics listening", "addr", l.Addr.String(), "protocol", l.Protocol)
		}
	}
	if cfg.HTTPListen != "" || cfg.TLS.HTTPSListen != "" {
		lns, listed, err := listenEach(
			listenSpec{cfg.HTTPListen, nil, "http", &addrs.HTTP},
			listenSpec{cfg.TLS.HTTPSListen, certs.https, "https", &addrs.HTTPS})
		if err != nil {
			closeAll()
			return fmt.Errorf("management listener: %w", err)
		}
		listeners = append(listeners, netserve.Merge(lns...)) // one Serve for both
		mgmtListeners = append(mgmtListeners, listed...)
		var peersFn func() []mgmt.Peer
		var forgetFn func(context.Context, string) error
		if cnode != nil {
			forgetFn = func(ctx context.Context, name string) error {
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				return cnode.Forget(ctx, name)
			}
			peersFn = func() []mgmt.Peer {
				var out []mgmt.Peer
				for _, p := range cnode.Peers() {
					out = append(out, mgmt.Peer{Name: p.Name, Running: p.Running})
				}
				return out
			}
		}
		servers = append(servers, mgmt.New(mgmt.Config{
			Broker: broker, SuperStreams: super, ConsumerGroups: consumerGroups, Logger: logger, Listeners: mgmtListeners,
			DataDir: cfg.DataDir, Node: node, Peers: peersFn, Forget: forgetFn,
		}))
		for _, l := range listed {
			logger.Info("management HTTP API listening", "addr", l.Addr.String(), "protocol", l.Protocol)
		}
	}
	if cfg.DebugListen != "" {
		ln, err := net.Listen("tcp", cfg.DebugListen)
		if err != nil {
			closeAll()
			return fmt.Errorf("debug listener: %w", err)
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

// advertiseAddr is the host:port stream clients are told to connect to:
// advertise (Config.StreamAdvertise) with an empty host taken as
// localhost and an empty port as the port of ln.
func advertiseAddr(advertise string, ln net.Addr) (string, error) {
	host, port := "", ""
	if advertise != "" {
		var err error
		if host, port, err = net.SplitHostPort(advertise); err != nil {
			return "", fmt.Errorf("stream advertise address: %w", err)
		}
	}
	if port == "" {
		_, port, _ = net.SplitHostPort(ln.String())
	}
	return net.JoinHostPort(cmp.Or(host, "localhost"), port), nil
}
