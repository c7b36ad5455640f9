package streamproto

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/warren-mq/warren/internal/sasl"
	"github.com/warren-mq/warren/internal/tlsconf"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto/wire"
)

// dispatchHandshake handles frames before the connection is open:
// PeerProperties, SaslHandshake, SaslAuthenticate, Tune, Open, Close and
// Heartbeat. Anything else, or a malformed frame, drops the connection.
func (c *conn) dispatchHandshake(key wire.Key, r *reader) error {
	var err error
	if tc, ok := c.nc.(*tls.Conn); ok && c.tls == nil {
		// A frame was read: the TLS handshake is complete.
		cs := tc.ConnectionState()
		c.tls = &cs
	}
	switch key {
	case wire.KeyPeerProperties:
		c.handlePeerProperties(r)
	case wire.KeySaslHandshake:
		corr := r.u32()
		if r.err == nil {
			c.out.frame(func(b []byte) []byte {
				b, start := wire.BeginResponse(b, wire.KeySaslHandshake, corr, wire.CodeOK)
				mechs := c.srv.sasl.Offered(c.tls != nil)
				b = wire.AppendU32(b, uint32(len(mechs)))
				for _, m := range mechs {
					b = wire.AppendString(b, m)
				}
				return wire.EndFrame(b, start)
			})
		}
	case wire.KeySaslAuthenticate:
		err = c.handleSaslAuthenticate(r)
	case wire.KeyTune, wire.KeyTune | wire.ResponseBit:
		c.handleTune(r)
	case wire.KeyOpen:
		err = c.handleOpen(r)
	case wire.KeyHeartbeat:
	case wire.KeyClose:
		corr := r.u32()
		if r.err == nil {
			c.respond(wire.KeyClose, corr, wire.CodeOK)
			c.closed = true
		}
		return errCloseConn
	default:
		return fmt.Errorf("frame 0x%04x before the connection is open: %w", uint16(key), errCloseConn)
	}
	if err != nil {
		return err
	}
	if r.err != nil {
		return fmt.Errorf("malformed handshake frame 0x%04x: %v: %w", uint16(key), r.err, errCloseConn)
	}
	return nil
}

var serverPropertyKeys = []string{"cluster_name", "copyright", "information", "platform", "product", "version"}

func (c *conn) handlePeerProperties(r *reader) {
	corr := r.u32()
	peer := r.stringMap()
	if r.err != nil {
		return
	}
	c.peerProps = peer
	props := map[string]string{
		"cluster_name": "warren",
		"copyright":    "Warren authors",
		"information":  "Warren, a log-structured message broker; see its README",
		"platform":     "Go",
		"product":      "Warren",
		"version":      ServerVersion,
	}
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginResponse(b, wire.KeyPeerProperties, corr, wire.CodeOK)
		b = wire.AppendStringMap(b, serverPropertyKeys, props)
		return wire.EndFrame(b, start)
	})
}

func (c *conn) handleSaslAuthenticate(r *reader) error {
	corr := r.u32()
	mech := r.string()
	data := r.bytes()
	if r.err != nil {
		return nil
	}
	if c.state != stateNew && c.state != stateOpen {
		c.respond(wire.KeySaslAuthenticate, corr, wire.CodeSASLError)
		return errCloseConn
	}
	if err := c.srv.sasl.Check(mech, c.tls != nil); err != nil {
		// Unknown and not offered alike, as rabbit_stream_utils.
		c.log.Info("stream authentication mechanism refused", "mechanism", mech, "err", err)
		c.respond(wire.KeySaslAuthenticate, corr, wire.CodeSASLMechanismNotSupported)
		return errCloseConn
	}
	var user, pass string
	ok := true
	var err error
	switch mech {
	case sasl.Plain:
		user, pass, ok = parsePlain(data)
	case sasl.AMQPlain:
		user, pass, ok = parseAMQPlain(data)
	case sasl.Anonymous:
		// The data (a trace string) is ignored: the login is the
		// configured anonymous user's, loopback_users included.
		user, pass, _ = c.srv.sasl.AnonymousCredentials()
	}
	if !ok {
		c.respond(wire.KeySaslAuthenticate, corr, wire.CodeSASLError)
		return errCloseConn
	}
	if mech == sasl.External {
		// The data is ignored: the name comes from the verified client
		// certificate, as in rabbitmq_auth_mechanism_ssl.
		if user, err = tlsconf.PeerName(*c.tls, c.srv.certLogin); err == nil {
			_, err = c.srv.broker.AuthenticateExternal(user, c.nc.RemoteAddr())
		}
	} else {
		_, err = c.srv.broker.Authenticate(user, pass, c.nc.RemoteAddr())
	}
	if err != nil {
		code := wire.CodeAuthenticationFailure
		if errors.Is(err, queues.ErrLoopbackOnly) {
			code = wire.CodeAuthenticationLoopback
		}
		c.log.Info("stream authentication failed", "user", user, "err", err)
		c.silentClose()
		c.respond(wire.KeySaslAuthenticate, corr, code)
		return errCloseConn
	}
	c.user, c.mechanism = user, mech
	c.state = stateAuthenticated
	c.respond(wire.KeySaslAuthenticate, corr, wire.CodeOK)
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, wire.KeyTune, 1)
		b = wire.AppendU32(b, c.srv.frameMax)
		b = wire.AppendU32(b, c.srv.heartbeat)
		return wire.EndFrame(b, start)
	})
	return nil
}

