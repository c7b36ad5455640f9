package streamproto

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/internal/flow"
	"github.com/warren-mq/warren/internal/netserve"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto/wire"
	"github.com/warren-mq/warren/superstream"
)

// connState is how far a connection has come.
type connState int

const (
	stateNew           connState = iota // expecting PeerProperties / SaslHandshake
	stateAuthenticated                  // SASL done; Tune sent, expecting Tune and Open
	stateOpen                           // Open done: all commands allowed
)

// conn is one client connection. Once open, it is listed in the broker's
// connections (info.go).
type conn struct {
	// Static after newConn.
	srv         *Server
	nc          net.Conn
	log         *slog.Logger
	out         *outQueue
	ctx         context.Context // cancelled when the connection ends
	cancel      context.CancelFunc
	name        string // RabbitMQ's "peer -> local"
	connectedAt int64  // Unix ms
	stats       netserve.Counters
	ctr         queues.Counters // messages, for the Prometheus endpoint (queues/metrics.go)
	forced      chan struct{}   // closed by CloseForced; forceOnce guards the close
	forceOnce   sync.Once

	// Owned by the reader goroutine (serve). Those the handshake sets
	// (user, mechanism, peerProps, frameMax) do not change once the
	// connection is open: Info reads them then.
	br            *bufio.Reader
	scratch       []byte
	state         connState
	frameMax      uint32 // limit on incoming frames now
	tunedFrameMax uint32 // limit once open, from Tune
	user          string
	mechanism     string
	peerProps     map[string]string    // the client's PeerProperties
	tls           *tls.ConnectionState // set at the first frame on a TLS connection
	removeFn      func()               // drops the connection from the broker's list
	deliverV2     bool
	closing       bool // we sent Close and wait for its response
	closed        bool // a Close was exchanged: linger before closing the socket
	// pending is the Publish frame being dispatched; handlePublish takes
	// it when it submits the batch, else it goes back to pubFrames.
	pending *pubFrame

	heartbeat atomic.Int64 // negotiated heartbeat, ns; read by the writer
	blocked   atomic.Bool  // the reader is held by a resource alarm (alarm.go)

	// mu guards publishers and subscriptions: the reader goroutine changes
	// them, and stream deletion (another goroutine) removes entries.
	mu struct {
		sync.Mutex
		vhost      string
		publishers map[uint8]*publisher
		subs       map[uint8]*subscription
	}

	// fc is connection-level publish flow control.
	fc struct {
		sync.Mutex
		credits int
		wake    chan struct{} // closed when credits rise above the threshold; nil if no one waits
	}

	// credit bounds the bytes of Publish frames handed to streams and not
	// yet written (flow.go); static after newConn.
	credit *flow.Credit

	// pubFrames recycles Publish frames once their batch is done.
	pubFrames sync.Pool

	unwatch    func()
	writerDone chan struct{}
	// listenerConns counts the connections of the listener that accepted
	// this one (Server.Serve), for ConnectionMax; nil in tests that make
	// a conn directly.
	listenerConns *atomic.Int64
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		srv:         s,
		nc:          nc,
		log:         s.log.With("remote", nc.RemoteAddr().String()),
		name:        queues.ConnName(nc.RemoteAddr(), nc.LocalAddr()),
		connectedAt: time.Now().UnixMilli(),
		forced:      make(chan struct{}),
		frameMax:    s.initFrameMax,
		writerDone:  make(chan struct{}),
		credit:      flow.New(s.publishCredit),
	}
	c.out = newOutQueue(nc, &c.stats)
	c.br = bufio.NewReaderSize(c.stats.Reader(newSockReader(nc)), 64<<10)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.mu.publishers = map[uint8]*publisher{}
	c.mu.subs = map[uint8]*subscription{}
	c.fc.credits = initialPublishCredits
	return c
}

// errCloseConn ends the connection after what is queued is written.
var errCloseConn = errors.New("streamproto: close connection")

// Serve runs the connection: the writer goroutine and the read loop.
func (c *conn) Serve() {
	go func() {
		defer close(c.writerDone)
		hb := func() time.Duration { return time.Duration(c.heartbeat.Load()) }
		if err := c.out.writeLoop(hb, c.ctx.Done()); err != nil && c.ctx.Err() == nil {
			c.log.Debug("stream connection write", "err", err)
			c.cancel()
			c.nc.Close()
		}
	}()
	if c.listenerConns != nil {
		defer c.listenerConns.Add(-1)
	}
	c.unwatch = c.srv.broker.WatchDeletions(c.streamDeleted)
	err := c.readLoop()
	if err != nil && !errors.Is(err, errCloseConn) && !c.isForced() && !errors.Is(err, io.EOF) && c.ctx.Err() == nil {
		c.log.Debug("stream connection ended", "err", err)
	}
	c.teardown()
}

