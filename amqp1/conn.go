package amqp1

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/amqp10/frame"
	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/internal/flow"
	"github.com/warren-mq/warren/internal/netserve"
	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
)

// conn is one AMQP 1.0 connection. The reader goroutine (Serve) runs the
// handshake and dispatches frames; the writer goroutine owns the
// socket's write side (out.go). Session and link state is guarded by mu,
// which the reader, queue dispatchers (deliveries) and store completions
// (dispositions) take briefly; no lock is held across I/O or across a
// call that waits for a queue's dispatcher.
type conn struct {
	// Static after newConn.
	srv         *Server
	cfg         *Config
	broker      *queues.Broker
	nc          net.Conn
	log         *slog.Logger
	header      frame.ProtocolHeader
	name        string // RabbitMQ's "peer -> local"
	connectedAt int64  // Unix ms
	tls         *tls.ConnectionState
	stats       netserve.Counters
	ctr         queues.Counters
	out         *output
	fr          *frame.Reader // the reader goroutine's
	credit      *flow.Credit  // publish flow control: Take by the reader, Give by store completions

	// Set during the handshake, then read-only.
	user         string
	vhost        string
	mechanism    string
	containerID  string
	peerMaxFrame uint32 // frames Warren sends stay within it
	channelMax   uint16
	heartbeat    atomic.Int64 // ns between the writer's empty frames; 0: none
	removeFn     func()       // drops the connection from the broker's list
	unwatch      func()       // stops queueDeleted
	// listenerConns counts the accepting listener's connections (nil:
	// not counted), for ConnectionMax.
	listenerConns func() int64

	mu struct {
		sync.Mutex
		sessions map[uint16]*session // by the client's channel
		closed   bool                // close sent: no more frames but close
	}

	forced     atomic.Pointer[string] // CloseForced's reason, for the reader
	kicked     chan struct{}          // closed by CloseForced: wakes a reader held by flow control
	kickOnce   sync.Once
	stop       chan struct{} // closed to stop the writer at once
	stopOnce   sync.Once
	writerDone chan struct{}
}

func newConn(s *Server, nc net.Conn, hdr frame.ProtocolHeader, buffered []byte) *conn {
	c := &conn{
		srv:         s,
		cfg:         &s.cfg,
		broker:      s.cfg.Broker,
		nc:          nc,
		log:         s.cfg.Logger.With("remote", nc.RemoteAddr().String(), "protocol", "amqp1"),
		header:      hdr,
		name:        queues.ConnName(nc.RemoteAddr(), nc.LocalAddr()),
		connectedAt: time.Now().UnixMilli(),
		out:         newOutput(),
		credit:      flow.New(s.cfg.PublishCredit),
		kicked:      make(chan struct{}),
		stop:        make(chan struct{}),
		writerDone:  make(chan struct{}),
	}
	c.mu.sessions = map[uint16]*session{}
	var r io.Reader = c.stats.Reader(nc)
	if len(buffered) > 0 {
		r = io.MultiReader(bytes.NewReader(buffered), r)
	}
	c.fr = frame.NewReader(bufio.NewReaderSize(r, 64<<10), initialMaxFrameSize)
	if tc, ok := nc.(*tls.Conn); ok {
		cs := tc.ConnectionState() // the 0-9-1 reader completed the handshake
		c.tls = &cs
	}
	return c
}

// errClosed ends the reader without further frames.
var errClosed = errors.New("amqp1: connection closed")

// Serve runs the connection to its end.
func (c *conn) Serve() {
	go func() {
		defer close(c.writerDone)
		if err := c.out.writeLoop(c.nc, &c.stats, func() time.Duration { return time.Duration(c.heartbeat.Load()) }, c.stop); err != nil {
			c.log.Debug("write", "err", err)
			c.nc.Close()
		}
	}()
	err := c.run()
	if err != nil && !errors.Is(err, errClosed) && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.log.Debug("connection ended", "err", err)
	}
	if c.unwatch != nil {
		c.unwatch()
	}
	c.endSessions()
	if c.removeFn != nil {
		c.removeFn()
	}
	c.broker.OwnerClosed(c)
	c.out.close()
	select {
	case <-c.writerDone:
	case <-time.After(5 * time.Second):
		c.stopOnce.Do(func() { close(c.stop) })
	}
	c.nc.Close()
}

