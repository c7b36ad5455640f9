package nodenet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for Config's zero fields.
const (
	DefaultTimeout          = 2 * time.Second
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultRedialMin        = 50 * time.Millisecond
	DefaultRedialMax        = 2 * time.Second
	DefaultQueueFrames      = 4096
	DefaultQueueBytes       = 64 << 20
	DefaultMaxPayload       = 128 << 20 // room for a batch with a raft message of cluster/raft's MaxMessageSize (64 MiB)
)

// Config configures a Net. Zero fields take defaults.
type Config struct {
	Cluster string            // cluster name; nodes of different clusters refuse each other
	Name    string            // this node's name
	Peers   map[string]string // every node's name → address; may include Name
	Secret  string            // shared secret; nodes must agree (empty on both is allowed)

	// Listen is the address to listen on; default Peers[Name].
	Listen string
	// Listener, when set, is used instead of listening on Listen (tests
	// open it on a free port first). Close closes it.
	Listener net.Listener
	// Dial, when set, connects to a peer's address instead of TCP (tests
	// run nodes over an in-memory network).
	Dial func(ctx context.Context, addr string) (net.Conn, error)

	Timeout           time.Duration // silence after which a peer is unreachable; default 2 s
	HeartbeatInterval time.Duration // default Timeout/4
	HandshakeTimeout  time.Duration // default 5 s
	RedialMin         time.Duration // first wait before redialing a link; default 50 ms
	RedialMax         time.Duration // the wait doubles up to this; default 2 s
	QueueFrames       int           // frames Send may queue per peer; default 4096
	QueueBytes        int           // payload bytes Send may queue per peer (a larger frame fits an empty queue); default 64 MiB
	MaxPayload        int           // largest payload; nodes must agree; default 128 MiB

	// OnReachable and OnUnreachable, when set, are called when a link to
	// an unreachable peer comes up (every peer starts unreachable), and
	// when nothing has been heard from a reachable peer for Timeout; a
	// link that drops and comes back within Timeout calls neither. They are
	// called from one goroutine, one at a time, alternating per peer;
	// they may call the Net's methods except Close, which waits for
	// that goroutine.
	OnReachable   func(peer string)
	OnUnreachable func(peer string)

	// Logger receives refusals, drops and link changes; default
	// slog.Default().
	Logger *slog.Logger
}

