package amqp

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/internal/flow"
	"github.com/warren-mq/warren/internal/netserve"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
)

// ServerVersion is reported in connection.start.
const ServerVersion = "0.1.0"

// outLimit is how many queued outgoing bytes make deliveries wait.
const outLimit = 1 << 20

// conn is one client connection. The reader goroutine (serve) owns the
// handshake state and the channel table; the writer goroutine owns the
// socket's write side. Once open, it is listed in the broker's
// connections (info.go).
type conn struct {
	// Static after newConn.
	srv         *Server
	broker      *queues.Broker
	nc          net.Conn
	log         *slog.Logger
	out         *outQueue
	name        string // RabbitMQ's "peer -> local"
	connectedAt int64  // Unix ms
	ssl         bool
	tls         *tls.ConnectionState // the handshake's, once the protocol header is read; nil without TLS
	stats       netserve.Counters    // the socket's; the reader and writer add to them
	ctr         queues.Counters      // messages, for the Prometheus endpoint (queues/metrics.go)
	credit      *flow.Credit         // publish flow control (flow.go)

	// Set during the handshake, then read-only.
	user          string
	vhost         string
	mechanism     string
	clientProps   map[string]any // connection.start-ok's client properties (plainTable); not modified
	frameMax      uint32         // negotiated; bounds frames both ways
	channelMax    uint16
	heartbeat     atomic.Int64 // ns; read by the writer
	cancelNotify  bool         // client capability consumer_cancel_notify
	authFailClose bool         // client capability authentication_failure_close
	blockedNotify bool         // client capability connection.blocked
	tuned         bool         // tune-ok accepted: handshake errors answer with connection.close

	// Owned by the reader goroutine.
	fr        *wire.FrameReader
	channels  map[uint16]*channel // changed under chmu: Info reads it
	shutDown  bool                // a close handshake completed: linger before closing the socket
	lingerMax time.Duration       // if set, bounds the linger (after a frame error)
	removeFn  func()              // drops the connection from the broker's list

	// chmu guards changes to channels, which only the reader goroutine
	// makes, against Info's reads from other goroutines; the reader reads
	// channels without it.
	chmu sync.Mutex
	// forced is CloseForced's connection.close, for the reader goroutine
	// to send (info.go).
	forced atomic.Pointer[amqpError]
	// kicked is closed by CloseForced: it wakes a reader blocked by an
	// alarm (alarm.go).
	kicked chan struct{}
	// blocked is set while the reader is held by an alarm (alarm.go).
	blocked atomic.Bool
	// handedOff is the AMQP 1.0 connection this one became (handoff.go).
	handedOff atomic.Pointer[handedOffConn]

	closeOnce  sync.Once
	writerDone chan struct{}
	stop       chan struct{} // closed by shutdown
	// listenerConns counts the connections of the listener that accepted
	// this one (Server.Serve), for ConnectionMax; nil in tests that make
	// a conn directly.
	listenerConns *atomic.Int64
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		srv:         s,
		broker:      s.cfg.Broker,
		nc:          nc,
		log:         s.log.With("remote", nc.RemoteAddr().String()),
		out:         newOutQueue(outLimit),
		name:        queues.ConnName(nc.RemoteAddr(), nc.LocalAddr()),
		connectedAt: time.Now().UnixMilli(),
		ssl:         isTLS(nc),
		frameMax:    s.cfg.InitialFrameMax,
		channels:    map[uint16]*channel{},
		writerDone:  make(chan struct{}),
		stop:        make(chan struct{}),
		kicked:      make(chan struct{}),
		credit:      flow.New(s.cfg.PublishCredit),
	}
	c.fr = wire.NewFrameReader(c.stats.Reader(nc), 64<<10)
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return c
}

// errClosed ends the reader loop without further frames.
var errClosed = errors.New("amqp: connection closed")