// Shutdown is the server closing: tell the client and stop.
func (c *conn) Shutdown() {
	c.CloseForced("broker shutdown")
	select {
	case <-c.writerDone:
	case <-time.After(2 * time.Second):
	}
	c.nc.Close()
}

// run does the handshake, then reads frames until the connection ends.
func (c *conn) run() error {
	c.nc.SetReadDeadline(time.Now().Add(c.cfg.HandshakeTimeout))
	if err := c.handshake(); err != nil {
		var ae *amqpError
		if errors.As(err, &ae) {
			// Before open, RabbitMQ closes silently after a delay.
			c.log.Debug("handshake refused", "condition", ae.cond, "description", ae.desc)
			c.tarpit()
			return errClosed
		}
		return err
	}
	for {
		if r := c.forced.Load(); r != nil {
			return c.closeWith(&amqpError{cond: frame.CondInternalError, desc: "Connection forced: \"" + *r + "\""})
		}
		if c.cfg.Heartbeat > 0 {
			c.nc.SetReadDeadline(time.Now().Add(time.Duration(c.cfg.Heartbeat) * time.Second))
		}
		f, err := c.fr.ReadFrame()
		if err != nil {
			if r := c.forced.Load(); r != nil {
				return c.closeWith(&amqpError{cond: frame.CondInternalError, desc: "Connection forced: \"" + *r + "\""})
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return c.closeWith(&amqpError{cond: frame.CondResourceLimitExceeded, desc: "no frame received from client within idle timeout threshold"})
			}
			if errors.Is(err, frame.ErrFraming) {
				return c.closeWith(&amqpError{cond: frame.CondFramingError, desc: err.Error()})
			}
			return err
		}
		if err := c.handleFrame(f); err != nil {
			var ae *amqpError
			if errors.As(err, &ae) {
				return c.closeWith(ae)
			}
			return err
		}
	}
}

// tarpit holds a connection refused before open, as RabbitMQ's
// silent_close_delay does, so that a client cannot retry in a tight loop.
func (c *conn) tarpit() {
	if d := c.cfg.SilentCloseDelay; d > 0 {
		c.nc.SetReadDeadline(time.Now().Add(d))
		io.Copy(io.Discard, c.nc)
	}
}

// handshake runs the protocol header, SASL and open.
func (c *conn) handshake() error {
	if c.header.ID() != frame.ProtocolSASL {
		// "AMQP 0 1 0 0" without SASL first, or TLS: RabbitMQ requires
		// SASL and answers with its header.
		c.out.frames(func(b []byte) []byte { return frame.AppendProtocolHeader(b, frame.ProtocolSASL) })
		return errClosed
	}
	if err := c.sasl(); err != nil {
		return err
	}
	hdr, err := c.fr.ReadProtocolHeader()
	if err != nil {
		return err
	}
	if !hdr.Is10() || hdr.ID() != frame.ProtocolAMQP {
		c.out.frames(func(b []byte) []byte { return frame.AppendProtocolHeader(b, frame.ProtocolAMQP) })
		return errClosed
	}
	c.out.frames(func(b []byte) []byte { return frame.AppendProtocolHeader(b, frame.ProtocolAMQP) })
	p, err := c.readPerformative(frame.TypeAMQP)
	if err != nil {
		return err
	}
	open, ok := p.(*frame.Open)
	if !ok {
		return &amqpError{cond: frame.CondIllegalState, desc: fmt.Sprintf("expected open, got %T", p)}
	}
	return c.open(open)
}

// readPerformative reads a frame of type typ that is not empty and
// decodes its performative.
func (c *conn) readPerformative(typ frame.Type) (frame.Performative, error) {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if errors.Is(err, frame.ErrFraming) {
				return nil, &amqpError{cond: frame.CondFramingError, desc: err.Error()}
			}
			return nil, err
		}
		if f.Empty() {
			continue
		}
		if f.Type != typ {
			return nil, &amqpError{cond: frame.CondFramingError, desc: fmt.Sprintf("unexpected frame type %d", f.Type)}
		}
		p, _, err := frame.Decode(f.Type, f.Body)
		if err != nil {
			return nil, &amqpError{cond: frame.ConditionOf(err), desc: err.Error()}
		}
		return p, nil
	}
}

