package streamproto

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/internal/netserve"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/superstream"
)

// Server serves the stream protocol on listeners handed to Serve.
type Server struct {
	// Static after NewServer.
	broker        *queues.Broker
	log           *slog.Logger
	advertiseHost string
	advertisePort string
	// What TLS clients are told instead (stream.advertised_tls_host and
	// _port); empty: as the others.
	advertiseTLSHost string
	advertiseTLSPort string
	sasl             sasl.Config
	certLogin        tlsconf.CertLogin
	connectionMax    int
	frameMax         uint32
	heartbeat        uint32
	handshakeWait    time.Duration
	initFrameMax     uint32
	silentClose      time.Duration
	publishCredit    int64 // bytes; 0: flow.DefaultLimit

	sac   superstream.Coordinator // single active consumer groups of all connections
	super *superstream.Manager    // super streams

	conns *netserve.Group // listeners and connections
}

// Config configures a Server.
type Config struct {
	Broker *queues.Broker
	Logger *slog.Logger
	// Advertise is the host:port that Open and Metadata tell clients to
	// connect to.
	Advertise string
	// AdvertiseTLS is the host:port that Open and Metadata tell clients
	// connected over TLS, as RabbitMQ's stream.advertised_tls_host and
	// _port; empty: Advertise.
	AdvertiseTLS string
	// SASL is auth_mechanisms and the ANONYMOUS credentials; the zero
	// value is RabbitMQ 4.x's PLAIN, AMQPLAIN, ANONYMOUS as guest.
	SASL sasl.Config
	// CertLogin is where SASL EXTERNAL takes the user name from a
	// verified client certificate (ssl_cert_login_from and its SAN keys;
	// the zero value is the distinguished name). EXTERNAL is offered on
	// TLS connections only, when SASL lists it.
	CertLogin tlsconf.CertLogin
	// ConnectionMax bounds the connections of each listener, as the
	// stream plugin's stream.max_connections: Open beyond it is refused
	// with VIRTUAL_HOST_ACCESS_FAILURE; zero means no limit, a negative
	// value refuses every connection.
	ConnectionMax int
	// FrameMax and Heartbeat (seconds) are offered in Tune; zero means
	// DefaultFrameMax and DefaultHeartbeat.
	FrameMax  uint32
	Heartbeat uint32
	// HandshakeTimeout bounds each step before the connection is open
	// (authentication, then tuning and open); zero means 10 seconds, as
	// RabbitMQ's connection_negotiation_step_timeout. Frames within a
	// step do not extend it.
	HandshakeTimeout time.Duration
	// InitialFrameMax bounds frames until Open, as RabbitMQ's
	// stream.initial_frame_max; zero means 8192, its default.
	InitialFrameMax uint32
	// SilentCloseDelay is how long a refused authentication or Open is
	// held before its response is sent and the connection closed, the
	// client's frames ignored meanwhile, as RabbitMQ's stream reader's
	// silent_close; zero means 3 s (?SILENT_CLOSE_DELAY), a negative
	// value none (tests).
	SilentCloseDelay time.Duration
	// SuperStreams is the broker's super stream manager, shared with the
	// management API (nil: the server makes its own).
	SuperStreams *superstream.Manager
	// PublishCredit bounds, in bytes, the Publish frames one connection
	// may have handed to streams that their writers have not written yet
	// (flow.go); zero means flow.DefaultLimit (4 MiB).
	PublishCredit int64
}

// NewServer returns a server for cfg.
func NewServer(cfg Config) (*Server, error) {
	host, port, err := net.SplitHostPort(cfg.Advertise)
	if err != nil {
		return nil, fmt.Errorf("streamproto: advertise %q: %w", cfg.Advertise, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, fmt.Errorf("streamproto: advertise port %q: %w", port, err)
	}
	tlsHost, tlsPort := host, port
	if cfg.AdvertiseTLS != "" {
		if tlsHost, tlsPort, err = net.SplitHostPort(cfg.AdvertiseTLS); err != nil {
			return nil, fmt.Errorf("streamproto: TLS advertise %q: %w", cfg.AdvertiseTLS, err)
		}
		if _, err := strconv.ParseUint(tlsPort, 10, 16); err != nil {
			return nil, fmt.Errorf("streamproto: TLS advertise port %q: %w", tlsPort, err)
		}
	}
	s := &Server{
		advertiseTLSHost: tlsHost,
		advertiseTLSPort: tlsPort,
		sasl:             cfg.SASL,
		certLogin:        cfg.CertLogin,
		connectionMax:    cfg.ConnectionMax,
		broker:           cfg.Broker,
		super:            cfg.SuperStreams,
		log:              cfg.Logger,
		advertiseHost:    host,
		advertisePort:    port,
		frameMax:         cfg.FrameMax,
		heartbeat:        cfg.Heartbeat,
		handshakeWait:    cfg.HandshakeTimeout,
		silentClose:      cfg.SilentCloseDelay,
		initFrameMax:     cfg.InitialFrameMax,
		publishCredit:    cfg.PublishCredit,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.super == nil {
		s.super = superstream.NewManager(cfg.Broker)
	}
	if s.frameMax == 0 {
		s.frameMax = DefaultFrameMax
	}
	if s.heartbeat == 0 {
		s.heartbeat = DefaultHeartbeat
	}
	if s.handshakeWait == 0 {
		s.handshakeWait = 10 * time.Second
	}
	if s.initFrameMax == 0 {
		s.initFrameMax = initialFrameMax
	}
	if s.silentClose == 0 {
		s.silentClose = 3 * time.Second
	}
	s.conns = netserve.New("stream-conn")
	return s, nil
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("streamproto: server closed")

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	active := new(atomic.Int64) // the listener's connections, as ranch's active_connections
	err := s.conns.Serve(ln, func(nc net.Conn) netserve.Conn {
		c := newConn(s, nc)
		c.listenerConns = active
		active.Add(1)
		return c
	})
	if errors.Is(err, netserve.ErrClosed) {
		return ErrServerClosed
	}
	return err
}

// ConsumerGroups lists the single-active-consumer groups of the server's
// connections.
func (s *Server) ConsumerGroups() []superstream.GroupInfo { return s.sac.Groups() }

// Close stops the listeners, closes every connection and waits for their
// goroutines.
func (s *Server) Close() error {
	s.conns.Close()
	return nil
}
