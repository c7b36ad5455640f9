// Package leanstream is a minimal, allocation-light client for the
// RabbitMQ stream protocol, for benchmarks: one connection, publishers that
// write one Publish frame per batch, and subscribers that get whole chunks
// and iterate their messages in place. It speaks the v1 frames that both
// Warren and RabbitMQ 3.10+ understand (it never negotiates command
// versions, so deliveries are Deliver v1). The command keys, response
// codes and frame encoders are the server's, from
// github.com/warren-mq/warren/streamproto/wire.
package leanstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/streamproto/wire"
)

// Defaults of Config.
const (
	DefaultFrameMax  = 1 << 20
	DefaultHeartbeat = 60 * time.Second
	DefaultTimeout   = 10 * time.Second

	readBufferSize  = 4 << 20 // several replay chunks of a few hundred KB
	maxReadFrame    = 256 << 20
	writeBufferSize = 256 << 10
	// initialFrameMax bounds Publish frames before Tune.
	initialFrameMax = 1 << 20
)

// ErrClosed is returned by calls on a closed connection.
var ErrClosed = errors.New("leanstream: connection closed")

// CloseError is a server-initiated Close.
type CloseError struct {
	Code   wire.Code
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("leanstream: server closed the connection: %s: %s", e.Code.Error(), e.Reason)
}

// Unwrap makes a CloseError match ErrClosed.
func (e *CloseError) Unwrap() error { return ErrClosed }

// PublishError is one message the server refused.
type PublishError struct {
	PublishingID uint64
	Code         wire.Code
}

// Config configures a connection. Only Addr is required.
type Config struct {
	Addr     string // host:port
	User     string // default "guest"
	Password string // default "guest"
	Vhost    string // default "/"
	// ConnectionName is sent as the connection_name peer property.
	ConnectionName string
	// FrameMax and Heartbeat are what the client asks for in Tune; the
	// smaller of this and the server's value wins (0 means "no limit" on
	// either side). Defaults: 1 MiB and 60 s.
	FrameMax  uint32
	Heartbeat time.Duration
	// Timeout bounds dialing and each request; default 10 s.
	Timeout time.Duration
	// CheckCRC verifies each delivered chunk's CRC32.
	CheckCRC bool
	// TLS connects over TLS (rabbitmq-stream+tls) with the system's roots
	// (SSL_CERT_FILE names a CA file instead), or with TLSConfig when set.
	TLS       bool
	TLSConfig *tls.Config

	// The callbacks run on the connection's reader goroutine: they must
	// not block on this connection's responses. Their slices are reused
	// after they return.

	// OnConfirm gets the publishing ids of each PublishConfirm.
	OnConfirm func(publisherID uint8, ids []uint64)
	// OnPublishError gets the refused messages of each PublishError.
	OnPublishError func(publisherID uint8, errs []PublishError)
	// OnCreditError gets a Credit refusal (unknown or inactive
	// subscription).
	OnCreditError func(subscriptionID uint8, code wire.Code)
}

// ChunkHandler gets each chunk delivered to a subscription, on the reader
// goroutine. The chunk is valid only during the call.
type ChunkHandler func(c *Chunk)

// response is a response to a request with a correlation id.
type response struct {
	code wire.Code
	body []byte // after the code, copied
}

type subscription struct {
	handler   ChunkHandler
	skipBelow uint64
}

// Client is one stream-protocol connection. Its methods are safe for
// concurrent use.
type Client struct {
	cfg  Config
	conn net.Conn

	// Written before the reader starts or by the handshake, read later.
	frameMax  atomic.Uint32 // negotiated, 0 = unlimited
	heartbeat time.Duration
	props     map[string]string // server's connection properties (Open)
	peer      map[string]string // server's peer properties

	wmu sync.Mutex // guards w, wbuf, credits and creditIDs
	w   *bufio.Writer
	// wbuf is scratch space for small frames, under wmu.
	wbuf []byte
	// credits are DeferCredit's credits not yet written, per
	// subscription id; creditIDs lists the ids with some, in order.
	credits   [256]uint32
	creditIDs []uint8
	// creditsDeferred is set while credits holds any: the reader then
	// writes them before it next reads the socket.
	creditsDeferred atomic.Bool

	corr atomic.Uint32

	mu struct {
		sync.Mutex
		pending map[uint32]chan response
		subs    map[uint8]*subscription
	}

	// Reused by the reader goroutine for callbacks.
	confirmIDs  []uint64
	publishErrs []PublishError
	chunk       Chunk

	tuned     chan [2]uint32 // the server's Tune: frame max, heartbeat
	done      chan struct{}  // closed when the reader exits
	err       error          // why the reader exited; read after done
	closeOnce sync.Once
	closing   atomic.Bool
	hbStop    chan struct{}
}