// mechanisms are the SASL mechanisms offered: auth_mechanisms in the
// configured order (as RabbitMQ's 1.0 reader keeps it), ANONYMOUS while
// an anonymous user is set, EXTERNAL on TLS connections.
func (c *conn) mechanisms() []amqp10.Symbol {
	var ms []amqp10.Symbol
	for _, m := range c.cfg.SASL.Offered(c.tls != nil) {
		ms = append(ms, amqp10.Symbol(m))
	}
	return ms
}

// sasl runs the SASL exchange after the client's SASL header.
func (c *conn) sasl() error {
	ms := c.mechanisms()
	c.out.frames(func(b []byte) []byte {
		b = frame.AppendProtocolHeader(b, frame.ProtocolSASL)
		b, _ = frame.AppendFrame(b, 0, &frame.SASLMechanisms{Mechanisms: ms})
		return b
	})
	p, err := c.readPerformative(frame.TypeSASL)
	if err != nil {
		return err
	}
	init, ok := p.(*frame.SASLInit)
	if !ok {
		return &amqpError{cond: frame.CondIllegalState, desc: fmt.Sprintf("expected sasl-init, got %T", p)}
	}
	mech := string(init.Mechanism)
	switch err := c.cfg.SASL.Check(mech, c.tls != nil); {
	case errors.Is(err, sasl.ErrUnknown):
		return &amqpError{cond: frame.CondNotFound, desc: fmt.Sprintf("unknown authentication mechanism '%s'", mech)}
	case err != nil:
		return &amqpError{cond: frame.CondNotFound, desc: fmt.Sprintf("invalid authentication mechanism '%s'", mech)}
	}
	user, err := c.authenticate(mech, init.InitialResponse)
	if ae := (*amqpError)(nil); errors.As(err, &ae) {
		return err
	}
	if err != nil {
		c.log.Info("login refused", "user", user, "mechanism", mech, "err", err)
		// As RabbitMQ: the outcome only after the delay, then the
		// socket closes.
		if d := c.cfg.SilentCloseDelay; d > 0 {
			time.Sleep(d)
		}
		c.out.frames(func(b []byte) []byte {
			b, _ = frame.AppendFrame(b, 0, &frame.SASLOutcome{Code: frame.SASLAuth})
			return b
		})
		return errClosed
	}
	c.user, c.mechanism = user, mech
	c.out.frames(func(b []byte) []byte {
		b, _ = frame.AppendFrame(b, 0, &frame.SASLOutcome{Code: frame.SASLOK})
		return b
	})
	return nil
}

// authenticate checks a sasl-init's credentials and returns the user.
// A malformed response is an *amqpError; another error refuses the
// login.
func (c *conn) authenticate(mech string, resp []byte) (string, error) {
	remote := c.nc.RemoteAddr()
	switch mech {
	case sasl.Plain:
		// authzid NUL authcid NUL passwd; RabbitMQ ignores the authzid.
		parts := strings.Split(string(resp), "\x00")
		if len(parts) != 3 {
			return "", &amqpError{cond: frame.CondDecodeError, desc: "response for mechanism PLAIN is not '[authzid]\\0user\\0password'"}
		}
		_, err := c.broker.Authenticate(parts[1], parts[2], remote)
		return parts[1], err
	case sasl.AMQPlain:
		// A field table without its length: LOGIN and PASSWORD.
		t, _, err := amqptab.ReadTable(append(binary.BigEndian.AppendUint32(nil, uint32(len(resp))), resp...))
		user, _ := t["LOGIN"].(string)
		pass, _ := t["PASSWORD"].(string)
		if err != nil || user == "" {
			return "", &amqpError{cond: frame.CondDecodeError, desc: "AMQPLAIN response is not a table with LOGIN and PASSWORD"}
		}
		_, err = c.broker.Authenticate(user, pass, remote)
		return user, err
	case sasl.Anonymous:
		// As RabbitMQ's anonymous_login_user and anonymous_login_pass
		// (guest by default, so only from loopback).
		user, pass, _ := c.cfg.SASL.AnonymousCredentials()
		_, err := c.broker.Authenticate(user, pass, remote)
		return user, err
	case sasl.External:
		user, err := tlsconf.PeerName(*c.tls, c.cfg.CertLogin)
		if err != nil {
			return "", err
		}
		_, err = c.broker.AuthenticateExternal(user, remote)
		return user, err
	}
	return "", &amqpError{cond: frame.CondNotFound, desc: fmt.Sprintf("invalid authentication mechanism '%s'", mech)}
}