// silentClose holds a refused connection for the server's
// SilentCloseDelay, reading and dropping what the client sends, before
// the refusal is sent: RabbitMQ's silent_close state, so that password
// guessing or a client retrying in a loop goes no faster than that.
func (c *conn) silentClose() {
	if c.srv.silentClose <= 0 {
		return
	}
	c.nc.SetReadDeadline(time.Now().Add(c.srv.silentClose))
	io.Copy(io.Discard, c.nc)
}

// parsePlain splits SASL PLAIN data: [authzid] NUL user NUL password.
func parsePlain(data []byte) (string, string, bool) {
	parts := bytes.Split(data, []byte{0})
	if len(parts) != 3 {
		return "", "", false
	}
	return string(parts[1]), string(parts[2]), true
}

// parseAMQPlain reads the LOGIN and PASSWORD long strings from an AMQP
// 0-9-1 field table without its length prefix, as RabbitMQ's AMQPLAIN
// mechanism receives it.
func parseAMQPlain(data []byte) (string, string, bool) {
	var user, pass string
	var haveUser, havePass bool
	for len(data) > 0 {
		n := int(data[0])
		if len(data) < 1+n+1 {
			return "", "", false
		}
		name := string(data[1 : 1+n])
		typ := data[1+n]
		data = data[2+n:]
		if typ != 'S' || len(data) < 4 {
			return "", "", false
		}
		l := int(uint32(data[0])<<24 | uint32(data[1])<<16 | uint32(data[2])<<8 | uint32(data[3]))
		if l < 0 || l > len(data)-4 {
			return "", "", false
		}
		v := string(data[4 : 4+l])
		data = data[4+l:]
		switch name {
		case "LOGIN":
			user, haveUser = v, true
		case "PASSWORD":
			pass, havePass = v, true
		}
	}
	return user, pass, haveUser && havePass
}

// handleTune takes the client's Tune reply: frame max is the smaller of
// the two (0 means no limit), and the client's heartbeat is adopted.
func (c *conn) handleTune(r *reader) {
	frameMax := r.u32()
	heartbeat := r.u32()
	if r.err != nil || c.state != stateAuthenticated {
		return
	}
	fm := c.srv.frameMax
	if frameMax != 0 && (fm == 0 || frameMax < fm) {
		fm = frameMax
	}
	c.tunedFrameMax = fm
	c.heartbeat.Store(int64(time.Duration(heartbeat) * time.Second))
}

func (c *conn) handleOpen(r *reader) error {
	corr := r.u32()
	vhost := r.string()
	if r.err != nil {
		return nil
	}
	if c.state != stateAuthenticated {
		return fmt.Errorf("open before authentication: %w", errCloseConn)
	}
	if limit := c.srv.connectionMax; limit != 0 && c.listenerConns != nil && c.listenerConns.Load() > int64(max(limit, 0)) {
		// The stream reader's first Open check: ranch's count of the
		// listener's connections, this one included.
		c.log.Info("stream open refused", "user", c.user, "vhost", vhost, "err", fmt.Sprintf("connection refused: node connection limit (%d) is reached", max(limit, 0)))
		c.silentClose()
		c.respond(wire.KeyOpen, corr, wire.CodeVirtualHostAccessFailure)
		return errCloseConn
	}
	if err := c.srv.broker.CheckVHostAccess(c.user, vhost); err != nil {
		c.log.Info("stream open refused", "user", c.user, "vhost", vhost, "err", err)
		c.silentClose()
		c.respond(wire.KeyOpen, corr, wire.CodeVirtualHostAccessFailure)
		return errCloseConn
	}
	c.mu.Lock()
	c.mu.vhost = vhost
	c.mu.Unlock()
	c.state = stateOpen
	c.frameMax = c.tunedFrameMax
	if c.frameMax == 0 {
		c.frameMax = c.srv.frameMax
	}
	// Listed before the response: a client that is open finds itself in
	// the list (and the management API). Listing counts against the
	// vhost's and the user's max-connections; over one, RabbitMQ answers
	// VIRTUAL_HOST_ACCESS_FAILURE after its silent-close delay.
	remove, err := c.srv.broker.OpenConn(c, c.user, vhost)
	if err != nil {
		c.log.Info("stream open refused", "user", c.user, "vhost", vhost, "err", err)
		c.silentClose()
		c.respond(wire.KeyOpen, corr, wire.CodeVirtualHostAccessFailure)
		return errCloseConn
	}
	c.removeFn = remove
	host, port := c.advertised()
	props := map[string]string{"advertised_host": host, "advertised_port": port}
	keys := slices.Sorted(maps.Keys(props))
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginResponse(b, wire.KeyOpen, corr, wire.CodeOK)
		b = wire.AppendStringMap(b, keys, props)
		return wire.EndFrame(b, start)
	})
	return nil
}

// advertised is the host and port this connection's clients are told to
// connect to: the TLS ones on a TLS connection, as RabbitMQ's stream
// plugin does.
func (c *conn) advertised() (host, port string) {
	if c.tls != nil {
		return c.srv.advertiseTLSHost, c.srv.advertiseTLSPort
	}
	return c.srv.advertiseHost, c.srv.advertisePort
}