// Serve runs the connection to its end.
func (c *conn) Serve() {
	go func() {
		defer close(c.writerDone)
		if err := c.out.writeLoop(c.nc, &c.stats, func() time.Duration { return time.Duration(c.heartbeat.Load()) }, c.stop); err != nil {
			c.log.Debug("write", "err", err)
			c.nc.Close()
		}
	}()
	if c.listenerConns != nil {
		defer c.listenerConns.Add(-1)
	}
	err := c.run()
	if c.removeFn != nil {
		c.removeFn()
	}
	if err != nil && !errors.Is(err, errClosed) && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.log.Debug("connection ended", "err", err)
	}
	c.cleanup()
	c.out.close()
	select {
	case <-c.writerDone:
	case <-time.After(5 * time.Second):
	}
	if h := c.handedOff.Load(); h != nil {
		h.Serve() // the AMQP 1.0 server owns the socket now
		return
	}
	if c.shutDown {
		c.linger()
	}
	c.nc.Close()
}

// linger, after a close handshake, ends the server's side of the socket
// and reads and drops whatever the client still sends until it closes
// its side or closeWait passes, as RabbitMQ does. Closing with the
// client's frames still arriving would reset the connection: a client
// that wrote frames after its connection.close (amqplib flushes its
// channels' frames separately) would get EPIPE or ECONNRESET instead of
// a clean close.
func (c *conn) linger() {
	if hc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		hc.CloseWrite()
	}
	wait := c.closeWait()
	if c.lingerMax > 0 {
		wait = min(wait, c.lingerMax)
	}
	c.nc.SetReadDeadline(time.Now().Add(wait))
	io.Copy(io.Discard, c.nc)
}

// closeWait bounds how long the server waits for the client's side of a
// close: the heartbeat timeout, at most 30 s.
func (c *conn) closeWait() time.Duration {
	wait := 30 * time.Second
	if hb := time.Duration(c.heartbeat.Load()); hb > 0 && hb < wait {
		wait = hb
	}
	return wait
}

// Shutdown is Server.Close: tell the client and stop.
func (c *conn) Shutdown() {
	if h := c.handedOff.Load(); h != nil {
		h.Shutdown()
		return
	}
	c.out.frames(func(b []byte) []byte {
		return wire.AppendMethodFrame(b, 0, &wire.ConnectionClose{ReplyCode: wire.ConnectionForced, ReplyText: "CONNECTION_FORCED - broker shutdown"})
	})
	// The writer sends what is queued (the close) and exits; only if it
	// cannot within two seconds is it stopped.
	c.out.close()
	select {
	case <-c.writerDone:
	case <-time.After(2 * time.Second):
		c.closeOnce.Do(func() { close(c.stop) })
	}
	c.nc.Close()
}

// cleanup closes every channel (requeueing their unacked messages) and
// deletes the connection's exclusive queues.
func (c *conn) cleanup() {
	c.closeChannels()
	c.broker.OwnerClosed(c)
}

// closeChannels shuts every channel down (requeueing their unacked
// messages) and forgets it.
func (c *conn) closeChannels() {
	for id, ch := range c.channels {
		ch.shutdown()
		ch.release()
		c.chmu.Lock()
		delete(c.channels, id)
		c.chmu.Unlock()
		c.broker.Churn().ChannelsClosed.Add(1)
	}
}