// open answers the client's open, as rabbit_amqp_reader does: the vhost
// from a hostname "vhost:<name>", the limits negotiated, the connection
// listed with the broker.
func (c *conn) open(o *frame.Open) error {
	vhost := c.cfg.DefaultVHost
	if v, ok := strings.CutPrefix(o.Hostname, "vhost:"); ok {
		vhost = v
	}
	if o.MaxFrameSize < frame.MinMaxFrameSize {
		return &amqpError{cond: frame.CondFrameSizeTooSmall, desc: fmt.Sprintf("max_frame_size (%d) < minimum maximum frame size (%d)", o.MaxFrameSize, frame.MinMaxFrameSize)}
	}
	if o.IdleTimeout > 0 && o.IdleTimeout < 1000 {
		return &amqpError{cond: frame.CondNotAllowed, desc: fmt.Sprintf("idle-time-out (%d ms) < minimum idle-time-out (1000 ms)", o.IdleTimeout)}
	}
	if limit := c.cfg.ConnectionMax; limit != 0 && c.listenerConns != nil && c.listenerConns() > int64(max(limit, 0)) {
		// rabbit_amqp_reader checks the node's limit first, as 0-9-1.
		return &amqpError{cond: frame.CondResourceLimitExceeded, desc: fmt.Sprintf("connection refused: node connection limit (%d) is reached", max(limit, 0))}
	}
	if !c.broker.VHostExists(vhost) {
		return &amqpError{cond: frame.CondUnauthorizedAccess, desc: fmt.Sprintf("AMQP 1.0 connection failed: virtual host '%s' does not exist", vhost)}
	}
	if err := c.broker.CheckVHostAccess(c.user, vhost); err != nil {
		return &amqpError{cond: frame.CondUnauthorizedAccess, desc: fmt.Sprintf("access to vhost '%s' refused for user '%s'", vhost, c.user)}
	}
	c.vhost, c.containerID = vhost, o.ContainerID
	c.peerMaxFrame = o.MaxFrameSize
	c.channelMax = min(o.ChannelMax, uint16(c.cfg.SessionMax-1))
	if o.IdleTimeout > 0 {
		c.heartbeat.Store(int64(time.Duration(o.IdleTimeout) * time.Millisecond / 2))
	}
	remove, err := c.broker.OpenConn(c, c.user, c.vhost)
	if err != nil {
		return &amqpError{cond: frame.CondResourceLimitExceeded, desc: errText(err)}
	}
	c.removeFn = remove
	c.unwatch = c.broker.WatchDeletions(c.queueDeleted)
	c.fr.SetMaxFrameSize(c.cfg.MaxFrameSize)
	c.nc.SetReadDeadline(time.Time{})
	reply := &frame.Open{
		ContainerID:         "warren",
		MaxFrameSize:        c.cfg.MaxFrameSize,
		ChannelMax:          c.channelMax,
		OfferedCapabilities: []amqp10.Symbol{"LINK_PAIR_V1_0", "ANONYMOUS-RELAY"},
		Properties: amqp10.Map{
			{Key: amqp10.Symbol("product"), Value: "Warren"},
			// RabbitMQ's AMQP 1.0 clients turn features on by the
			// server's version (property filters at 4.1, direct reply-to
			// and SQL filters at 4.2): Warren says which RabbitMQ's
			// AMQP 1.0 it implements, first, then its own version.
			{Key: amqp10.Symbol("version"), Value: CompatVersion},
			{Key: amqp10.Symbol("platform"), Value: "Go"},
		},
	}
	if c.cfg.Heartbeat > 0 {
		reply.IdleTimeout = uint32(c.cfg.Heartbeat) * 1000 / 2
	}
	c.send(0, reply)
	c.log.Debug("open", "container", c.containerID, "user", c.user, "vhost", c.vhost)
	return nil
}

