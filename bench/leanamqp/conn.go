// Package leanamqp is a minimal, allocation-light AMQP 0-9-1 client for
// the benchmark tool's data path. It opens one connection with one
// channel (channel 1) and supports what a throughput benchmark needs:
// publisher confirms, batched publishing with one write per batch,
// basic.qos, basic.consume and basic.ack. Deliveries and confirms are
// reported to callbacks that run on the connection's reader goroutine,
// so the steady state allocates nothing per message.
//
// It speaks to Warren and RabbitMQ alike and builds on the repository's
// codec, github.com/warren-mq/warren/amqp/wire.
package leanamqp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
)

// Defaults of Config.
const (
	// DefaultFrameMax is the frame_max asked for when the server has no
	// limit.
	DefaultFrameMax = 131072
	// DefaultTimeout bounds dialing, the handshake and each synchronous
	// method.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxBodySize bounds an incoming message body; RabbitMQ's
	// own ceiling is 512 MiB.
	DefaultMaxBodySize = 512 << 20

	// channelID is the one channel a Conn uses.
	channelID = 1
)

// ErrClosed is the error of a connection closed by Close.
var ErrClosed = errors.New("leanamqp: connection closed")

// ErrProtocol marks a protocol violation by the server: malformed or
// unexpected frames and methods.
var ErrProtocol = errors.New("leanamqp: protocol error")

// ServerError is a channel.close or connection.close sent by the server,
// which fails the connection.
type ServerError struct {
	Channel  bool   // true for channel.close, false for connection.close
	Code     uint16 // reply code, e.g. 404
	Text     string // reply text, e.g. "NOT_FOUND - no exchange 'x' in vhost '/'"
	ClassID  uint16 // class of the failing method, or 0
	MethodID uint16 // failing method, or 0
}

// Error describes the close.
func (e *ServerError) Error() string {
	what := "connection"
	if e.Channel {
		what = "channel"
	}
	return fmt.Sprintf("leanamqp: server closed the %s: %d %s", what, e.Code, e.Text)
}

// DeliveryFunc receives one delivery. body aliases a read buffer and is
// valid only during the call. It runs on the reader goroutine: it must
// not block for long, and may call Ack.
type DeliveryFunc func(deliveryTag uint64, redelivered bool, body []byte)

// ConfirmFunc receives one basic.ack (ack true) or basic.nack from the
// broker in confirm mode. Delivery tags count from 1 after
// ConfirmSelect; multiple covers every tag up to deliveryTag. It runs on
// the reader goroutine and must not block for long.
type ConfirmFunc func(deliveryTag uint64, multiple, ack bool)

// Config configures DialConfig.
type Config struct {
	// Name is the connection_name client property.
	Name string
	// Timeout bounds dialing, the handshake and each synchronous method;
	// default DefaultTimeout.
	Timeout time.Duration
	// Heartbeat, when positive, asks for heartbeats at that interval
	// (whole seconds) and sends them; zero turns them off (server
	// heartbeats are still answered).
	Heartbeat time.Duration
	// MaxBodySize bounds incoming bodies; default DefaultMaxBodySize.
	MaxBodySize uint64
	// OnDelivery receives deliveries of Consume; nil drops them.
	OnDelivery DeliveryFunc
	// OnConfirm receives confirms after ConfirmSelect; nil drops them.
	OnConfirm ConfirmFunc
}

// Conn is a connection with one open channel. Its methods are safe for
// concurrent use.
type Conn struct {
	nc         net.Conn
	fr         *wire.FrameReader
	frameMax   uint32 // negotiated, FrameOverhead included
	timeout    time.Duration
	maxBody    uint64
	onDelivery DeliveryFunc
	onConfirm  ConfirmFunc
	echoBeats  bool // answer server heartbeats (no heartbeat ticker)
	// heartbeatInterval is the send interval, half the negotiated
	// heartbeat, or 0.
	heartbeatInterval time.Duration
	rpcMu             sync.Mutex
	rpc               chan wire.Method // replies of synchronous methods
	done              chan struct{}    // closed when the connection fails
	readerDone        chan struct{}    // closed when the reader exits
	closeOk           chan struct{}    // closed when connection.close-ok arrives
	closeOkOnce       sync.Once
	errOnce           sync.Once
	err               error // set before done closes
	closing           bool  // set by Close under wmu

	wmu     sync.Mutex // guards the fields below and writes to nc
	wbuf    []byte     // frames not yet written
	pub     pubCache
	pubSeq  uint64 // publishes since ConfirmSelect (or since open)
	written bool   // something was written since the last heartbeat tick

	// Reader state, owned by the reader goroutine.
	rd reader
}