// run does the handshake, then reads frames until the connection ends.
func (c *conn) run() error {
	c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.HandshakeTimeout))
	if err := c.handshake(); err != nil {
		return err
	}
	c.nc.SetReadDeadline(time.Time{})
	// The handshake listed the connection: a CloseForced since may have
	// had its past deadline replaced.
	if e := c.forced.Load(); e != nil {
		return c.closeForced(e)
	}
	var lastDeadline time.Time
	for {
		if hb := time.Duration(c.heartbeat.Load()); hb > 0 {
			// Two silent heartbeat intervals end the connection.
			if now := time.Now(); now.Sub(lastDeadline) > hb/4 {
				c.nc.SetReadDeadline(now.Add(2 * hb))
				lastDeadline = now
				// After the new deadline: a CloseForced before it may
				// have had its past deadline replaced.
				if e := c.forced.Load(); e != nil {
					return c.closeForced(e)
				}
			}
		}
		f, err := c.fr.ReadFrame(c.frameMax)
		if err != nil {
			if e := c.forced.Load(); e != nil {
				return c.closeForced(e)
			}
			var fe *wire.FramingError
			if errors.As(err, &fe) {
				return c.fatalFrameError(framingError(fe))
			}
			return err
		}
		if isPublishFrame(f) {
			if err := c.blockWhileAlarmed(); err != nil {
				return err
			}
			if c.credit.Spent() {
				if err := c.waitForCredit(); err != nil {
					return err
				}
			}
		}
		if err := c.dispatch(f); err != nil {
			var ae *amqpError
			if errors.As(err, &ae) {
				if ae.Hard {
					return c.hardClose(ae)
				}
				continue
			}
			return err
		}
	}
}

// fatalFrameError answers a framing violation, after which the input is
// out of sync: connection.close, then the socket's input is dropped for
// SilentCloseDelay (or until the client closes) before it is closed, as
// rabbit_reader's fatal_frame_error does; closing with the client's
// bytes unread would reset the connection, and the client could lose
// the close.
func (c *conn) fatalFrameError(e *amqpError) error {
	c.log.Debug("frame error", "text", e.Text)
	c.send(0, &wire.ConnectionClose{ReplyCode: e.Code, ReplyText: e.Text, FailingClassID: e.ClassID, FailingMethodID: e.MethodID})
	c.shutDown = true
	c.lingerMax = c.srv.cfg.SilentCloseDelay
	if c.lingerMax <= 0 {
		c.lingerMax = time.Second
	}
	return errClosed
}

// hardClose sends connection.close for e and waits (bounded) for the
// client's close-ok, ignoring everything else, as RabbitMQ does.
func (c *conn) hardClose(e *amqpError) error {
	c.log.Debug("connection error", "code", e.Code, "text", e.Text)
	c.out.frames(func(b []byte) []byte {
		return wire.AppendMethodFrame(b, 0, &wire.ConnectionClose{ReplyCode: e.Code, ReplyText: e.Text, FailingClassID: e.ClassID, FailingMethodID: e.MethodID})
	})
	c.nc.SetReadDeadline(time.Now().Add(c.closeWait()))
	for {
		f, err := c.fr.ReadFrame(c.frameMax)
		if err != nil {
			return errClosed
		}
		if f.Type != wire.FrameMethod || f.Channel != 0 {
			continue
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			continue
		}
		switch m.(type) {
		case *wire.ConnectionCloseOk:
			c.shutDown = true
			return errClosed
		case *wire.ConnectionClose:
			c.send(0, &wire.ConnectionCloseOk{})
			c.shutDown = true
			return errClosed
		}
	}
}

// send queues one method frame.
func (c *conn) send(ch uint16, m wire.Method) {
	c.out.frames(func(b []byte) []byte { return wire.AppendMethodFrame(b, ch, m) })
}

// handshakeError ends a connection whose handshake failed: once tuned
// (awaiting connection.open) with connection.close, as RabbitMQ answers
// in its opening state; before that silently, the socket held for
// SilentCloseDelay with its input ignored, as rabbit_reader's
// handle_exception does in the starting and tuning states, so that a
// misbehaving client cannot retry in a tight loop.
func (c *conn) handshakeError(e *amqpError) error {
	if c.tuned {
		return c.hardClose(e)
	}
	c.log.Debug("handshake error", "code", e.Code, "text", e.Text)
	c.tarpit(c.srv.cfg.SilentCloseDelay)
	return errClosed
}

// tarpit reads and drops the client's input for d or until it closes
// its side (or Server.Close closes the socket).
func (c *conn) tarpit(d time.Duration) {
	if d <= 0 {
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(d))
	io.Copy(io.Discard, c.nc)
}