// Dial connects, authenticates with PLAIN and opens vhost.
func Dial(addr, user, password, vhost string) (*Client, error) {
	return DialConfig(context.Background(), Config{Addr: addr, User: user, Password: password, Vhost: vhost})
}

// DialConfig connects as cfg says. ctx bounds the handshake.
func DialConfig(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.User == "" {
		cfg.User = "guest"
	}
	if cfg.Password == "" {
		cfg.Password = "guest"
	}
	if cfg.Vhost == "" {
		cfg.Vhost = "/"
	}
	if cfg.FrameMax == 0 {
		cfg.FrameMax = DefaultFrameMax
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("leanstream: dial %s: %w", cfg.Addr, err)
	}
	if cfg.TLS || cfg.TLSConfig != nil {
		tcfg := cfg.TLSConfig
		if tcfg == nil {
			host, _, _ := net.SplitHostPort(cfg.Addr)
			tcfg = &tls.Config{ServerName: host}
		}
		tc := tls.Client(conn, tcfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("leanstream: TLS handshake with %s: %w", cfg.Addr, err)
		}
		conn = tc
	}
	c := &Client{
		cfg:    cfg,
		conn:   conn,
		w:      bufio.NewWriterSize(conn, writeBufferSize),
		tuned:  make(chan [2]uint32, 1),
		done:   make(chan struct{}),
		hbStop: make(chan struct{}),
	}
	c.mu.pending = map[uint32]chan response{}
	c.mu.subs = map[uint8]*subscription{}
	c.frameMax.Store(initialFrameMax)
	go c.readLoop()
	if err := c.handshake(ctx); err != nil {
		c.shutdown()
		return nil, fmt.Errorf("leanstream: connect %s: %w", cfg.Addr, err)
	}
	if c.heartbeat > 0 {
		go c.heartbeatLoop()
	}
	return c, nil
}

func (c *Client) handshake(ctx context.Context) error {
	props := map[string]string{"product": "warren-leanstream", "version": "1.0", "platform": "Go"}
	if c.cfg.ConnectionName != "" {
		props["connection_name"] = c.cfg.ConnectionName
	}
	r, err := c.call(ctx, "peer properties", wire.KeyPeerProperties, func(b []byte) []byte { return appendMap(b, props) })
	if err != nil {
		return err
	}
	d := decoder{b: r.body}
	c.peer = d.strMap("peer properties")

	r, err = c.call(ctx, "sasl handshake", wire.KeySaslHandshake, nil)
	if err != nil {
		return err
	}
	d = decoder{b: r.body}
	mechs := d.strings("sasl mechanisms")
	if d.err == nil && len(mechs) > 0 && !contains(mechs, "PLAIN") {
		return fmt.Errorf("leanstream: server offers SASL %v, not PLAIN", mechs)
	}
	plain := make([]byte, 0, 2+len(c.cfg.User)+len(c.cfg.Password))
	plain = append(append(append(append(plain, 0), c.cfg.User...), 0), c.cfg.Password...)
	if _, err := c.call(ctx, "sasl authenticate", wire.KeySaslAuthenticate, func(b []byte) []byte {
		return wire.AppendBytes(wire.AppendString(b, "PLAIN"), plain)
	}); err != nil {
		return err
	}

	var tune [2]uint32
	select {
	case tune = <-c.tuned:
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return fmt.Errorf("leanstream: waiting for tune: %w", ctx.Err())
	}
	frameMax := negotiate(tune[0], c.cfg.FrameMax)
	hb := negotiate(tune[1], uint32(max(c.cfg.Heartbeat/time.Second, 1)))
	c.heartbeat = time.Duration(hb) * time.Second
	if err := c.writeFrame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, wire.KeyTune|wire.ResponseBit, 1)
		return wire.EndFrame(wire.AppendU32(wire.AppendU32(b, frameMax), hb), start)
	}); err != nil {
		return err
	}
	if frameMax == 0 {
		frameMax = 1<<31 - 1
	}
	c.frameMax.Store(frameMax)

	vhost := c.cfg.Vhost
	r, err = c.call(ctx, "open "+vhost, wire.KeyOpen, func(b []byte) []byte { return wire.AppendString(b, vhost) })
	if err != nil {
		return err
	}
	d = decoder{b: r.body}
	if len(r.body) > 0 {
		c.props = d.strMap("open properties")
	}
	return nil
}