// ensureDefaults returns c with defaults filled in, or an error.
func (c Config) ensureDefaults() (Config, error) {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.Timeout / 4
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.RedialMin == 0 {
		c.RedialMin = DefaultRedialMin
	}
	if c.RedialMax == 0 {
		c.RedialMax = DefaultRedialMax
	}
	if c.QueueFrames == 0 {
		c.QueueFrames = DefaultQueueFrames
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if c.Listen == "" {
		c.Listen = c.Peers[c.Name]
	}
	switch {
	case c.Name == "" || len(c.Name) > 255:
		return c, fmt.Errorf("%w: node name %q: 1 to 255 bytes", ErrInvalidConfig, c.Name)
	case c.Cluster == "" || len(c.Cluster) > 255:
		return c, fmt.Errorf("%w: cluster name %q: 1 to 255 bytes", ErrInvalidConfig, c.Cluster)
	case c.Listener == nil && c.Listen == "":
		return c, fmt.Errorf("%w: no listen address for %s", ErrInvalidConfig, c.Name)
	case c.HeartbeatInterval >= c.Timeout || c.HeartbeatInterval <= 0:
		return c, fmt.Errorf("%w: heartbeat interval %v with timeout %v", ErrInvalidConfig, c.HeartbeatInterval, c.Timeout)
	case c.MaxPayload < 0 || uint64(c.MaxPayload) > 1<<32-1:
		return c, fmt.Errorf("%w: max payload %d", ErrInvalidConfig, c.MaxPayload)
	}
	for name, addr := range c.Peers {
		if name == "" || len(name) > 255 || addr == "" {
			return c, fmt.Errorf("%w: peer %q at %q", ErrInvalidConfig, name, addr)
		}
	}
	return c, nil
}

// Handler takes a frame that peer from sent on a lane. It runs on the
// link's reader goroutine: frames from one peer wait for it, so it must
// not block for long (a peer whose frames wait for Timeout is reported
// unreachable), nor call Close. It owns payload.
type Handler func(from string, payload []byte)

// ConnHandler takes a connection that peer from dialed for a lane. It
// runs on a goroutine of its own and owns conn; Close closes conn and
// waits for the handler to return, so it must not call Close.
type ConnHandler func(from string, conn net.Conn)

// handlers is the set of handlers, replaced as a whole (copy on write).
type handlers struct {
	frame [MaxLane + 1]Handler
	conn  [MaxLane + 1]ConnHandler
}

// Net is one node's side of the node-to-node transport.
type Net struct {
	// Static after New.
	cfg   Config
	local local
	peers map[string]*peer // every other node
	log   *slog.Logger
	start time.Time // base for peer.lastHeard

	handlers atomic.Pointer[handlers]
	events   eventQueue
	ctx      context.Context // cancelled by Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup // every goroutine the Net starts

	mu struct {
		sync.Mutex
		started  bool
		ln       net.Listener
		accepted map[net.Conn]struct{} // connections given to ConnHandlers
	}
}

// New returns a Net for cfg. It does nothing on the network until Start.
func New(cfg Config) (*Net, error) {
	cfg, err := cfg.ensureDefaults()
	if err != nil {
		return nil, err
	}
	n := &Net{
		cfg:   cfg,
		peers: map[string]*peer{},
		log:   cfg.Logger.With("node", cfg.Name),
		start: time.Now(),
	}
	n.local = local{cluster: cfg.Cluster, name: cfg.Name, secret: []byte(cfg.Secret), check: n.checkHello}
	for name, addr := range cfg.Peers {
		if name == cfg.Name {
			continue
		}
		n.peers[name] = newPeer(name, addr)
	}
	n.handlers.Store(&handlers{})
	n.events.signal = make(chan struct{}, 1)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.mu.accepted = map[net.Conn]struct{}{}
	return n, nil
}

// Handle sets the handler of frames on lane (nil removes it). Frames
// for a lane without a handler are dropped. Set handlers before Start
// to miss none.
func (n *Net) Handle(lane Lane, h Handler) {
	n.setHandlers(func(hs *handlers) { hs.frame[lane] = h }, lane)
}

// HandleConn sets the handler of connections dialed for lane (nil
// removes it). Dials for a lane without one are refused.
func (n *Net) HandleConn(lane Lane, h ConnHandler) {
	n.setHandlers(func(hs *handlers) { hs.conn[lane] = h }, lane)
}

func (n *Net) setHandlers(set func(*handlers), lane Lane) {
	if lane == LaneControl || lane > MaxLane {
		panic(fmt.Sprintf("nodenet: handler for lane %d", lane))
	}
	n.mu.Lock() // serializes writers
	defer n.mu.Unlock()
	hs := *n.handlers.Load()
	set(&hs)
	n.handlers.Store(&hs)
}

// Start listens, dials the peers whose names sort after this node's,
// and starts the heartbeat watchdog.
func (n *Net) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return ErrClosed
	}
	if n.mu.started {
		return fmt.Errorf("nodenet: %s: already started", n.cfg.Name)
	}
	ln := n.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", n.cfg.Listen); err != nil {
			return fmt.Errorf("nodenet: %s: listen: %w", n.cfg.Name, err)
		}
	}
	n.mu.started = true
	n.mu.ln = ln
	n.goLabelled("nodenet-accept", ln.Addr().String(), func() { n.acceptLoop(ln) })
	n.goLabelled("nodenet-watchdog", n.cfg.Name, n.watchdog)
	n.goLabelled("nodenet-events", n.cfg.Name, n.notifyLoop)
	for _, name := range sortedNames(n.peers) {
		if n.cfg.Name < name && !n.peers[name].isForgotten() {
			p := n.peers[name]
			n.goLabelled("nodenet-dial", name, func() { n.dialLoop(p) })
		}
	}
	return nil
}

// goLabelled runs f on a goroutine the Net waits for, labelled for
// profiles.
func (n *Net) goLabelled(key, value string, f func()) {
	n.wg.Add(1)
	go pprof.Do(context.Background(), pprof.Labels(key, value), func(context.Context) {
		defer n.wg.Done()
		f()
	})
}