// readMethod reads the next frame during the handshake, which must be a
// method on channel 0.
func (c *conn) readMethod() (wire.Method, error) {
	for {
		f, err := c.fr.ReadFrame(c.frameMax)
		if err != nil {
			var fe *wire.FramingError
			if errors.As(err, &fe) {
				return nil, c.handshakeError(framingError(fe))
			}
			return nil, err
		}
		switch {
		case f.Type == wire.FrameHeartbeat && len(f.Payload) > 0:
			return nil, c.handshakeError(newError(wire.FrameError, "type %d, %s: unknown_frame", f.Type, octets(f.Payload)))
		case f.Type == wire.FrameHeartbeat:
			continue
		case f.Type != wire.FrameMethod || f.Channel != 0:
			return nil, c.handshakeError(newError(wire.UnexpectedFrame, "type %d, %s", f.Type, octets(f.Payload)))
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return nil, c.handshakeError(decodeError(err, f))
		}
		return m, nil
	}
}

func serverProperties() wire.Table {
	return wire.Table{
		"capabilities": wire.Table{
			"publisher_confirms":           true,
			"exchange_exchange_bindings":   true,
			"basic.nack":                   true,
			"consumer_cancel_notify":       true,
			"connection.blocked":           true,
			"consumer_priorities":          true,
			"authentication_failure_close": true,
			"per_consumer_qos":             true,
			"direct_reply_to":              true,
		},
		"cluster_name": "warren",
		"copyright":    "Warren authors",
		"information":  "Warren, a log-structured message broker; see its README",
		"platform":     "Go " + strings.TrimPrefix(runtime.Version(), "go"),
		"product":      "Warren",
		"version":      ServerVersion,
	}
}