// Dial connects to url, amqp://user:pass@host:port/vhost, names the
// connection connName and opens channel 1.
func Dial(url, connName string) (*Conn, error) {
	return DialConfig(url, Config{Name: connName})
}

// DialConfig is Dial with callbacks and limits.
func DialConfig(rawURL string, cfg Config) (*Conn, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	nc, err := net.DialTimeout("tcp", u.Addr, cfg.Timeout)
	if err != nil {
		return nil, fmt.Errorf("leanamqp: dial %s: %w", u.Addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if u.TLS {
		host, _, _ := net.SplitHostPort(u.Addr)
		tc := tls.Client(nc, &tls.Config{ServerName: host})
		tc.SetDeadline(time.Now().Add(cfg.Timeout))
		if err := tc.Handshake(); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("leanamqp: TLS handshake with %s: %w", u.Addr, err)
		}
		tc.SetDeadline(time.Time{})
		nc = tc
	}
	c := newConn(nc, cfg)
	if err := c.handshake(u, cfg); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("leanamqp: handshake with %s: %w", u.Addr, err)
	}
	go c.readLoop()
	if c.heartbeatInterval > 0 {
		go c.heartbeats(c.heartbeatInterval)
	}
	return c, nil
}

// newConn returns a Conn on nc before the handshake.
func newConn(nc net.Conn, cfg Config) *Conn {
	if cfg.MaxBodySize == 0 {
		cfg.MaxBodySize = DefaultMaxBodySize
	}
	c := &Conn{
		nc:         nc,
		fr:         wire.NewFrameReader(nc, DefaultFrameMax+wire.FrameOverhead),
		frameMax:   DefaultFrameMax,
		timeout:    cfg.Timeout,
		maxBody:    cfg.MaxBodySize,
		onDelivery: cfg.OnDelivery,
		onConfirm:  cfg.OnConfirm,
		echoBeats:  true,
		rpc:        make(chan wire.Method, 1),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
		closeOk:    make(chan struct{}),
		wbuf:       make([]byte, 0, 64<<10),
	}
	return c
}

// URL is a parsed amqp:// URL.
type URL struct {
	Addr     string // host:port
	User     string
	Password string
	Vhost    string
	// TLS is amqps: TLS with the system's roots (SSL_CERT_FILE names a
	// CA file instead).
	TLS bool
}

// ParseURL parses amqp://user:pass@host:port/vhost or amqps://... The
// port defaults to 5672 (amqps 5671), user and password to guest, the
// vhost to "/".
func ParseURL(raw string) (URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return URL{}, fmt.Errorf("leanamqp: parse URL: %w", err)
	}
	if u.Scheme != "amqp" && u.Scheme != "amqps" {
		return URL{}, fmt.Errorf("leanamqp: URL scheme %q: only amqp and amqps are supported", u.Scheme)
	}
	p := URL{User: "guest", Password: "guest", Vhost: "/", TLS: u.Scheme == "amqps"}
	if u.User != nil {
		p.User = u.User.Username()
		if pw, ok := u.User.Password(); ok {
			p.Password = pw
		}
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "5672"
		if p.TLS {
			port = "5671"
		}
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return URL{}, fmt.Errorf("leanamqp: URL port %q: not a port number", port)
	}
	p.Addr = net.JoinHostPort(host, port)
	if len(u.Path) > 1 {
		p.Vhost = u.Path[1:]
	}
	return p, nil
}

// handshake runs the protocol header, start, tune, open and channel.open
// exchange on the caller's goroutine.
func (c *Conn) handshake(u URL, cfg Config) error {
	_ = c.nc.SetDeadline(time.Now().Add(cfg.Timeout))
	defer func() { _ = c.nc.SetDeadline(time.Time{}) }()
	if _, err := c.nc.Write(wire.ProtocolHeader[:]); err != nil {
		return fmt.Errorf("write protocol header: %w", err)
	}
	var start wire.ConnectionStart
	if err := c.expect(&start); err != nil {
		return err
	}
	if !hasWord(start.Mechanisms, "PLAIN") {
		return fmt.Errorf("server offers %q, not PLAIN: %w", start.Mechanisms, ErrProtocol)
	}
	name := cfg.Name
	startOk := wire.ConnectionStartOk{
		ClientProperties: wire.Table{
			"product":         "warren-leanamqp",
			"platform":        "Go",
			"version":         "0.1",
			"connection_name": name,
			"capabilities": wire.Table{
				"publisher_confirms":           true,
				"consumer_cancel_notify":       true,
				"basic.nack":                   true,
				"authentication_failure_close": true,
			},
		},
		Mechanism: "PLAIN",
		Response:  "\x00" + u.User + "\x00" + u.Password,
		Locale:    "en_US",
	}
	if err := c.writeMethods(0, &startOk); err != nil {
		return err
	}
	var tune wire.ConnectionTune
	if err := c.expect(&tune); err != nil {
		return err
	}
	frameMax := tune.FrameMax
	if frameMax == 0 {
		frameMax = DefaultFrameMax
	}
	if frameMax < wire.FrameMinSize {
		return fmt.Errorf("server frame_max %d is below %d: %w", frameMax, wire.FrameMinSize, ErrProtocol)
	}
	c.frameMax = frameMax
	hb := uint16(min(cfg.Heartbeat/time.Second, 65535))
	if hb > 0 && tune.Heartbeat > 0 {
		hb = min(hb, tune.Heartbeat)
	}
	if hb > 0 {
		c.heartbeatInterval = time.Duration(hb) * time.Second / 2
		c.echoBeats = false
	}
	tuneOk := wire.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: frameMax, Heartbeat: hb}
	if err := c.writeMethods(0, &tuneOk, &wire.ConnectionOpen{VirtualHost: u.Vhost}); err != nil {
		return err
	}
	if err := c.expect(&wire.ConnectionOpenOk{}); err != nil {
		return err
	}
	if err := c.writeMethods(channelID, &wire.ChannelOpen{}); err != nil {
		return err
	}
	return c.expect(&wire.ChannelOpenOk{})
}