// Addr returns the address the Net listens on, nil before Start.
func (n *Net) Addr() net.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.ln == nil {
		return nil
	}
	return n.mu.ln.Addr()
}

// Close stops the Net: it closes the listener, every link and every
// connection given to a ConnHandler, and waits for its goroutines and
// handlers. Connections returned by Dial are the caller's to close.
func (n *Net) Close() error {
	n.cancel()
	n.mu.Lock()
	if n.mu.ln != nil {
		n.mu.ln.Close()
	} else if n.cfg.Listener != nil {
		n.cfg.Listener.Close()
	}
	for c := range n.mu.accepted {
		c.Close()
	}
	n.mu.Unlock()
	for _, p := range n.peers {
		p.mu.Lock()
		l := p.mu.link
		p.mu.Unlock()
		if l != nil {
			l.close(ErrClosed)
		}
	}
	n.wg.Wait()
	return nil
}

// Send queues payload for peer on lane and returns at once. Frames to
// one peer are written in the order they were queued, on every lane
// together; a frame may be lost when the link drops (never duplicated
// or reordered). When the peer's queue is full (a slow, stuck or
// unreachable peer) Send drops the frame and returns ErrQueueFull; the
// drop is counted in PeerStats. While the peer is unreachable its queue
// is emptied every HeartbeatInterval, also counted. Raft tolerates such loss; a lane that
// cannot should use Dial. The Net keeps payload until it is written:
// the caller must not change it.
func (n *Net) Send(peer string, lane Lane, payload []byte) error {
	if lane == LaneControl || lane > MaxLane {
		return fmt.Errorf("%w: %d", ErrInvalidLane, lane)
	}
	p := n.peers[peer]
	if p == nil {
		return fmt.Errorf("%w: %q", ErrUnknownPeer, peer)
	}
	if p.isForgotten() {
		return fmt.Errorf("%w: %q", ErrForgotten, peer)
	}
	if len(payload) > n.cfg.MaxPayload {
		return fmt.Errorf("%w: %d bytes to %s, at most %d", ErrFrameTooLarge, len(payload), peer, n.cfg.MaxPayload)
	}
	if n.ctx.Err() != nil {
		return ErrClosed
	}
	if !p.q.push(outFrame{lane, payload}, n.cfg.QueueFrames, n.cfg.QueueBytes) {
		p.dropped.Add(1)
		if p.dropping.CompareAndSwap(false, true) { // log the first drop of a run
			n.log.Warn("nodenet: send queue full, dropping frames", "peer", peer, "lane", lane)
		}
		return ErrQueueFull // not wrapped: a drop under overload must not allocate
	}
	if p.dropping.Load() {
		p.dropping.Store(false)
	}
	return nil
}

// Dial opens a connection of its own to peer for lane, whose
// ConnHandler on the peer takes it, and returns it after the handshake:
// a plain byte stream with TCP's flow control, for stream replication.
// Either node of a pair may dial. nodenet sends no heartbeats on it and
// does not watch it: its lane's protocol does. The caller closes it.
func (n *Net) Dial(ctx context.Context, peer string, lane Lane) (net.Conn, error) {
	if lane == LaneControl || lane > MaxLane {
		return nil, fmt.Errorf("%w: %d", ErrInvalidLane, lane)
	}
	p := n.peers[peer]
	if p == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownPeer, peer)
	}
	if p.isForgotten() {
		return nil, fmt.Errorf("%w: %q", ErrForgotten, peer)
	}
	return n.dial(ctx, p, purposeConn, lane)
}