// handshake runs protocol header, start, tune and open.
func (c *conn) handshake() error {
	hdr, err := c.fr.ReadProtocolHeader()
	if err != nil {
		return err
	}
	if c.srv.cfg.AMQP10 != nil && isAMQP10Header(hdr) {
		return c.handOff(hdr)
	}
	if !bytes.Equal(hdr[:], wire.ProtocolHeader[:]) && hdr != [8]byte{'A', 'M', 'Q', 'P', 1, 1, 0, 9} {
		// Any other header gets ours back and the socket closes.
		c.out.frames(func(b []byte) []byte { return append(b, wire.ProtocolHeader[:]...) })
		return errClosed
	}
	if tc, ok := c.nc.(*tls.Conn); ok {
		// Reading the header completed the TLS handshake.
		cs := tc.ConnectionState()
		c.tls = &cs
	}
	mechanisms := c.srv.cfg.SASL.OfferedString(c.tls != nil)
	c.send(0, &wire.ConnectionStart{
		VersionMajor:     0,
		VersionMinor:     9,
		ServerProperties: serverProperties(),
		Mechanisms:       mechanisms,
		Locales:          "en_US",
	})
	m, err := c.readMethod()
	if err != nil {
		return err
	}
	so, ok := m.(*wire.ConnectionStartOk)
	if !ok {
		return c.handshakeError(newError(wire.ChannelError, "unexpected method in connection state starting").withMethod(m))
	}
	c.mechanism = so.Mechanism
	c.clientProps = plainTable(so.ClientProperties)
	if caps, ok := so.ClientProperties["capabilities"].(wire.Table); ok {
		c.cancelNotify, _ = caps["consumer_cancel_notify"].(bool)
		c.authFailClose, _ = caps["authentication_failure_close"].(bool)
		c.blockedNotify, _ = caps["connection.blocked"].(bool)
	}
	user, err := c.authenticate(so)
	if aerr := (*amqpError)(nil); errors.As(err, &aerr) {
		return c.handshakeError(aerr.withMethod(so))
	}
	if err != nil {
		c.log.Info("login refused", "user", user, "mechanism", so.Mechanism, "err", err)
		if c.authFailClose {
			text := fmt.Sprintf("Login was refused using authentication mechanism %s. For details see the broker logfile.", so.Mechanism)
			if errors.Is(err, queues.ErrLoopbackOnly) {
				text = fmt.Sprintf("user '%s' can only connect via localhost", user)
			}
			c.out.frames(func(b []byte) []byte {
				return wire.AppendMethodFrame(b, 0, &wire.ConnectionClose{ReplyCode: wire.AccessRefused, ReplyText: "ACCESS_REFUSED - " + text})
			})
		}
		// RabbitMQ then waits for the client to close (close-ok or EOF),
		// at most the handshake timeout; Warren at most SilentCloseDelay.
		// Either way a refused login holds the socket, so that password
		// guessing cannot go faster than the client's own closes.
		c.tarpit(c.srv.cfg.SilentCloseDelay)
		return errClosed
	}
	c.user = user
	c.send(0, &wire.ConnectionTune{ChannelMax: c.srv.cfg.ChannelMax, FrameMax: c.srv.cfg.FrameMax, Heartbeat: c.srv.cfg.Heartbeat})
	m, err = c.readMethod()
	if err != nil {
		return err
	}
	to, ok := m.(*wire.ConnectionTuneOk)
	if !ok {
		return c.handshakeError(newError(wire.ChannelError, "unexpected method in connection state tuning").withMethod(m))
	}
	if e := c.negotiate(to); e != nil {
		// rabbit_reader answers a failed negotiation (not_allowed in its
		// tuning state) with connection.close.
		return c.hardClose(e.withMethod(to))
	}
	c.tuned = true
	m, err = c.readMethod()
	if err != nil {
		return err
	}
	open, ok := m.(*wire.ConnectionOpen)
	if !ok {
		return c.hardClose(newError(wire.ChannelError, "unexpected method in connection state opening").withMethod(m))
	}
	if limit := c.srv.cfg.ConnectionMax; limit != 0 && c.listenerConns != nil && c.listenerConns.Load() > int64(max(limit, 0)) {
		// rabbit_reader's first check: ranch's count of the listener's
		// connections, this one included, against connection_max.
		return c.hardClose(newError(wire.NotAllowed, "connection refused: node connection limit (%d) is reached", max(limit, 0)).withMethod(open))
	}
	if !c.broker.VHostExists(open.VirtualHost) {
		// rabbit_reader's connection limit check finds no vhost first.
		return c.hardClose(newError(wire.NotAllowed, "vhost %s not found", open.VirtualHost).withMethod(open))
	}
	if err := c.broker.CheckVHostAccess(c.user, open.VirtualHost); err != nil {
		return c.hardClose(newError(wire.NotAllowed, "access to vhost '%s' refused for user '%s'", open.VirtualHost, c.user).withMethod(open))
	}
	c.vhost = open.VirtualHost
	// Listed before open-ok: a client that is open finds itself in the
	// list (and the management API). Listing counts against the vhost's
	// and the user's max-connections.
	remove, err := c.broker.OpenConn(c, c.user, c.vhost)
	if err != nil {
		return c.hardClose(connLimitError(err, c.user, c.srv.cfg.Node).withMethod(open))
	}
	c.removeFn = remove
	c.send(0, &wire.ConnectionOpenOk{})
	return nil
}

// negotiate applies tune-ok, refusing values above what the server
// offered (RabbitMQ's validate_negotiated_integer_value).
func (c *conn) negotiate(to *wire.ConnectionTuneOk) *amqpError {
	cfg := c.srv.cfg
	if to.ChannelMax == 0 || to.ChannelMax > cfg.ChannelMax {
		return newError(wire.NotAllowed, "negotiated channel_max = %s is higher than the maximum allowed value (%d)", limitText(uint32(to.ChannelMax)), cfg.ChannelMax)
	}
	if to.FrameMax == 0 || to.FrameMax > cfg.FrameMax {
		return newError(wire.NotAllowed, "negotiated frame_max = %s is higher than the maximum allowed value (%d)", limitText(to.FrameMax), cfg.FrameMax)
	}
	if to.FrameMax < wire.FrameMinSize {
		return newError(wire.NotAllowed, "negotiated frame_max = %d is lower than the minimum allowed value (%d)", to.FrameMax, wire.FrameMinSize)
	}
	c.frameMax = to.FrameMax
	c.channelMax = to.ChannelMax
	// RabbitMQ adopts the client's heartbeat without validating it.
	c.heartbeat.Store(int64(time.Duration(to.Heartbeat) * time.Second))
	return nil
}

