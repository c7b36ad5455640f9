package amqp1

import (
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/internal/netserve"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
)

// Defaults, as RabbitMQ 4.x's (deps/rabbit/Makefile, rabbit_amqp_session).
const (
	DefaultMaxFrameSize   = 131072   // frame_max: the max-frame-size Warren announces
	DefaultSessionMax     = 64       // session_max_per_connection: channel-max + 1
	DefaultLinkMax        = 256      // link_max_per_session: handle-max + 1
	DefaultHeartbeat      = 60       // heartbeat (s): idle-time-out announced is half
	DefaultMaxMessageSize = 16 << 20 // max_message_size
	// DefaultMaxLinkCredit is the credit granted to a client's sending
	// link, topped up once half is used (DEFAULT_MAX_LINK_CREDIT).
	DefaultMaxLinkCredit = 170
	// DefaultMaxIncomingWindow is a session's incoming window
	// (DEFAULT_MAX_INCOMING_WINDOW): transfers the client may send
	// before Warren's next flow.
	DefaultMaxIncomingWindow = 400
	// initialMaxFrameSize bounds frames before open: SASL frames carry
	// credentials, which may exceed the spec's 512.
	initialMaxFrameSize = 4096
)

// CompatVersion is the version Warren's AMQP 1.0 open announces: the
// RabbitMQ release whose AMQP 1.0 it implements (4.1: the property
// filter expressions; not 4.2, whose SQL filters Warren lacks and a
// client would then send), then Warren's own version. RabbitMQ's
// clients read the first x.y.z.
const CompatVersion = "4.1.0-warren.0.1.0"

// Config configures a Server. Zero values take the defaults above.
type Config struct {
	Broker *queues.Broker
	Logger *slog.Logger
	// MaxFrameSize is the max-frame-size Warren announces in open and
	// accepts.
	MaxFrameSize uint32
	// SessionMax bounds the sessions of a connection.
	SessionMax int
	// Heartbeat (seconds) is how long a client may stay silent before
	// the connection closes (amqp:resource-limit-exceeded); Warren
	// announces half as its idle-time-out. Negative: none.
	Heartbeat int
	// MaxMessageSize bounds a message a client sends.
	MaxMessageSize uint64
	// HandshakeTimeout bounds the time from the protocol header to open;
	// zero means 10 s, as RabbitMQ's handshake_timeout.
	HandshakeTimeout time.Duration
	// SilentCloseDelay is how long a connection refused before open
	// (failed login, bad frame) is held before the socket closes, as
	// RabbitMQ's ?SILENT_CLOSE_DELAY; zero means 3 s, negative none
	// (tests).
	SilentCloseDelay time.Duration
	// SASL is auth_mechanisms and the ANONYMOUS credentials, the same
	// for both AMQP versions; the zero value is RabbitMQ 4.x's PLAIN,
	// AMQPLAIN, ANONYMOUS as guest.
	SASL sasl.Config
	// DefaultVHost is the vhost of an open whose hostname does not name
	// one ("vhost:<name>"); zero means "/".
	DefaultVHost string
	// CertLogin is where SASL EXTERNAL takes the user name from a
	// verified client certificate (ssl_cert_login_from).
	CertLogin tlsconf.CertLogin
	// PublishCredit bounds, in bytes, what one connection may have
	// published that the log writers have not written yet (as package
	// amqp's publisher flow control); zero means flow.DefaultLimit.
	PublishCredit int64
	// ConnectionMax bounds the connections of the listener that accepted
	// a connection, both AMQP versions counted, as RabbitMQ's
	// connection_max; zero means no limit, a negative value refuses every
	// connection.
	ConnectionMax int
	// Node is the node name the management node reports as a queue's
	// leader and replicas; zero means package amqp's default,
	// "warren@" and the short host name.
	Node string
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = DefaultMaxFrameSize
	}
	c.MaxFrameSize = max(c.MaxFrameSize, frame.MinMaxFrameSize)
	if c.SessionMax <= 0 {
		c.SessionMax = DefaultSessionMax
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.SilentCloseDelay == 0 {
		c.SilentCloseDelay = 3 * time.Second
	}
	if c.DefaultVHost == "" {
		c.DefaultVHost = "/"
	}
	if c.Node == "" {
		// As amqp.DefaultNode (the front ends do not import each other).
		host, _ := os.Hostname()
		host, _, _ = strings.Cut(host, ".")
		c.Node = "warren@" + host
	}
	return c
}

// Server serves AMQP 1.0 connections that the AMQP listener hands over
// (amqp.Config.AMQP10 = server.Handoff). It owns no listener: the
// connections belong to the AMQP server, which shuts them down.
type Server struct {
	cfg Config
}

// NewServer returns a server for cfg.
func NewServer(cfg Config) *Server {
	return &Server{cfg: cfg.withDefaults()}
}

// Handoff takes over a connection whose protocol header (already read)
// is AMQP 1.0's; buffered are the bytes read past it. It has the
// signature of amqp.Handoff.
func (s *Server) Handoff(nc net.Conn, header [8]byte, buffered []byte, listenerConns func() int64) netserve.Conn {
	c := newConn(s, nc, frame.ProtocolHeader(header), buffered)
	c.listenerConns = listenerConns
	return c
}