// hasWord reports whether the space-separated list s holds w.
func hasWord(s, w string) bool {
	for f := range strings.FieldsSeq(s) {
		if f == w {
			return true
		}
	}
	return false
}

// expect reads frames during the handshake until a method arrives and
// decodes it into want; a connection.close gives a *ServerError.
func (c *Conn) expect(want wire.Method) error {
	for {
		f, err := c.fr.ReadFrame(c.frameMax)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", want.MethodName(), err)
		}
		if f.Type == wire.FrameHeartbeat {
			continue
		}
		if f.Type != wire.FrameMethod {
			return fmt.Errorf("frame type %d while waiting for %s: %w", f.Type, want.MethodName(), ErrProtocol)
		}
		class, method, args, err := wire.SplitMethod(f.Payload)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		if class == wire.ClassConnection && method == wire.MethodConnectionClose {
			var cl wire.ConnectionClose
			if err := cl.ReadArgs(args); err != nil {
				return fmt.Errorf("%w: %w", ErrProtocol, err)
			}
			c.wbuf = wire.AppendMethodFrame(c.wbuf[:0], 0, &wire.ConnectionCloseOk{})
			_, _ = c.nc.Write(c.wbuf)
			c.wbuf = c.wbuf[:0]
			return &ServerError{Code: cl.ReplyCode, Text: cl.ReplyText, ClassID: cl.FailingClassID, MethodID: cl.FailingMethodID}
		}
		if class != want.ClassID() || method != want.MethodID() {
			return fmt.Errorf("method %d/%d while waiting for %s: %w", class, method, want.MethodName(), ErrProtocol)
		}
		if err := want.ReadArgs(args); err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		return nil
	}
}

// writeMethods writes method frames on channel ch at once.
func (c *Conn) writeMethods(ch uint16, ms ...wire.Method) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closing {
		return c.errOr(ErrClosed)
	}
	for _, m := range ms {
		c.wbuf = wire.AppendMethodFrame(c.wbuf, ch, m)
	}
	return c.flushLocked()
}

// flushLocked writes wbuf; the caller holds wmu.
func (c *Conn) flushLocked() error {
	if len(c.wbuf) == 0 {
		return nil
	}
	_, err := c.nc.Write(c.wbuf)
	c.wbuf = c.wbuf[:0]
	c.written = true
	if err != nil {
		err = fmt.Errorf("leanamqp: write: %w", err)
		c.fail(err)
		return c.errOr(err)
	}
	return nil
}

// fail records the first error that ends the connection and wakes the
// waiters. It does not close the socket.
func (c *Conn) fail(err error) {
	c.errOnce.Do(func() {
		c.err = err
		close(c.done)
	})
}

// errOr returns the connection's error if it failed, else err.
func (c *Conn) errOr(err error) error {
	select {
	case <-c.done:
		return c.err
	default:
		return err
	}
}

// Done is closed when the connection fails or is closed; Err then says
// why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns the error that ended the connection, or nil while it is
// open. A server close is a *ServerError.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// FrameMax returns the negotiated frame_max.
func (c *Conn) FrameMax() uint32 { return c.frameMax }