// Shutdown closes the connection from outside (server shutdown).
func (c *conn) Shutdown() {
	c.cancel()
	c.nc.Close()
}

// teardown stops subscriptions, lets the writer drain, and closes.
func (c *conn) teardown() {
	if c.removeFn != nil {
		c.removeFn()
	}
	c.unwatch()
	c.mu.Lock()
	subs := c.mu.subs
	c.mu.subs = map[uint8]*subscription{}
	c.mu.publishers = map[uint8]*publisher{}
	c.mu.Unlock()
	var members []*superstream.Member
	for _, s := range subs {
		s.stop()
		if s.sac != nil {
			members = append(members, s.sac)
		}
	}
	if len(members) > 0 {
		// After the deliveries stopped: the next members may start reading.
		c.srv.sac.Leave(members...)
	}
	c.out.close() // the writer writes what is queued (a Close, say), then exits
	select {
	case <-c.writerDone:
	case <-time.After(5 * time.Second):
	}
	c.cancel()
	if c.closed || c.closing {
		c.linger()
	}
	c.nc.Close()
	<-c.writerDone
}

// linger, after a Close exchange, ends the server's side of the socket
// and reads and drops what the client still sends until it closes its
// side or the heartbeat timeout (at most 30 s) passes: closing with the
// client's frames still arriving would reset the connection, and the
// client would see an error instead of a clean close.
func (c *conn) linger() {
	if hc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		hc.CloseWrite()
	}
	wait := 30 * time.Second
	if hb := time.Duration(c.heartbeat.Load()); hb > 0 && 2*hb < wait {
		wait = 2 * hb
	}
	c.nc.SetReadDeadline(time.Now().Add(wait))
	io.Copy(io.Discard, c.nc)
}

// readLoop reads and dispatches frames until the connection ends.
func (c *conn) readLoop() error {
	stepState := connState(-1) // the handshake step the deadline is for
	for {
		if !c.waitPublishCredits() {
			return c.ctx.Err()
		}
		switch {
		case c.state != stateOpen:
			// One deadline per step, as RabbitMQ's state timeouts: a
			// client trickling heartbeats cannot stay unauthenticated.
			if c.state != stepState {
				c.nc.SetReadDeadline(time.Now().Add(c.srv.handshakeWait))
				stepState = c.state
			}
		case c.heartbeat.Load() > 0:
			c.nc.SetReadDeadline(time.Now().Add(2*time.Duration(c.heartbeat.Load()) + time.Second))
		default:
			c.nc.SetReadDeadline(time.Time{})
		}
		// After the deadline is set: CloseForced's past deadline may have
		// been replaced.
		if c.isForced() {
			return errForced
		}
		hdr, err := c.br.Peek(4)
		if err != nil {
			if c.isForced() {
				return errForced
			}
			return err
		}
		size := binary.BigEndian.Uint32(hdr)
		if size < 4 {
			// Too short to hold a key and version: unparsable.
			if c.state == stateOpen {
				c.closeWith(wire.CodeUnknownFrame, "unknown frame")
			}
			return fmt.Errorf("frame of %d bytes: %w", size, errCloseConn)
		}
		if c.frameMax != 0 && size > c.frameMax {
			if c.state != stateOpen {
				// rabbit_stream_reader's pre-auth handling (until Open):
				// the connection fails without a Close.
				return fmt.Errorf("frame of %d bytes before the connection is open: %w", size, errCloseConn)
			}
			c.closeWith(wire.CodeFrameTooLarge, "frame too large")
			return errCloseConn
		}
		if hdr, err = c.br.Peek(6); err != nil {
			return err
		}
		key := wire.Key(binary.BigEndian.Uint16(hdr[4:]))
		if key == wire.KeyPublish && c.state == stateOpen && (!c.blockWhileAlarmed() || !c.waitForCredit()) {
			if c.isForced() {
				return errForced
			}
			return c.ctx.Err()
		}
		var body []byte
		if key == wire.KeyPublish {
			// Owned by the batch until it is confirmed.
			c.pending = c.getPubFrame(int(size))
			body = c.pending.body
		} else {
			if cap(c.scratch) < int(size) {
				c.scratch = make([]byte, size)
			}
			body = c.scratch[:size]
		}
		if _, err := c.br.Discard(4); err != nil {
			return err
		}
		if _, err := io.ReadFull(c.br, body); err != nil {
			return err
		}
		err = c.dispatch(body)
		if c.pending != nil {
			c.putPubFrame(c.pending)
			c.pending = nil
		}
		if err != nil {
			return err
		}
	}
}