// dial connects to p and runs the dialer's handshake.
func (n *Net) dial(ctx context.Context, p *peer, purpose uint8, lane Lane) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.HandshakeTimeout)
	defer cancel()
	conn, err := n.cfg.Dial(ctx, p.addr)
	if err != nil {
		return nil, fmt.Errorf("nodenet: %s: dial %s at %s: %w", n.cfg.Name, p.name, p.addr, err)
	}
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	err = dialHandshake(conn, &n.local, p.name, purpose, lane)
	if !stop() || err != nil {
		conn.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("nodenet: %s: handshake with %s at %s: %w", n.cfg.Name, p.name, p.addr, err)
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// checkHello is the acceptor's policy for a dialer's hello.
func (n *Net) checkHello(h *hello) *refusal {
	if n.ctx.Err() != nil {
		return &refusal{ReasonClosing, n.cfg.Name + " is shutting down"}
	}
	if n.peers[h.from] == nil {
		return &refusal{ReasonUnknownNode, fmt.Sprintf("%q is not among %s's peers", h.from, n.cfg.Name)}
	}
	if n.peers[h.from].isForgotten() {
		return &refusal{ReasonForgotten, fmt.Sprintf("%s was removed from the cluster (forget_cluster_node) and may not rejoin under its name: "+
			"start it with a new name and an empty data directory", h.from)}
	}
	switch h.purpose {
	case purposeLink:
		if h.from > n.cfg.Name {
			return &refusal{ReasonWrongDirection, fmt.Sprintf("%s dials %s, not the other way", n.cfg.Name, h.from)}
		}
	case purposeConn:
		if h.lane == LaneControl || h.lane > MaxLane || n.handlers.Load().conn[h.lane] == nil {
			return &refusal{ReasonNoHandler, fmt.Sprintf("%s takes no connections for lane %d", n.cfg.Name, h.lane)}
		}
	}
	return nil
}

// acceptLoop accepts connections until the listener is closed.
func (n *Net) acceptLoop(ln net.Listener) {
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if n.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			n.log.Warn("nodenet: accept", "err", err)
			if !n.sleep(delay) {
				return
			}
			continue
		}
		delay = 0
		n.goLabelled("nodenet-conn", conn.RemoteAddr().String(), func() { n.serveConn(conn) })
	}
}

// serveConn runs the acceptor's handshake on conn and then its link or
// lane handler.
func (n *Net) serveConn(conn net.Conn) {
	if !n.track(conn) {
		conn.Close()
		return
	}
	defer n.untrack(conn)
	conn.SetDeadline(time.Now().Add(n.cfg.HandshakeTimeout))
	h, err := acceptHandshake(conn, &n.local)
	if err != nil {
		conn.Close()
		lvl := slog.LevelWarn
		if errors.Is(err, io.ErrUnexpectedEOF) || n.ctx.Err() != nil {
			lvl = slog.LevelDebug
		}
		n.log.Log(context.Background(), lvl, "nodenet: refused connection", "remote", conn.RemoteAddr(), "from", h.from, "err", err)
		return
	}
	conn.SetDeadline(time.Time{})
	if h.purpose == purposeLink {
		n.untrack(conn) // the link closes it
		n.runLink(n.peers[h.from], conn)
		return
	}
	if hd := n.handlers.Load().conn[h.lane]; hd != nil {
		hd(h.from, conn)
	} else {
		conn.Close()
	}
}

// track records an accepted connection for Close; false after Close.
func (n *Net) track(c net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return false
	}
	n.mu.accepted[c] = struct{}{}
	return true
}

func (n *Net) untrack(c net.Conn) {
	n.mu.Lock()
	delete(n.mu.accepted, c)
	n.mu.Unlock()
}

// dialLoop keeps the link to p (a peer whose name sorts after ours) up:
// it dials, runs the link until it fails, and dials again after a wait
// that doubles from RedialMin to RedialMax while dials fail.
func (n *Net) dialLoop(p *peer) {
	wait := n.cfg.RedialMin
	var lastErr string
	for n.ctx.Err() == nil && !p.isForgotten() {
		conn, err := n.dial(n.ctx, p, purposeLink, 0 /* lane */)
		if err != nil {
			if n.ctx.Err() != nil {
				return
			}
			// Log a failure once until it changes, not every redial.
			if s := err.Error(); s != lastErr {
				lastErr = s
				n.log.Warn("nodenet: link down", "peer", p.name, "err", err)
			}
			if !n.sleep(wait) {
				return
			}
			wait = min(2*wait, n.cfg.RedialMax)
			continue
		}
		lastErr = ""
		wait = n.cfg.RedialMin
		n.runLink(p, conn)
		if !n.sleep(wait) {
			return
		}
	}
}

// sleep waits for d or Close; false after Close.
func (n *Net) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.ctx.Done():
		return false
	}
}

// since returns the time since the Net's start, for peer.lastHeard.
func (n *Net) since() int64 { return int64(time.Since(n.start)) }