// negotiate returns the smaller of two limits where 0 means none.
func negotiate(server, client uint32) uint32 {
	switch {
	case server == 0:
		return client
	case client == 0:
		return server
	}
	return min(server, client)
}

// appendMap appends m as a protocol map, its keys in order.
func appendMap(b []byte, m map[string]string) []byte {
	return wire.AppendStringMap(b, slices.Sorted(maps.Keys(m)), m)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// ServerProperties returns the server's peer properties.
func (c *Client) ServerProperties() map[string]string { return c.peer }

// FrameMax returns the negotiated frame size limit (0: none).
func (c *Client) FrameMax() uint32 {
	if fm := c.frameMax.Load(); fm != 1<<31-1 {
		return fm
	}
	return 0
}

// Done is closed when the connection is gone; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (nil while it is open, ErrClosed
// after Close).
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// writeFrame appends a frame with build into the scratch buffer and writes
// and flushes it.
func (c *Client) writeFrame(build func([]byte) []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = build(c.wbuf[:0])
	if _, err := c.w.Write(c.wbuf); err != nil {
		return fmt.Errorf("leanstream: write: %w", err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("leanstream: write: %w", err)
	}
	return nil
}

// call sends a request (key, version 1, a new correlation id, then what
// fields appends) and waits for its response. A code other than OK is a
// *ResponseError.
func (c *Client) call(ctx context.Context, op string, key wire.Key, fields func([]byte) []byte) (response, error) {
	id := c.corr.Add(1)
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.mu.pending == nil {
		c.mu.Unlock()
		return response{}, fmt.Errorf("leanstream: %s: %w", op, c.closedErr())
	}
	c.mu.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.mu.pending != nil {
			delete(c.mu.pending, id)
		}
		c.mu.Unlock()
	}()
	if err := c.writeFrame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, key, 1)
		b = wire.AppendU32(b, id)
		if fields != nil {
			b = fields(b)
		}
		return wire.EndFrame(b, start)
	}); err != nil {
		return response{}, fmt.Errorf("leanstream: %s: %w", op, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
	}
	select {
	case r := <-ch:
		if r.code != wire.CodeOK {
			return r, &ResponseError{Op: op, Code: r.code}
		}
		return r, nil
	case <-c.done:
		return response{}, fmt.Errorf("leanstream: %s: %w", op, c.err)
	case <-ctx.Done():
		return response{}, fmt.Errorf("leanstream: %s: no response: %w", op, ctx.Err())
	}
}

func (c *Client) closedErr() error {
	select {
	case <-c.done:
		return c.err
	default:
		return ErrClosed
	}
}

// readLoop reads frames until the connection fails, dispatching them
// where they lie in the read buffer (frameReader), so that no byte of a
// replay is copied twice on its way to the handler.
func (c *Client) readLoop() {
	fr := newFrameReader(creditWriter{c}, readBufferSize)
	err := func() error {
		for {
			// The server's chunks are not bound by the negotiated frame
			// max, so only absurd sizes are refused.
			frame, err := fr.next(maxReadFrame)
			if err != nil {
				return err
			}
			if err := c.dispatch(frame); err != nil {
				return err
			}
		}
	}()
	if c.closing.Load() && (errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF)) {
		err = ErrClosed
	} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("leanstream: connection lost: %w (%w)", err, ErrClosed)
	} else if !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("leanstream: read: %w (%w)", err, ErrClosed)
	}
	c.err = err
	c.mu.Lock()
	c.mu.pending = nil
	c.mu.Unlock()
	close(c.done)
	_ = c.conn.Close()
}