// dispatch handles one frame body (key, version, fields).
func (c *conn) dispatch(body []byte) error {
	key := wire.Key(binary.BigEndian.Uint16(body))
	version := binary.BigEndian.Uint16(body[2:])
	r := reader{b: body[4:]}
	if !readsVersion(key, version) {
		// RabbitMQ's parser knows each command in its versions only:
		// another is an unknown frame (a future layout misread as
		// version 1 would be worse).
		if c.state != stateOpen {
			return fmt.Errorf("frame 0x%04x version %d before the connection is open: %w", uint16(key), version, errCloseConn)
		}
		c.closeWith(wire.CodeUnknownFrame, "unknown frame")
		return errCloseConn
	}
	if c.state != stateOpen {
		return c.dispatchHandshake(key, &r)
	}
	var err error
	switch key {
	case wire.KeyPublish:
		err = c.handlePublish(&r, version, body)
	case wire.KeyCredit:
		c.handleCredit(&r)
	case wire.KeyHeartbeat:
	case wire.KeyDeclarePublisher:
		c.handleDeclarePublisher(&r)
	case wire.KeyQueryPublisherSequence:
		c.handleQueryPublisherSequence(&r)
	case wire.KeyDeletePublisher:
		c.handleDeletePublisher(&r)
	case wire.KeySubscribe:
		c.handleSubscribe(&r)
	case wire.KeyStoreOffset:
		c.handleStoreOffset(&r)
	case wire.KeyQueryOffset:
		c.handleQueryOffset(&r)
	case wire.KeyUnsubscribe:
		c.handleUnsubscribe(&r)
	case wire.KeyCreate:
		c.handleCreate(&r)
	case wire.KeyDelete:
		c.handleDelete(&r)
	case wire.KeyMetadata:
		c.handleMetadata(&r)
	case wire.KeyExchangeCommandVersions:
		c.handleExchangeCommandVersions(&r)
	case wire.KeyStreamStats:
		c.handleStreamStats(&r)
	case wire.KeyResolveOffsetSpec:
		c.handleResolveOffsetSpec(&r)
	case wire.KeyRoute:
		c.handleRoute(&r)
	case wire.KeyPartitions:
		c.handlePartitions(&r)
	case wire.KeyCreateSuperStream:
		c.handleCreateSuperStream(&r)
	case wire.KeyDeleteSuperStream:
		c.handleDeleteSuperStream(&r)
	case wire.KeyConsumerUpdate | wire.ResponseBit:
		c.handleConsumerUpdateReply(&r)
	case wire.KeyClose:
		corr := r.u32()
		r.u16()
		r.string()
		if r.err != nil {
			// Malformed: RabbitMQ's parser makes it an unknown frame.
			c.closeWith(wire.CodeUnknownFrame, "malformed frame")
			return errCloseConn
		}
		c.respond(wire.KeyClose, corr, wire.CodeOK)
		c.closed = true
		return errCloseConn
	case wire.KeyClose | wire.ResponseBit:
		c.closed = true
		return errCloseConn
	default:
		c.closeWith(wire.CodeUnknownFrame, "unknown frame")
		return errCloseConn
	}
	if err != nil {
		return err
	}
	if r.err != nil {
		c.log.Debug("malformed frame", "key", fmt.Sprintf("0x%04x", uint16(key)), "err", r.err)
		c.closeWith(wire.CodeUnknownFrame, "malformed frame")
		return errCloseConn
	}
	return nil
}

// respond queues a response with only a code.
func (c *conn) respond(key wire.Key, corr uint32, code wire.Code) {
	c.countCode(code)
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginResponse(b, key, corr, code)
		return wire.EndFrame(b, start)
	})
}

// respondU64 queues a response with a code and one u64 field.
func (c *conn) respondU64(key wire.Key, corr uint32, code wire.Code, v uint64) {
	c.countCode(code)
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginResponse(b, key, corr, code)
		b = wire.AppendU64(b, v)
		return wire.EndFrame(b, start)
	})
}

// countCode counts an error response code for the Prometheus endpoint
// (RabbitMQ's rabbitmq_global_stream_error_*_total).
func (c *conn) countCode(code wire.Code) {
	if code != wire.CodeOK {
		c.srv.broker.StreamErrors()[uint8(code)].Add(1)
	}
}