func limitText(v uint32) string {
	if v == 0 {
		return "0 (no limit)"
	}
	return strconv.FormatUint(uint64(v), 10)
}

// authenticate checks start-ok's credentials and returns the user name.
// A malformed response or a mechanism not offered is an *amqpError;
// another error refuses the login (ACCESS_REFUSED).
func (c *conn) authenticate(so *wire.ConnectionStartOk) (string, error) {
	switch err := c.srv.cfg.SASL.Check(so.Mechanism, c.tls != nil); {
	case errors.Is(err, sasl.ErrUnknown):
		return "", newError(wire.CommandInvalid, "unknown authentication mechanism '%s'", so.Mechanism)
	case err != nil:
		return "", newError(wire.CommandInvalid, "invalid authentication mechanism '%s'", so.Mechanism)
	}
	switch so.Mechanism {
	case sasl.External:
		// As rabbitmq_auth_mechanism_ssl: the response is ignored, the
		// name comes from the verified client certificate.
		user, err := tlsconf.PeerName(*c.tls, c.srv.cfg.CertLogin)
		if err != nil {
			return "", err
		}
		_, err = c.broker.AuthenticateExternal(user, c.nc.RemoteAddr())
		return user, err
	case sasl.Anonymous:
		// The response (a trace string) is ignored; the login is the
		// configured anonymous user's, loopback_users included.
		user, pass, _ := c.srv.cfg.SASL.AnonymousCredentials()
		_, err := c.broker.Authenticate(user, pass, c.nc.RemoteAddr())
		return user, err
	}
	user, pass, aerr := parseResponse(so.Mechanism, so.Response)
	if aerr != nil {
		return "", aerr
	}
	_, err := c.broker.Authenticate(user, pass, c.nc.RemoteAddr())
	return user, err
}

// parseResponse decodes a PLAIN or AMQPLAIN response.
func parseResponse(mechanism, response string) (user, pass string, err *amqpError) {
	switch mechanism {
	case "PLAIN":
		parts := strings.Split(response, "\x00")
		if len(parts) != 3 || parts[0] != "" {
			return "", "", newError(wire.SyntaxError, "PLAIN response is not '\\0user\\0password'")
		}
		return parts[1], parts[2], nil
	case "AMQPLAIN":
		buf := binary.BigEndian.AppendUint32(nil, uint32(len(response)))
		buf = append(buf, response...)
		t, _, terr := amqptab.ReadTable(buf)
		if terr != nil {
			return "", "", newError(wire.SyntaxError, "AMQPLAIN response: %v", terr)
		}
		u, ok1 := t["LOGIN"].(string)
		p, ok2 := t["PASSWORD"].(string)
		if !ok1 || !ok2 {
			return "", "", newError(wire.SyntaxError, "AMQPLAIN response lacks LOGIN or PASSWORD")
		}
		return u, p, nil
	}
	return "", "", newError(wire.CommandInvalid, "unknown authentication mechanism '%s'", mechanism)
}