// watchdog reports peers silent for Timeout unreachable and closes
// their links, every HeartbeatInterval.
func (n *Net) watchdog() {
	t := time.NewTicker(n.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		now := n.since()
		for _, p := range n.peers {
			if p.isForgotten() {
				continue
			}
			silent := time.Duration(now - p.lastHeard.Load())
			p.mu.Lock()
			var l *link
			if p.mu.reachable && silent > n.cfg.Timeout {
				p.mu.reachable = false
				n.events.push(event{p.name, false})
				l = p.mu.link
			}
			p.mu.Unlock()
			if l != nil {
				l.close(fmt.Errorf("silent for %v", silent.Round(time.Millisecond)))
			}
			if !p.isReachable() {
				// Stale frames for a peer that is gone: raft, told it is
				// unreachable, sends afresh when it is back.
				p.dropped.Add(uint64(p.q.clear()))
			}
		}
	}
}

// PeerStats are a peer's counters.
type PeerStats struct {
	Reachable bool   // heard from within Timeout
	Links     uint64 // links established since New
	Queued    int    // frames waiting in the send queue
	Sent      uint64 // frames written to the socket
	Received  uint64 // frames read, heartbeats included
	Dropped   uint64 // frames Send refused because the queue was full, or dropped from the queue while the peer was unreachable
}

// PeerStats returns peer's counters, false for an unknown peer.
func (n *Net) PeerStats(peer string) (PeerStats, bool) {
	p := n.peers[peer]
	if p == nil || p.isForgotten() {
		return PeerStats{}, false
	}
	p.mu.Lock()
	s := PeerStats{Reachable: p.mu.reachable, Links: p.mu.links}
	p.mu.Unlock()
	s.Queued = p.q.len()
	s.Sent = p.sent.Load()
	s.Received = p.received.Load()
	s.Dropped = p.dropped.Load()
	return s, true
}

// Peers returns the names of the other nodes, sorted, without those
// forgotten.
func (n *Net) Peers() []string {
	var out []string
	for _, name := range sortedNames(n.peers) {
		if !n.peers[name].isForgotten() {
			out = append(out, name)
		}
	}
	return out
}

// Forget removes peer from the cluster for good, as far as this Net is
// concerned: its link is closed and not dialed again, Send and Dial to
// it fail with ErrForgotten, and its handshakes are refused with
// ReasonForgotten (logged on both sides), so a node that lost its data
// and comes back under its old name learns why it is kept out. It is
// reported unreachable if it was reachable. Forget may be called before
// Start.
func (n *Net) Forget(peer string) error {
	p := n.peers[peer]
	if p == nil {
		return fmt.Errorf("%w: %q", ErrUnknownPeer, peer)
	}
	p.mu.Lock()
	if p.forgotten.Load() {
		p.mu.Unlock()
		return nil
	}
	p.forgotten.Store(true) // under mu: runLink checks it there
	l := p.mu.link
	if p.mu.reachable {
		p.mu.reachable = false
		n.events.push(event{p.name, false})
	}
	p.mu.Unlock()
	if l != nil {
		l.close(ErrForgotten)
	}
	p.dropped.Add(uint64(p.q.clear()))
	n.log.Info("nodenet: peer forgotten", "peer", peer)
	return nil
}

func sortedNames(m map[string]*peer) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// event is a change of a peer's reachability.
type event struct {
	peer      string
	reachable bool
}

// eventQueue hands events to notifyLoop, in order.
type eventQueue struct {
	mu     sync.Mutex
	list   []event
	signal chan struct{} // capacity 1; never closed
}

func (q *eventQueue) push(e event) {
	q.mu.Lock()
	q.list = append(q.list, e)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// notifyLoop calls OnReachable and OnUnreachable, one event at a time.
func (n *Net) notifyLoop() {
	var batch []event
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.events.signal:
		}
		n.events.mu.Lock()
		batch, n.events.list = n.events.list, batch[:0]
		n.events.mu.Unlock()
		for _, e := range batch {
			if n.ctx.Err() != nil {
				return
			}
			switch {
			case e.reachable && n.cfg.OnReachable != nil:
				n.cfg.OnReachable(e.peer)
			case !e.reachable && n.cfg.OnUnreachable != nil:
				n.cfg.OnUnreachable(e.peer)
			}
		}
	}
}