// closeWith queues a server-initiated Close.
func (c *conn) closeWith(code wire.Code, reason string) {
	c.countCode(code)
	c.closing = true
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, wire.KeyClose, 1)
		b = wire.AppendU32(b, 0)
		b = wire.AppendU16(b, uint16(code))
		b = wire.AppendString(b, reason)
		return wire.EndFrame(b, start)
	})
}

// vhost is the connection's virtual host.
func (c *conn) vhost() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.vhost
}

// takePublishCredits uses n credits for entries handed to the log.
func (c *conn) takePublishCredits(n int) {
	c.fc.Lock()
	c.fc.credits -= n
	c.fc.Unlock()
}

// returnPublishCredits gives back n credits when entries are confirmed.
func (c *conn) returnPublishCredits(n int) {
	c.fc.Lock()
	c.fc.credits += n
	if c.fc.wake != nil && c.fc.credits > creditsRequiredForUnblocking {
		close(c.fc.wake)
		c.fc.wake = nil
	}
	c.fc.Unlock()
}

// waitPublishCredits blocks reading while the connection has no publish
// credits left. It returns false when the connection ends.
func (c *conn) waitPublishCredits() bool {
	c.fc.Lock()
	if c.fc.credits > 0 {
		c.fc.Unlock()
		return true
	}
	if c.fc.wake == nil {
		c.fc.wake = make(chan struct{})
	}
	wake := c.fc.wake
	c.fc.Unlock()
	select {
	case <-wake:
		return true
	case <-c.forced:
		return true // readLoop returns errForced
	case <-c.ctx.Done():
		return false
	}
}

// streamDeleted is called (from another goroutine) after a stream is
// deleted: drop its publishers and subscriptions here and tell the client.
func (c *conn) streamDeleted(vhost, name string) {
	c.mu.Lock()
	if vhost != c.mu.vhost {
		c.mu.Unlock()
		return
	}
	used := false
	for id, p := range c.mu.publishers {
		if p.stream == name {
			delete(c.mu.publishers, id)
			used = true
		}
	}
	var stopped []*subscription
	for id, s := range c.mu.subs {
		if s.stream == name {
			delete(c.mu.subs, id)
			stopped = append(stopped, s)
			used = true
		}
	}
	c.mu.Unlock()
	var members []*superstream.Member
	for _, s := range stopped {
		s.cancel()
		if s.sac != nil {
			members = append(members, s.sac)
			// Drop the stream's groups first, so that no member of them
			// (on any connection) is activated while they empty.
			c.srv.sac.DropStream(vhost, name, s.s)
		}
	}
	if len(members) > 0 {
		c.srv.sac.Leave(members...)
	}
	if used {
		c.streamNotAvailable(name)
	}
}

// readFailed drops subscription s after its reader failed (a damaged
// segment, say) and tells the client the stream is not available, as for
// a deleted stream, rather than leave it a subscription that never
// delivers again.
func (c *conn) readFailed(s *subscription) {
	c.mu.Lock()
	dropped := false
	for id, x := range c.mu.subs {
		if x == s {
			delete(c.mu.subs, id)
			dropped = true
		}
	}
	c.mu.Unlock()
	if !dropped {
		return // unsubscribed meanwhile
	}
	s.cancel()
	if s.sac != nil {
		c.srv.sac.Leave(s.sac)
	}
	c.streamNotAvailable(s.stream)
}

// streamNotAvailable queues MetadataUpdate(stream not available) for name.
func (c *conn) streamNotAvailable(name string) {
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, wire.KeyMetadataUpdate, 1)
		b = wire.AppendU16(b, uint16(wire.CodeStreamNotAvailable))
		b = wire.AppendString(b, name)
		return wire.EndFrame(b, start)
	})
}

// readsVersion reports whether the server reads a frame of key in that
// version: the client commands in the versions ExchangeCommandVersions
// announces, the handshake commands and the responses a client sends in
// version 1.
func readsVersion(key wire.Key, version uint16) bool {
	switch key {
	case wire.KeyPeerProperties, wire.KeySaslHandshake, wire.KeySaslAuthenticate, wire.KeyTune, wire.KeyTune | wire.ResponseBit, wire.KeyOpen,
		wire.KeyClose | wire.ResponseBit, wire.KeyConsumerUpdate | wire.ResponseBit:
		return version == 1
	}
	for _, v := range wire.ServerCommandVersions {
		if wire.Key(v[0]) == key {
			return version >= v[1] && version <= v[2]
		}
	}
	return true // not a command the server reads: refused as unknown by key
}