// dispatch handles one frame. An error ends the connection.
func (c *Client) dispatch(frame []byte) error {
	key := wire.Key(binary.BigEndian.Uint16(frame))
	d := decoder{b: frame[4:]}
	switch key {
	case wire.KeyDeliver:
		return c.handleDeliver(&d)
	case wire.KeyPublishConfirm:
		return c.handleConfirm(&d)
	case wire.KeyPublishError:
		return c.handlePublishError(&d)
	case wire.KeyHeartbeat, wire.KeyMetadataUpdate:
		return nil
	case wire.KeyCredit | wire.ResponseBit: // only on errors, without correlation id
		code := wire.Code(d.u16("credit response"))
		sub := d.u8("credit response")
		if d.err != nil {
			return d.err
		}
		if c.cfg.OnCreditError != nil {
			c.cfg.OnCreditError(sub, code)
		}
		return nil
	case wire.KeyTune:
		fm, hb := d.u32("tune"), d.u32("tune")
		if d.err != nil {
			return d.err
		}
		select {
		case c.tuned <- [2]uint32{fm, hb}:
		default:
		}
		return nil
	case wire.KeyClose: // server-initiated
		corr := d.u32("close")
		code := wire.Code(d.u16("close"))
		reason := d.str("close")
		if d.err != nil {
			return d.err
		}
		_ = c.writeFrame(func(b []byte) []byte {
			b, start := wire.BeginResponse(b, wire.KeyClose, corr, wire.CodeOK)
			return wire.EndFrame(b, start)
		})
		return &CloseError{Code: code, Reason: reason}
	case wire.KeyConsumerUpdate:
		return nil // only with single active consumers, which this client does not use
	}
	if key&wire.ResponseBit == 0 {
		return nil // an unknown command: ignore
	}
	corr := d.u32("response")
	code := wire.Code(d.u16("response"))
	if d.err != nil {
		return d.err
	}
	c.mu.Lock()
	ch := c.mu.pending[corr]
	c.mu.Unlock()
	if ch != nil {
		select {
		case ch <- response{code: code, body: append([]byte(nil), d.b...)}:
		default: // a duplicate correlation id
		}
	}
	return nil
}

func (c *Client) heartbeatLoop() {
	t := time.NewTicker(c.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := c.writeFrame(func(b []byte) []byte {
				b, start := wire.BeginFrame(b, wire.KeyHeartbeat, 1)
				return wire.EndFrame(b, start)
			}); err != nil {
				return
			}
		case <-c.hbStop:
			return
		case <-c.done:
			return
		}
	}
}

// Close sends Close (code OK), waits briefly for the answer and closes the
// socket. It returns nil when the connection is already gone.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		select {
		case <-c.done:
		default:
			c.closing.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.Timeout, 2*time.Second))
			_, err = c.call(ctx, "close", wire.KeyClose, func(b []byte) []byte {
				return wire.AppendString(wire.AppendU16(b, uint16(wire.CodeOK)), "OK")
			})
			cancel()
			if errors.Is(err, ErrClosed) {
				err = nil
			}
		}
		c.shutdown()
	})
	return err
}

// shutdown closes the socket and waits for the reader.
func (c *Client) shutdown() {
	c.closing.Store(true)
	close(c.hbStop)
	_ = c.conn.Close()
	<-c.done
}

// Create creates a stream with the given arguments (such as
// max-length-bytes). An existing stream gives a *ResponseError matching
// wire.CodeStreamAlreadyExists.
func (c *Client) Create(stream string, args map[string]string) error {
	_, err := c.call(context.Background(), fmt.Sprintf("create stream %q", stream), wire.KeyCreate, func(b []byte) []byte {
		return appendMap(wire.AppendString(b, stream), args)
	})
	return err
}

// Delete deletes a stream. A missing stream gives a *ResponseError
// matching wire.CodeStreamDoesNotExist.
func (c *Client) Delete(stream string) error {
	_, err := c.call(context.Background(), fmt.Sprintf("delete stream %q", stream), wire.KeyDelete, func(b []byte) []byte {
		return wire.AppendString(b, stream)
	})
	return err
}