// send queues a frame carrying p on channel. Performatives Warren builds
// always encode.
func (c *conn) send(channel uint16, p frame.Performative) {
	c.out.frames(func(b []byte) []byte {
		b, err := frame.AppendFrame(b, channel, p)
		if err != nil {
			c.log.Error("encode", "performative", fmt.Sprintf("%T", p), "err", err)
		}
		return b
	})
}

// closeWith sends close with e, then reads (and drops) what the client
// still sends until its close, EOF or a few seconds, as RabbitMQ waits
// for the client's side of the close.
func (c *conn) closeWith(e *amqpError) error {
	c.log.Debug("closing", "condition", e.cond, "description", e.desc)
	c.mu.Lock()
	already := c.mu.closed
	c.mu.closed = true
	c.mu.Unlock()
	if !already {
		c.send(0, &frame.Close{Error: e.frameError()})
	}
	c.nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return errClosed
		}
		if p, _, err := frame.Decode(f.Type, f.Body); err == nil {
			if _, ok := p.(*frame.Close); ok {
				return errClosed
			}
		}
	}
}

// handleFrame dispatches a frame after open.
func (c *conn) handleFrame(f frame.Frame) error {
	if f.Empty() {
		return nil // a heartbeat
	}
	if f.Type != frame.TypeAMQP {
		return &amqpError{cond: frame.CondFramingError, desc: fmt.Sprintf("unexpected frame type %d in amqp mode (expected 0)", f.Type)}
	}
	if f.Channel > c.channelMax {
		return &amqpError{cond: frame.CondFramingError, desc: fmt.Sprintf("channel number (%d) exceeds maximum channel number (%d)", f.Channel, c.channelMax)}
	}
	p, payload, err := frame.Decode(f.Type, f.Body)
	if err != nil {
		return &amqpError{cond: frame.ConditionOf(err), desc: err.Error()}
	}
	switch p := p.(type) {
	case *frame.Close:
		c.mu.Lock()
		already := c.mu.closed
		c.mu.closed = true
		c.mu.Unlock()
		if !already {
			c.send(0, &frame.Close{})
		}
		return errClosed
	case *frame.Open:
		return &amqpError{cond: frame.CondIllegalState, desc: "open received on an open connection"}
	case *frame.Begin:
		return c.begin(f.Channel, p)
	}
	c.mu.Lock()
	s := c.mu.sessions[f.Channel]
	c.mu.Unlock()
	if s == nil {
		return nil // RabbitMQ drops frames of a session it does not know (ended)
	}
	return s.handle(p, payload)
}

// CloseForced closes the connection on an operator's or the broker's
// behalf (queues.Conn).
func (c *conn) CloseForced(reason string) {
	c.forced.CompareAndSwap(nil, &reason)
	c.kickOnce.Do(func() { close(c.kicked) })
	// Wake a reader blocked on the socket; it sends the close.
	c.nc.SetReadDeadline(time.Now())
}

// amqpError is an error condition for a close (connection), an end
// (session) or a detach (link).
type amqpError struct {
	cond amqp10.Symbol
	desc string
}

func (e *amqpError) Error() string { return string(e.cond) + ": " + e.desc }

func (e *amqpError) frameError() *frame.Error {
	return &frame.Error{Condition: e.cond, Description: e.desc}
}

// errText is a model error's text without its 0-9-1 constant
// ("NOT_FOUND - no queue 'q' in vhost '/'" → "no queue ...").
func errText(err error) string {
	s := err.Error()
	if qe := queues.AsError(err); qe != nil {
		if _, rest, ok := strings.Cut(qe.Text, " - "); ok {
			return rest
		}
	}
	return s
}