// dispatch handles one frame of an open connection.
func (c *conn) dispatch(f wire.Frame) error {
	if f.Type == wire.FrameHeartbeat {
		switch {
		case len(f.Payload) > 0:
			// rabbit_command_assembler:analyze_frame knows no heartbeat
			// with a payload.
			return newError(wire.FrameError, "type %d, %s: unknown_frame", f.Type, octets(f.Payload))
		case f.Channel != 0:
			return newError(wire.UnexpectedFrame, "type %d, %s", f.Type, octets(f.Payload))
		}
		return nil
	}
	if f.Channel == 0 {
		if f.Type != wire.FrameMethod {
			return newError(wire.UnexpectedFrame, "type %d, %s", f.Type, octets(f.Payload))
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return decodeError(err, f)
		}
		return c.handleConnectionMethod(m)
	}
	ch := c.channels[f.Channel]
	if ch == nil {
		if f.Type != wire.FrameMethod {
			// RabbitMQ makes the channel process first, whose frame
			// assembler expects a method.
			if f.Type == wire.FrameHeader && len(f.Payload) < contentHeaderMin {
				return shortFrame(f)
			}
			return newError(wire.UnexpectedFrame, "expected method frame, got non method frame instead")
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return decodeError(err, f)
		}
		open, ok := m.(*wire.ChannelOpen)
		if !ok {
			return newError(wire.ChannelError, "expected 'channel.open'").withMethod(m)
		}
		if len(c.channels) >= int(c.channelMax) {
			return newError(wire.NotAllowed, "number of channels opened (%d) has reached the negotiated channel_max (%d)", len(c.channels), c.channelMax).withMethod(open)
		}
		release, err := c.broker.OpenChannel(c.user)
		if err != nil {
			return connLimitError(err, c.user, c.srv.cfg.Node).withMethod(open)
		}
		ch = newChannel(c, f.Channel)
		ch.release = release
		c.chmu.Lock()
		c.channels[f.Channel] = ch
		c.chmu.Unlock()
		c.broker.Churn().ChannelsOpened.Add(1)
		c.send(f.Channel, &wire.ChannelOpenOk{})
		return nil
	}
	return ch.handleFrame(f)
}

// decodeError maps a method decoding failure to RabbitMQ's answer: a
// payload too short for the ids is an unknown frame and undecodable
// arguments "cannot decode" them (rabbit_misc:frame_error), as RabbitMQ
// words them. An unknown method makes RabbitMQ's reader exit
// ({unknown_method_id, {C,M}}) and drop the socket; Warren closes the
// connection with 503 COMMAND_INVALID naming the ids instead.
func decodeError(err error, f wire.Frame) *amqpError {
	classID, methodID, args, serr := wire.SplitMethod(f.Payload)
	switch {
	case serr != nil:
		return shortFrame(f)
	case errors.Is(err, wire.ErrUnknownMethod):
		return newError(wire.CommandInvalid, "unknown method id {%d,%d}", classID, methodID)
	}
	e := newError(wire.FrameError, "cannot decode %s", erlBinaryW(args))
	e.ClassID, e.MethodID = classID, methodID
	return e
}

// shortFrame is rabbit_command_assembler's analyze_frame failing: a
// method payload shorter than its ids, a content header shorter than
// its fixed fields.
func shortFrame(f wire.Frame) *amqpError {
	return newError(wire.FrameError, "type %d, %s: unknown_frame", f.Type, octets(f.Payload))
}

func (c *conn) handleConnectionMethod(m wire.Method) error {
	switch m := m.(type) {
	case *wire.ConnectionClose:
		c.closeChannels()
		// As RabbitMQ's close_connection: the exclusive queues are gone
		// before close-ok.
		c.broker.OwnerClosed(c)
		c.send(0, &wire.ConnectionCloseOk{})
		c.shutDown = true
		return errClosed
	case *wire.ConnectionUpdateSecret:
		c.send(0, &wire.ConnectionUpdateSecretOk{})
		return nil
	default:
		return newError(wire.ChannelError, "unexpected method in connection state running").withMethod(m)
	}
}

// channelClosed forgets a channel after its close handshake.
func (c *conn) channelClosed(id uint16) {
	c.chmu.Lock()
	ch, ok := c.channels[id]
	delete(c.channels, id)
	c.chmu.Unlock()
	if ok {
		ch.release()
		c.broker.Churn().ChannelsClosed.Add(1)
	}
}