// call sends a synchronous method and waits for its reply, decoded into
// reply.
func (c *Conn) call(req wire.Method, replyClass, replyMethod uint16) (wire.Method, error) {
	c.rpcMu.Lock()
	defer c.rpcMu.Unlock()
	if err := c.writeMethods(channelID, req); err != nil {
		return nil, fmt.Errorf("leanamqp: %s: %w", req.MethodName(), err)
	}
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case m := <-c.rpc:
		if m.ClassID() != replyClass || m.MethodID() != replyMethod {
			err := fmt.Errorf("leanamqp: %s answered by %s: %w", req.MethodName(), m.MethodName(), ErrProtocol)
			c.fail(err)
			return nil, err
		}
		return m, nil
	case <-c.done:
		return nil, fmt.Errorf("leanamqp: %s: %w", req.MethodName(), c.err)
	case <-t.C:
		return nil, fmt.Errorf("leanamqp: %s: no reply in %v", req.MethodName(), c.timeout)
	}
}

// Qos sets the channel's prefetch count.
func (c *Conn) Qos(prefetch int) error {
	if prefetch < 0 || prefetch > 65535 {
		return fmt.Errorf("leanamqp: prefetch %d not in [0, 65535]", prefetch)
	}
	_, err := c.call(&wire.BasicQos{PrefetchCount: uint16(prefetch)}, wire.ClassBasic, wire.MethodBasicQosOk)
	return err
}

// ConfirmSelect puts the channel in confirm mode: the publishes after it
// are confirmed to Config.OnConfirm with tags counting from 1.
func (c *Conn) ConfirmSelect() error {
	c.wmu.Lock()
	c.pubSeq = 0
	c.wmu.Unlock()
	_, err := c.call(&wire.ConfirmSelect{}, wire.ClassConfirm, wire.MethodConfirmSelectOk)
	return err
}

// Consume starts a consumer on queue; its deliveries go to
// Config.OnDelivery. args are the consume arguments (x-stream-offset),
// or nil. It returns the consumer tag.
func (c *Conn) Consume(queue, consumerTag string, noAck bool, args wire.Table) (string, error) {
	m, err := c.call(&wire.BasicConsume{Queue: queue, ConsumerTag: consumerTag, NoAck: noAck, Arguments: args},
		wire.ClassBasic, wire.MethodBasicConsumeOk)
	if err != nil {
		return "", err
	}
	return m.(*wire.BasicConsumeOk).ConsumerTag, nil
}

// Ack acknowledges deliveryTag (and every earlier tag with multiple).
// It writes at once, together with pending publishes.
func (c *Conn) Ack(deliveryTag uint64, multiple bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closing {
		return c.errOr(ErrClosed)
	}
	var a [21]byte
	c.wbuf = append(c.wbuf, appendAck(a[:0], deliveryTag, multiple)...)
	return c.flushLocked()
}

// appendAck appends a basic.ack frame on channel 1 without an interface
// conversion.
func appendAck(dst []byte, tag uint64, multiple bool) []byte {
	var bits byte
	if multiple {
		bits = 1
	}
	return append(dst,
		wire.FrameMethod, 0, channelID, 0, 0, 0, 13,
		byte(wire.ClassBasic>>8), byte(wire.ClassBasic), byte(wire.MethodBasicAck>>8), byte(wire.MethodBasicAck),
		byte(tag>>56), byte(tag>>48), byte(tag>>40), byte(tag>>32), byte(tag>>24), byte(tag>>16), byte(tag>>8), byte(tag),
		bits, wire.FrameEnd)
}

// heartbeats sends a heartbeat every interval in which nothing else was
// written, until the connection ends.
func (c *Conn) heartbeats(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.wmu.Lock()
			if !c.written && !c.closing {
				c.wbuf = wire.AppendHeartbeat(c.wbuf)
				_ = c.flushLocked()
			}
			c.written = false
			c.wmu.Unlock()
		case <-c.done:
			return
		}
	}
}

// Close closes the connection: connection.close 200, a brief wait for
// close-ok, then the socket. It returns the error that failed the
// connection earlier, if any.
func (c *Conn) Close() error {
	c.wmu.Lock()
	already := c.closing
	c.closing = true
	var werr error
	if !already && c.Err() == nil {
		c.wbuf = wire.AppendMethodFrame(c.wbuf, 0, &wire.ConnectionClose{ReplyCode: wire.ReplySuccess, ReplyText: "kthxbai"})
		_, werr = c.nc.Write(c.wbuf)
		c.wbuf = c.wbuf[:0]
	}
	c.wmu.Unlock()
	if !already && werr == nil {
		t := time.NewTimer(min(c.timeout, 2*time.Second))
		select {
		case <-c.closeOk:
		case <-c.readerDone:
		case <-t.C:
		}
		t.Stop()
	}
	c.fail(ErrClosed)
	_ = c.nc.Close()
	<-c.readerDone
	if err := c.err; err != ErrClosed {
		return err
	}
	return nil
}
