package amqp

import (
	"errors"
	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/netserve"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/queues"
)

// Defaults offered in connection.tune, as RabbitMQ's.
const (
	DefaultFrameMax       = 131072
	DefaultChannelMax     = 2047
	DefaultHeartbeat      = 60
	DefaultMaxMessageSize = 16 << 20 // RabbitMQ 4.x's max_message_size
	// MaxMessageSizeLimit is the largest max_message_size (512 MiB), as
	// RabbitMQ's ?MAX_MSG_SIZE: a content header declaring more is a
	// frame error whatever the configured size.
	MaxMessageSizeLimit = 512 << 20
	// DefaultSilentCloseDelay is RabbitMQ's ?SILENT_CLOSE_DELAY.
	DefaultSilentCloseDelay = 3 * time.Second
)

// Config configures a Server.
type Config struct {
	Broker *queues.Broker
	Logger *slog.Logger
	// FrameMax, ChannelMax and Heartbeat (seconds) are offered in
	// connection.tune; zero means the defaults above.
	FrameMax   uint32
	ChannelMax uint16
	Heartbeat  uint16
	// InitialFrameMax bounds frames until tune-ok, as RabbitMQ's
	// initial_frame_max; zero means 8192 (FRAME_MIN_SIZE, its default).
	InitialFrameMax uint32
	// MaxMessageSize bounds a message body; zero means 16 MiB, as
	// RabbitMQ 4.x's max_message_size. A larger publish closes the
	// channel (406).
	MaxMessageSize uint64
	// ConsumerMaxPerChannel bounds the consumers of a channel, as
	// RabbitMQ's consumer_max_per_channel (530); zero means no limit.
	ConsumerMaxPerChannel int
	// SilentCloseDelay is how long a connection that failed its
	// handshake (a malformed or unexpected frame before connection.open
	// completes, but not a refused login or vhost) is held before the
	// socket is closed, so that a client cannot retry in a tight loop;
	// zero means 3 s, RabbitMQ's ?SILENT_CLOSE_DELAY, and a negative
	// value none (tests).
	SilentCloseDelay time.Duration
	// HandshakeTimeout bounds the time from accept to connection.open-ok;
	// zero means 10 seconds, as RabbitMQ's handshake_timeout.
	HandshakeTimeout time.Duration
	// DenyTransientNonExclusive refuses durable=false exclusive=false
	// queue declarations as RabbitMQ 4.3 does (541). Off by default: the
	// ≤4.2 behaviour that common client code relies on.
	DenyTransientNonExclusive bool
	// ConsumerTimeout closes a channel (406) whose oldest unacked
	// delivery is older than this; zero means 30 minutes, as RabbitMQ's
	// consumer_timeout, and a negative value disables it.
	ConsumerTimeout time.Duration
	// SASL is auth_mechanisms and the ANONYMOUS credentials; the zero
	// value is RabbitMQ 4.x's PLAIN, AMQPLAIN, ANONYMOUS as guest.
	SASL sasl.Config
	// CertLogin is where SASL EXTERNAL takes the user name from a
	// verified client certificate (ssl_cert_login_from and its SAN keys;
	// the zero value is the distinguished name). EXTERNAL is offered on
	// TLS connections only, when SASL lists it.
	CertLogin tlsconf.CertLogin
	// ConnectionMax bounds the connections of each listener, as
	// RabbitMQ's connection_max (alias max_connections): connection.open
	// beyond it is refused (530); zero means no limit, a negative value
	// refuses every connection.
	ConnectionMax int
	// Node is the node name in refusals ("warren@<host>" by default).
	Node string
	// PublishCredit bounds, in bytes, what one connection may have
	// published that its queues' and streams' log writers have not
	// written yet (publisher flow control, flow.go); zero means
	// flow.DefaultLimit (4 MiB).
	PublishCredit int64
	// AMQP10, when set, takes over a connection whose protocol header is
	// AMQP 1.0's ("AMQP" id 1 0 0, any protocol id): see Handoff. Nil:
	// such a header is refused like any other this server does not speak.
	AMQP10 Handoff
}

// Server serves AMQP 0-9-1 on listeners handed to Serve.
type Server struct {
	cfg Config
	log *slog.Logger

	conns *netserve.Group // listeners and connections
}

// NewServer returns a server for cfg.
func NewServer(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.FrameMax == 0 {
		cfg.FrameMax = DefaultFrameMax
	}
	if cfg.ChannelMax == 0 {
		cfg.ChannelMax = DefaultChannelMax
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.MaxMessageSize == 0 {
		cfg.MaxMessageSize = DefaultMaxMessageSize
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.InitialFrameMax == 0 {
		cfg.InitialFrameMax = wire.FrameMinSize
	}
	if cfg.SilentCloseDelay == 0 {
		cfg.SilentCloseDelay = DefaultSilentCloseDelay
	}
	if cfg.ConsumerTimeout == 0 {
		cfg.ConsumerTimeout = DefaultConsumerTimeout
	}
	if cfg.Node == "" {
		cfg.Node = DefaultNode()
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	s.conns = netserve.New("amqp-conn")
	return s
}

// DefaultNode is the node name of a Server without one: "warren@" and
// the short host name, as RabbitMQ's rabbit@<host>.
func DefaultNode() string {
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	return "warren@" + host
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("amqp: server closed")

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

// Close stops the listeners, closes every connection (320
// CONNECTION_FORCED, as a RabbitMQ shutdown does) and waits for their
// goroutines.
func (s *Server) Close() error {
	s.conns.Close()
	return nil
}
