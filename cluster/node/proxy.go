package node

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/cluster/nodenet"
	"github.com/warren-mq/warren/queues"
)

// The proxy (queues.Proxy) over nodenet's proxy lane: a client of this
// node publishing to, or consuming from, a queue another node runs.
// Every use is a connection of its own (nodenet.Dial), so TCP's flow
// control paces it and nothing is dropped: a publisher's confirms and a
// consumer's acks ride it.
//
//   - Publishing: one connection per peer, shared by every publisher of
//     this node. Publishes go in order, each with an id; the peer
//     answers each id once its queue has stored the message (or failed
//     to). A connection that ends fails what it had not answered (a
//     nack to confirming publishers: the message may or may not be
//     stored, as after any lost connection) and the next publish dials
//     again.
//   - Consuming: one connection per consumer. The peer runs a consumer
//     of its queue whose sink writes the deliveries to the connection;
//     settlements come back on it. When the connection ends, the peer
//     stops the consumer and requeues what it had not settled, as a
//     channel close does; this node's client is told the consumer was
//     cancelled (basic.cancel) and consumes again.
//
// Every connection begins with the hello (version u8 = 1, purpose u8);
// then frames: length u32 (of what follows), type u8, payload.
//
//	publish conn  → publish:  id u64 | vhost s16 | name s16 | persistent u8 | record
//	              → pubstream: id u64 | vhost s16 | name s16 | filter b32 | entry (a stream's)
//	              ← done:     id u64 | code u16 | text s16 (code 0: stored)
//	consume conn  → consume:  vhost s16 | name s16 | tag s16 | noack u8 | exclusive u8 | credited u8 |
//	                          prefetch u32 | args (queues.EncodeArgs)
//	              ← result:   code u16 | text s16 (code 0: consuming)
//	              ← deliver:  id u64 | redelivered u8 | delivery count u32 | exchange s16 | key s16 |
//	                          props b32 (annotations merged) | props10 b32 | body
//	              → settle:   mode u8 | ids u64...
//	              → credit:   n u32 (a credited consumer's SetCredit)
//	              → drain;    ← drained: unused u32 (DrainCredit)
//	              ← cancelled
//	get conn      → get:      vhost s16 | name s16 | noack u8
//	              ← result (an error), get-empty, or
//	                get-ok:   message count u32 | a deliver's payload
//	              → settle (one id; unless noack), then the peer closes
//	query conn    → query:    op u8 (1 counts, 2 purge) | vhost s16 | name s16
//	              ← result, then (code 0) a u32, a u32 (ready and
//	                consumers; purged and 0)
//
// s16 is a u16 length and bytes, b32 a u32 length and bytes. Codes are
// AMQP reply codes (queues.Error); 541 for anything else.
const (
	proxyVersion = 1

	purposePublish = 1
	purposeConsume = 2
	purposeGet     = 3
	purposeQuery   = 4

	frPublish   = 1
	frDone      = 2
	frConsume   = 3
	frResult    = 4
	frDeliver   = 5
	frSettle    = 6
	frCancelled = 7
	frPubStream = 8
	frGet       = 9
	frGetOk     = 10
	frGetEmpty  = 11
	frQuery     = 12
	frCredit    = 13
	frDrain     = 14
	frDrained   = 15

	queryCounts = 1
	queryPurge  = 2

	settleAck     = 1
	settleRequeue = 2
	settleRelease = 3
	settleDiscard = 4

	maxProxyFrame = 512 << 20 // a message's record and then some
	proxyTimeout  = 10 * time.Second
)

// errProxyLost fails what a lost proxy connection had in flight.
var errProxyLost = queues.Errorf(queues.CodeInternalError, "the connection to the queue's node was lost")

// frame building and reading.

func appendS16(b []byte, s string) []byte {
	if len(s) > 0xFFFF {
		s = s[:0xFFFF]
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendB32(b []byte, p []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
	return append(b, p...)
}

// beginFrame appends a frame's length (patched by endFrame) and type.
func beginFrame(b []byte, typ byte) ([]byte, int) {
	at := len(b)
	b = append(b, 0, 0, 0, 0, typ)
	return b, at
}

func endFrame(b []byte, at int) []byte {
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// readFrame reads one frame into buf (grown as needed).
func readFrame(br *bufio.Reader, buf []byte) (typ byte, payload, out []byte, err error) {
	var h [4]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, buf, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n == 0 || n > maxProxyFrame {
		return 0, nil, buf, fmt.Errorf("cluster: proxy frame of %d bytes", n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(br, buf); err != nil {
		return 0, nil, buf, err
	}
	return buf[0], buf[1:], buf, nil
}

// fields reads a frame's payload.
type fields struct {
	b   []byte
	err error
}

func (f *fields) need(n int) bool {
	if f.err == nil && len(f.b) < n {
		f.err = errors.New("cluster: short proxy frame")
	}
	return f.err == nil
}

func (f *fields) u8() byte {
	if !f.need(1) {
		return 0
	}
	v := f.b[0]
	f.b = f.b[1:]
	return v
}

func (f *fields) u16() uint16 {
	if !f.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(f.b)
	f.b = f.b[2:]
	return v
}

func (f *fields) u32() uint32 {
	if !f.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(f.b)
	f.b = f.b[4:]
	return v
}

func (f *fields) u64() uint64 {
	if !f.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(f.b)
	f.b = f.b[8:]
	return v
}

func (f *fields) bytes(n int) []byte {
	if !f.need(n) {
		return nil
	}
	v := f.b[:n:n]
	f.b = f.b[n:]
	return v
}

func (f *fields) s16() string { return string(f.bytes(int(f.u16()))) }
func (f *fields) b32() []byte { return f.bytes(int(f.u32())) }
func (f *fields) rest() []byte {
	v := f.b
	f.b = nil
	return v
}

// appendResult appends err as a code and text (0 and "" for nil).
func appendResult(b []byte, err error) []byte {
	if err == nil {
		b = binary.BigEndian.AppendUint16(b, 0)
		return appendS16(b, "")
	}
	code := uint16(queues.CodeInternalError)
	var qe *queues.Error
	if errors.As(err, &qe) {
		code = uint16(qe.Code)
	}
	b = binary.BigEndian.AppendUint16(b, code)
	return appendS16(b, err.Error())
}

// resultError is the error a result's code and text stand for.
func resultError(code uint16, text string) error {
	if code == 0 {
		return nil
	}
	return &queues.Error{Code: int(code), Text: text}
}

// proxy is this node's queues.Proxy.
type proxy struct {
	n  *Node
	mu sync.Mutex
	// pubs are the publish connections, by peer.
	pubs map[string]*pubConn
}

func newProxy(n *Node) *proxy { return &proxy{n: n, pubs: map[string]*pubConn{}} }

// pubConn is the publish connection to one peer.
type pubConn struct {
	p    *proxy
	node string

	mu      sync.Mutex // guards what follows; held across a dial and writes
	conn    net.Conn
	bw      *bufio.Writer
	nextID  uint64
	buf     []byte
	flushOn bool // a flush is scheduled

	// pmu guards pending, apart from mu, so that the reader takes
	// answers while a write waits for room (which the peer makes only
	// once its answers are read).
	pmu     sync.Mutex
	pending map[uint64]func(error) // unanswered publishes of conn
}

// Publish implements queues.Proxy.
func (p *proxy) Publish(node, vhost, name string, rec []byte, persistent bool, done func(error)) {
	p.pubConn(node).publish(frPublish, vhost, name, nil, rec, persistent, done)
}

// PublishStream implements queues.Proxy.
func (p *proxy) PublishStream(node, vhost, name string, entry, filter []byte, done func(error)) {
	p.pubConn(node).publish(frPubStream, vhost, name, filter, entry, false, done)
}

func (p *proxy) pubConn(node string) *pubConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := p.pubs[node]
	if pc == nil {
		pc = &pubConn{p: p, node: node}
		p.pubs[node] = pc
	}
	return pc
}

// publish sends a publish (typ frPublish: a queue record) or a stream
// publish (frPubStream: filter and entry).
func (pc *pubConn) publish(typ byte, vhost, name string, filter, data []byte, persistent bool, done func(error)) {
	pc.mu.Lock()
	if pc.conn == nil {
		if err := pc.dialLocked(); err != nil {
			pc.mu.Unlock()
			done(queues.Errorf(queues.CodeInternalError, "the node running %s is out of reach: %v", name, err))
			return
		}
	}
	pc.nextID++
	id := pc.nextID
	pc.pmu.Lock()
	pc.pending[id] = done
	pc.pmu.Unlock()
	b, at := beginFrame(pc.buf[:0], typ)
	b = binary.BigEndian.AppendUint64(b, id)
	b = appendS16(b, vhost)
	b = appendS16(b, name)
	if typ == frPubStream {
		b = appendB32(b, filter)
	} else {
		b = append(b, boolByte(persistent))
	}
	b = append(b, data...)
	b = endFrame(b, at)
	pc.buf = b[:0]
	conn := pc.conn
	conn.SetWriteDeadline(time.Now().Add(proxyTimeout))
	_, err := pc.bw.Write(b)
	if err == nil && !pc.flushOn {
		// Flush after the publishes that come meanwhile: one write
		// for a burst.
		pc.flushOn = true
		go pc.flushSoon(conn)
	}
	pc.mu.Unlock()
	if err != nil {
		pc.lost(conn, err)
	}
}

func (pc *pubConn) flushSoon(conn net.Conn) {
	time.Sleep(50 * time.Microsecond)
	pc.mu.Lock()
	pc.flushOn = false
	var err error
	if pc.conn == conn {
		err = pc.bw.Flush()
	}
	pc.mu.Unlock()
	if err != nil {
		pc.lost(conn, err)
	}
}

// dialLocked opens the publish connection and starts its reader.
// REQUIRES: pc.mu held.
func (pc *pubConn) dialLocked() error {
	ctx, cancel := context.WithTimeout(pc.p.n.ctx, 2*time.Second)
	defer cancel()
	conn, err := pc.p.n.net.Dial(ctx, pc.node, nodenet.LaneProxy)
	if err != nil {
		return err
	}
	pc.conn, pc.bw = conn, bufio.NewWriterSize(conn, 64<<10)
	pc.pmu.Lock()
	pc.pending = map[uint64]func(error){}
	pc.pmu.Unlock()
	pc.bw.Write([]byte{proxyVersion, purposePublish})
	go pc.read(conn)
	return nil
}

// read takes the peer's answers on conn.
func (pc *pubConn) read(conn net.Conn) {
	br := bufio.NewReaderSize(conn, 64<<10)
	var buf []byte
	for {
		typ, payload, out, err := readFrame(br, buf)
		buf = out
		if err == nil && typ != frDone {
			err = fmt.Errorf("cluster: proxy frame type %d on a publish connection", typ)
		}
		if err != nil {
			pc.lost(conn, err)
			return
		}
		f := fields{b: payload}
		id, code, text := f.u64(), f.u16(), f.s16()
		if f.err != nil {
			pc.lost(conn, f.err)
			return
		}
		pc.pmu.Lock()
		done := pc.pending[id]
		delete(pc.pending, id)
		pc.pmu.Unlock()
		if done != nil {
			done(resultError(code, text))
		}
	}
}

// lost ends conn, failing what it had in flight.
func (pc *pubConn) lost(conn net.Conn, err error) {
	conn.Close() // a write waiting for room ends
	pc.mu.Lock()
	if pc.conn != conn {
		pc.mu.Unlock()
		return
	}
	pc.conn, pc.bw = nil, nil
	pc.pmu.Lock()
	pending := pc.pending
	pc.pending = nil
	pc.pmu.Unlock()
	pc.mu.Unlock()
	if len(pending) > 0 {
		pc.p.n.log.Warn("cluster: proxy publish connection lost", "node", pc.node, "unanswered", len(pending), "err", err)
	}
	for _, done := range pending {
		done(errProxyLost)
	}
}

// close ends every publish connection.
func (p *proxy) close() {
	p.mu.Lock()
	pcs := make([]*pubConn, 0, len(p.pubs))
	for _, pc := range p.pubs {
		pcs = append(pcs, pc)
	}
	p.mu.Unlock()
	for _, pc := range pcs {
		pc.mu.Lock()
		conn := pc.conn
		pc.mu.Unlock()
		if conn != nil {
			pc.lost(conn, net.ErrClosed)
		}
	}
}

// remoteConsumer is a consumer of another node's queue
// (queues.RemoteSubscription).
type remoteConsumer struct {
	node, tag string
	sink      queues.Sink
	conn      net.Conn
	wmu       sync.Mutex
	stopped   atomic.Bool
	done      chan struct{} // closed when the reader ends
	log       func(msg string, args ...any)
	drained   chan uint32 // a drain's answer
	drainMu   sync.Mutex  // one drain at a time
}

// Consume implements queues.Proxy.
func (p *proxy) Consume(node, vhost, name string, o queues.ConsumerOptions, args map[string]any) (queues.RemoteSubscription, error) {
	rawArgs, err := queues.EncodeArgs(args)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(p.n.ctx, 2*time.Second)
	defer cancel()
	conn, err := p.n.net.Dial(ctx, node, nodenet.LaneProxy)
	if err != nil {
		return nil, queues.Errorf(queues.CodeNotFound, "the node '%s' running %s is out of reach: %v", node, name, err)
	}
	b := []byte{proxyVersion, purposeConsume}
	b, at := beginFrame(b, frConsume)
	b = appendS16(b, vhost)
	b = appendS16(b, name)
	b = appendS16(b, o.Tag)
	b = append(b, boolByte(o.NoAck), boolByte(o.Exclusive), boolByte(o.Credited))
	b = binary.BigEndian.AppendUint32(b, uint32(max(o.Prefetch, 0)))
	b = append(b, rawArgs...)
	b = endFrame(b, at)
	conn.SetDeadline(time.Now().Add(proxyTimeout))
	br := bufio.NewReaderSize(conn, 64<<10)
	if _, err := conn.Write(b); err != nil {
		conn.Close()
		return nil, queues.Errorf(queues.CodeNotFound, "the node '%s' running %s is out of reach: %v", node, name, err)
	}
	typ, payload, _, err := readFrame(br, nil)
	if err == nil && typ != frResult {
		err = fmt.Errorf("cluster: proxy frame type %d for a consume's result", typ)
	}
	if err != nil {
		conn.Close()
		return nil, queues.Errorf(queues.CodeNotFound, "the node '%s' running %s did not answer: %v", node, name, err)
	}
	f := fields{b: payload}
	if err := resultError(f.u16(), f.s16()); err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	rc := &remoteConsumer{node: node, tag: o.Tag, sink: o.Sink, conn: conn, done: make(chan struct{}), log: p.n.log.Debug,
		drained: make(chan uint32, 1)}
	go rc.read(br)
	return rc, nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// Node implements queues.RemoteSubscription.
func (rc *remoteConsumer) Node() string { return rc.node }

// read hands deliveries to the sink until the connection ends.
func (rc *remoteConsumer) read(br *bufio.Reader) {
	defer close(rc.done)
	var err error
	for {
		var typ byte
		var payload []byte
		// Each delivery keeps its own buffer: the sink may hold the
		// body until the client has it.
		typ, payload, _, err = readFrame(br, nil)
		if err != nil || typ == frCancelled {
			break
		}
		if typ == frDrained {
			f := fields{b: payload}
			n := f.u32()
			if err = f.err; err != nil {
				break
			}
			select {
			case rc.drained <- n:
			default:
			}
			continue
		}
		if typ != frDeliver {
			err = fmt.Errorf("cluster: proxy frame type %d on a consume connection", typ)
			break
		}
		var d *queues.Delivery
		if d, err = parseDeliver(payload); err != nil {
			break
		}
		if rc.stopped.Load() {
			continue // the peer requeues it: it was not settled
		}
		d.Via, d.ConsumerTag = rc, rc.tag
		rc.sink.Deliver(d)
	}
	rc.conn.Close()
	if !rc.stopped.Load() {
		rc.log("cluster: proxied consumer ended", "node", rc.node, "tag", rc.tag, "err", err)
		rc.sink.Cancelled(nil, rc.tag)
	}
}

// Stop implements queues.Subscription: the peer stops its consumer and
// requeues what was not settled. The connection is half-closed, not
// closed: the peer reads every settlement sent before the end, then
// stops and closes its side. Closing outright while deliveries wait
// unread here would reset the connection, and the peer would lose the
// last settlements with it (the acks would come back as redeliveries).
func (rc *remoteConsumer) Stop() {
	rc.stopped.Store(true)
	rc.wmu.Lock()
	hc, ok := rc.conn.(interface{ CloseWrite() error })
	if !ok || hc.CloseWrite() != nil {
		rc.conn.Close()
	}
	rc.wmu.Unlock()
	select {
	case <-rc.done:
	case <-time.After(proxyTimeout):
		rc.conn.Close()
		<-rc.done
	}
}

func (rc *remoteConsumer) settle(mode byte, ids []uint64) {
	if len(ids) == 0 {
		return
	}
	b, at := beginFrame(make([]byte, 0, 10+8*len(ids)), frSettle)
	b = append(b, mode)
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	b = endFrame(b, at)
	rc.wmu.Lock()
	rc.conn.SetWriteDeadline(time.Now().Add(proxyTimeout))
	_, err := rc.conn.Write(b)
	rc.wmu.Unlock()
	if err != nil {
		rc.conn.Close() // the peer requeues what it had not settled
	}
}

// write sends a frame of the client's to the peer; a failure ends the
// connection (the peer requeues what was not settled).
func (rc *remoteConsumer) write(b []byte) {
	rc.wmu.Lock()
	rc.conn.SetWriteDeadline(time.Now().Add(proxyTimeout))
	_, err := rc.conn.Write(b)
	rc.wmu.Unlock()
	if err != nil {
		rc.conn.Close()
	}
}

// SetCredit implements queues.CreditedSubscription (an AMQP 1.0 link).
func (rc *remoteConsumer) SetCredit(n int) {
	b, at := beginFrame(make([]byte, 0, 9), frCredit)
	b = binary.BigEndian.AppendUint32(b, uint32(max(n, 0)))
	rc.write(endFrame(b, at))
}

// DrainCredit implements queues.CreditedSubscription: the peer's
// consumer uses its credit up; what it did not use comes back, after
// the deliveries it made.
func (rc *remoteConsumer) DrainCredit() int {
	rc.drainMu.Lock()
	defer rc.drainMu.Unlock()
	select {
	case <-rc.drained: // a late answer to an earlier drain
	default:
	}
	b, at := beginFrame(nil, frDrain)
	rc.write(endFrame(b, at))
	select {
	case n := <-rc.drained:
		return int(n)
	case <-rc.done:
	case <-time.After(proxyTimeout):
	}
	return 0
}

// Ack, Requeue, Release and Discard implement queues.Settler.
func (rc *remoteConsumer) Ack(ids ...uint64)     { rc.settle(settleAck, ids) }
func (rc *remoteConsumer) Requeue(ids ...uint64) { rc.settle(settleRequeue, ids) }
func (rc *remoteConsumer) Release(ids ...uint64) { rc.settle(settleRelease, ids) }
func (rc *remoteConsumer) Discard(ids ...uint64) { rc.settle(settleDiscard, ids) }

// serveProxy serves a peer's proxy connection.
func (n *Node) serveProxy(from string, conn net.Conn) {
	conn.SetReadDeadline(time.Now().Add(proxyTimeout))
	var hello [2]byte
	if _, err := io.ReadFull(conn, hello[:]); err != nil || hello[0] != proxyVersion {
		n.log.Warn("cluster: bad proxy hello", "from", from, "err", err)
		conn.Close()
		return
	}
	conn.SetReadDeadline(time.Time{})
	switch hello[1] {
	case purposePublish:
		n.servePublish(from, conn)
	case purposeConsume:
		n.serveConsume(from, conn)
	case purposeGet:
		n.serveGet(from, conn)
	case purposeQuery:
		n.serveQuery(from, conn)
	default:
		conn.Close()
	}
}

// servePublish stores a peer's publishes in this node's queues and
// answers each once stored.
func (n *Node) servePublish(from string, conn net.Conn) {
	defer conn.Close()
	var wmu sync.Mutex
	bw := bufio.NewWriterSize(conn, 64<<10)
	var unflushed atomic.Int64
	answer := func(id uint64, err error) {
		b, at := beginFrame(make([]byte, 0, 32), frDone)
		b = binary.BigEndian.AppendUint64(b, id)
		b = appendResult(b, err)
		b = endFrame(b, at)
		wmu.Lock()
		conn.SetWriteDeadline(time.Now().Add(proxyTimeout))
		bw.Write(b)
		// The last answer of a burst flushes.
		if unflushed.Add(-1) == 0 {
			if err := bw.Flush(); err != nil {
				conn.Close()
			}
		}
		wmu.Unlock()
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	var buf []byte
	b := n.cfg.Broker
	for {
		typ, payload, out, err := readFrame(br, buf)
		buf = out
		if err == nil && typ != frPublish && typ != frPubStream {
			err = fmt.Errorf("cluster: proxy frame type %d on a publish connection", typ)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				n.log.Debug("cluster: proxy publish connection", "from", from, "err", err)
			}
			return
		}
		if typ == frPubStream {
			id, vhost, name, filter, entry, err := parsePubStream(payload)
			if err != nil {
				return
			}
			// The stream keeps them until written.
			entry, filter = append([]byte(nil), entry...), cloneOrNil(filter)
			unflushed.Add(1)
			b.PublishStreamHere(vhost, name, entry, filter, func(err error) { answer(id, err) })
			continue
		}
		id, vhost, name, persistent, rec, err := parsePublish(payload)
		if err != nil {
			return
		}
		rec = append([]byte(nil), rec...) // the queue keeps it until stored
		unflushed.Add(1)
		b.PublishHere(vhost, name, rec, persistent, func(err error) { answer(id, err) })
	}
}

// proxySink is the consumer of a peer's client at a queue of this node:
// it writes the deliveries to the peer's connection and keeps what was
// not settled, requeued when the connection ends.
type proxySink struct {
	conn    net.Conn
	noAck   bool
	wmu     sync.Mutex
	buf     []byte
	mu      sync.Mutex
	unacked map[uint64]queues.Settler
}

func (s *proxySink) Deliver(d *queues.Delivery) {
	if !s.noAck {
		s.mu.Lock()
		s.unacked[d.ID] = d.Settler()
		s.mu.Unlock()
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b, at := beginFrame(s.buf[:0], frDeliver)
	b = endFrame(appendDelivery(b, d), at)
	s.buf = b[:0]
	s.conn.SetWriteDeadline(time.Now().Add(proxyTimeout))
	if _, err := s.conn.Write(b); err != nil {
		s.conn.Close() // the reader ends the consumer
	}
}

func (s *proxySink) Cancelled(_ *queues.Queue, _ string) {
	b, at := beginFrame(nil, frCancelled)
	b = endFrame(b, at)
	s.wmu.Lock()
	s.conn.SetWriteDeadline(time.Now().Add(proxyTimeout))
	s.conn.Write(b)
	s.wmu.Unlock()
	s.conn.Close()
}

// serveConsume runs a peer client's consumer of a queue of this node
// for as long as the connection lasts.
func (n *Node) serveConsume(from string, conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 64<<10)
	conn.SetReadDeadline(time.Now().Add(proxyTimeout))
	typ, payload, _, err := readFrame(br, nil)
	conn.SetReadDeadline(time.Time{})
	if err != nil || typ != frConsume {
		return
	}
	req, err := parseConsume(payload)
	if err != nil {
		return
	}
	vhost, name, tag, noAck, exclusive, prefetch := req.vhost, req.name, req.tag, req.noAck, req.exclusive, req.prefetch
	s := &proxySink{conn: conn, noAck: noAck, unacked: map[uint64]queues.Settler{}}
	args, err := queues.DecodeArgs(req.args)
	var sub queues.Subscription
	if err == nil {
		// Under the sink's write lock: the first delivery follows the
		// result.
		s.wmu.Lock()
		sub, err = n.cfg.Broker.ConsumeHere(vhost, name, queues.ConsumerOptions{
			Tag: tag, NoAck: noAck, Exclusive: exclusive, Prefetch: prefetch, Owner: s, Sink: s, Credited: req.credited,
		}, args)
		b, at := beginFrame(nil, frResult)
		b = appendResult(b, err)
		b = endFrame(b, at)
		conn.SetWriteDeadline(time.Now().Add(proxyTimeout))
		_, werr := conn.Write(b)
		s.wmu.Unlock()
		if werr != nil && err == nil {
			err = werr
		}
	} else {
		b, at := beginFrame(nil, frResult)
		conn.Write(endFrame(appendResult(b, err), at))
	}
	if err != nil {
		if sub != nil {
			sub.Stop()
		}
		return
	}
	var buf []byte
	for {
		typ, payload, out, err := readFrame(br, buf)
		buf = out
		if err != nil {
			break
		}
		cs, credited := sub.(queues.CreditedSubscription)
		switch {
		case typ == frSettle:
			mode, ids, err := parseSettle(payload)
			if err != nil {
				break
			}
			s.settle(mode, ids)
			continue
		case typ == frCredit && credited:
			f := fields{b: payload}
			n := f.u32()
			if f.err != nil {
				break
			}
			cs.SetCredit(int(min(n, 1<<31-1)))
			continue
		case typ == frDrain && credited:
			left := cs.DrainCredit()
			b, at := beginFrame(nil, frDrained)
			b = binary.BigEndian.AppendUint32(b, uint32(max(left, 0)))
			s.wmu.Lock()
			conn.SetWriteDeadline(time.Now().Add(proxyTimeout))
			_, werr := conn.Write(endFrame(b, at))
			s.wmu.Unlock()
			if werr == nil {
				continue
			}
		}
		break
	}
	sub.Stop()
	// What the peer's client had not settled goes back, as a channel
	// close returns it.
	s.mu.Lock()
	left := s.unacked
	s.unacked = nil
	s.mu.Unlock()
	byQ := map[queues.Settler][]uint64{}
	for id, q := range left {
		byQ[q] = append(byQ[q], id)
	}
	for q, ids := range byQ {
		q.Requeue(sortIDs(ids)...)
	}
}

// settle applies a peer's settlement of deliveries of this consumer.
func (s *proxySink) settle(mode byte, ids []uint64) {
	byQ := map[queues.Settler][]uint64{}
	s.mu.Lock()
	for _, id := range ids {
		if q, ok := s.unacked[id]; ok {
			delete(s.unacked, id)
			byQ[q] = append(byQ[q], id)
		}
	}
	s.mu.Unlock()
	for q, ids := range byQ {
		s.apply(q, mode, ids)
	}
}

// apply settles ids at q as mode says.
func (*proxySink) apply(q queues.Settler, mode byte, ids []uint64) {
	switch mode {
	case settleAck:
		q.Ack(ids...)
	case settleRequeue:
		q.Requeue(ids...)
	case settleRelease:
		q.Release(ids...)
	case settleDiscard:
		q.Discard(ids...)
	}
}

func sortIDs(ids []uint64) []uint64 {
	slices.Sort(ids)
	return ids
}

// The frames' parsers: each takes a frame's payload (after its type).
// They allocate only what they return, and never keep payload except
// where their results alias it.

// parsePublish parses a publish frame.
func parsePublish(p []byte) (id uint64, vhost, name string, persistent bool, rec []byte, err error) {
	f := fields{b: p}
	id = f.u64()
	vhost, name = f.s16(), f.s16()
	persistent = f.u8() == 1
	rec = f.rest()
	return id, vhost, name, persistent, rec, f.err
}

// parsePubStream parses a stream publish frame.
func parsePubStream(p []byte) (id uint64, vhost, name string, filter, entry []byte, err error) {
	f := fields{b: p}
	id = f.u64()
	vhost, name = f.s16(), f.s16()
	filter = f.b32()
	entry = f.rest()
	if f.err == nil && len(entry) < 4 {
		f.err = errors.New("cluster: short stream entry")
	}
	return id, vhost, name, filter, entry, f.err
}

func cloneOrNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// consumeReq is a consume frame.
type consumeReq struct {
	vhost, name, tag           string
	noAck, exclusive, credited bool
	prefetch                   int
	args                       []byte // queues.EncodeArgs
}

func parseConsume(p []byte) (consumeReq, error) {
	f := fields{b: p}
	var r consumeReq
	r.vhost, r.name, r.tag = f.s16(), f.s16(), f.s16()
	r.noAck, r.exclusive, r.credited = f.u8() == 1, f.u8() == 1, f.u8() == 1
	r.prefetch = int(f.u32() & 0x7FFFFFFF)
	r.args = f.rest()
	return r, f.err
}

// appendDelivery appends a deliver frame's payload: the message with
// its annotations merged into its properties (queues.AnnotatedProps) and
// its delivery count apart, for each front end to put where its protocol
// wants it.
func appendDelivery(b []byte, d *queues.Delivery) []byte {
	b = binary.BigEndian.AppendUint64(b, d.ID)
	b = append(b, boolByte(d.Redelivered))
	b = binary.BigEndian.AppendUint32(b, d.DeliveryCount)
	b = appendS16(b, d.Exchange)
	b = appendS16(b, d.RoutingKey)
	b = appendB32(b, queues.AnnotatedProps(nil, d))
	b = appendB32(b, d.AMQP10Props)
	return append(b, d.Body...)
}

// parseDeliver parses a deliver frame; the delivery's slices alias p.
func parseDeliver(p []byte) (*queues.Delivery, error) {
	f := fields{b: p}
	d := &queues.Delivery{}
	d.ID = f.u64()
	d.Redelivered = f.u8() == 1
	d.DeliveryCount = f.u32()
	d.Exchange = f.s16()
	d.RoutingKey = f.s16()
	d.Props = f.b32()
	if p10 := f.b32(); len(p10) > 0 {
		d.AMQP10Props = p10
	}
	d.Body = f.rest()
	if f.err != nil {
		return nil, f.err
	}
	return d, nil
}

// parseSettle parses a settle frame: a mode and whole ids.
func parseSettle(p []byte) (mode byte, ids []uint64, err error) {
	f := fields{b: p}
	mode = f.u8()
	if f.err == nil && (mode < settleAck || mode > settleDiscard || len(f.b)%8 != 0) {
		f.err = fmt.Errorf("cluster: bad proxy settle frame")
	}
	if f.err != nil {
		return 0, nil, f.err
	}
	ids = make([]uint64, 0, len(f.b)/8)
	for len(f.b) >= 8 {
		ids = append(ids, f.u64())
	}
	return mode, ids, nil
}

// remoteGet is a message basic.get took from another node's queue: it
// settles it over its connection, which ends then.
type remoteGet struct {
	node string
	conn net.Conn
	once sync.Once
}

// Get implements queues.Proxy.
func (p *proxy) Get(node, vhost, name string, noAck bool) (*queues.Delivery, bool, error) {
	ctx, cancel := context.WithTimeout(p.n.ctx, 2*time.Second)
	defer cancel()
	conn, err := p.n.net.Dial(ctx, node, nodenet.LaneProxy)
	if err != nil {
		return nil, false, queues.Errorf(queues.CodeNotFound, "the node '%s' running %s is out of reach: %v", node, name, err)
	}
	b := []byte{proxyVersion, purposeGet}
	b, at := beginFrame(b, frGet)
	b = appendS16(b, vhost)
	b = appendS16(b, name)
	b = append(b, boolByte(noAck))
	b = endFrame(b, at)
	conn.SetDeadline(time.Now().Add(proxyTimeout))
	if _, err := conn.Write(b); err != nil {
		conn.Close()
		return nil, false, queues.Errorf(queues.CodeNotFound, "the node '%s' running %s is out of reach: %v", node, name, err)
	}
	typ, payload, _, err := readFrame(bufio.NewReader(conn), nil)
	if err != nil {
		conn.Close()
		return nil, false, queues.Errorf(queues.CodeNotFound, "the node '%s' running %s did not answer: %v", node, name, err)
	}
	switch typ {
	case frResult:
		conn.Close()
		f := fields{b: payload}
		if err := resultError(f.u16(), f.s16()); err != nil {
			return nil, false, err
		}
		return nil, false, errors.New("cluster: a get answered without a message")
	case frGetEmpty:
		conn.Close()
		return nil, false, nil
	case frGetOk:
	default:
		conn.Close()
		return nil, false, fmt.Errorf("cluster: proxy frame type %d for a get", typ)
	}
	d, err := parseGetOk(payload)
	if err != nil {
		conn.Close()
		return nil, false, err
	}
	if noAck {
		conn.Close()
		return d, true, nil
	}
	conn.SetDeadline(time.Time{})
	d.Via = &remoteGet{node: node, conn: conn}
	return d, true, nil
}

// parseGetOk parses a get-ok frame: a message count and a deliver's
// payload (its slices alias p).
func parseGetOk(p []byte) (*queues.Delivery, error) {
	f := fields{b: p}
	count := f.u32()
	if f.err != nil {
		return nil, f.err
	}
	d, err := parseDeliver(f.rest())
	if err != nil {
		return nil, err
	}
	d.MessageCount = count
	return d, nil
}

func (g *remoteGet) settle(mode byte, ids []uint64) {
	g.once.Do(func() {
		b, at := beginFrame(nil, frSettle)
		b = append(b, mode)
		for _, id := range ids {
			b = binary.BigEndian.AppendUint64(b, id)
		}
		g.conn.SetWriteDeadline(time.Now().Add(proxyTimeout))
		g.conn.Write(endFrame(b, at)) // if lost, the peer requeues it
		g.conn.Close()
	})
}

// Ack, Requeue, Release and Discard implement queues.Settler; Node and
// Stop make it a queues.RemoteSubscription (for the counters' type).
func (g *remoteGet) Ack(ids ...uint64)     { g.settle(settleAck, ids) }
func (g *remoteGet) Requeue(ids ...uint64) { g.settle(settleRequeue, ids) }
func (g *remoteGet) Release(ids ...uint64) { g.settle(settleRelease, ids) }
func (g *remoteGet) Discard(ids ...uint64) { g.settle(settleDiscard, ids) }
func (g *remoteGet) Node() string          { return g.node }
func (g *remoteGet) Stop()                 { g.settle(settleRequeue, nil) }

// serveGet answers a peer client's basic.get of a queue of this node and
// holds the message until the peer settles it (or its connection ends:
// it goes back).
func (n *Node) serveGet(from string, conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	conn.SetReadDeadline(time.Now().Add(proxyTimeout))
	typ, payload, _, err := readFrame(br, nil)
	if err != nil || typ != frGet {
		return
	}
	f := fields{b: payload}
	vhost, name, noAck := f.s16(), f.s16(), f.u8() == 1
	if f.err != nil {
		return
	}
	var got *queues.Delivery
	var frame []byte
	owner := &struct{ from string }{from}
	ok, err := n.cfg.Broker.GetHere(vhost, name, owner, noAck, func(d *queues.Delivery) {
		got = d
		b, at := beginFrame(nil, frGetOk)
		b = binary.BigEndian.AppendUint32(b, d.MessageCount)
		frame = endFrame(appendDelivery(b, d), at)
	})
	switch {
	case err != nil:
		b, at := beginFrame(nil, frResult)
		frame = endFrame(appendResult(b, err), at)
	case !ok:
		b, at := beginFrame(nil, frGetEmpty)
		frame = endFrame(b, at)
	}
	conn.SetWriteDeadline(time.Now().Add(proxyTimeout))
	_, werr := conn.Write(frame)
	if got == nil || noAck {
		return
	}
	settler := got.Settler()
	mode, ids := byte(settleRequeue), []uint64{got.ID}
	if werr == nil {
		conn.SetReadDeadline(time.Time{}) // the client's consumer may hold it long
		if typ, payload, _, err := readFrame(br, nil); err == nil && typ == frSettle {
			if m, sids, err := parseSettle(payload); err == nil && len(sids) == 1 && sids[0] == got.ID {
				mode = m
			}
		}
	}
	(&proxySink{}).apply(settler, mode, ids)
}

// query asks node one question about a queue it runs.
func (p *proxy) query(node string, op byte, vhost, name string) (a, b uint32, err error) {
	ctx, cancel := context.WithTimeout(p.n.ctx, 2*time.Second)
	defer cancel()
	conn, err := p.n.net.Dial(ctx, node, nodenet.LaneProxy)
	if err != nil {
		return 0, 0, queues.Errorf(queues.CodeNotFound, "the node '%s' running %s is out of reach: %v", node, name, err)
	}
	defer conn.Close()
	w := []byte{proxyVersion, purposeQuery}
	w, at := beginFrame(w, frQuery)
	w = append(w, op)
	w = appendS16(w, vhost)
	w = appendS16(w, name)
	conn.SetDeadline(time.Now().Add(proxyTimeout))
	if _, err := conn.Write(endFrame(w, at)); err != nil {
		return 0, 0, queues.Errorf(queues.CodeNotFound, "the node '%s' running %s is out of reach: %v", node, name, err)
	}
	typ, payload, _, err := readFrame(bufio.NewReader(conn), nil)
	if err == nil && typ != frResult {
		err = fmt.Errorf("cluster: proxy frame type %d for a query", typ)
	}
	if err != nil {
		return 0, 0, queues.Errorf(queues.CodeNotFound, "the node '%s' running %s did not answer: %v", node, name, err)
	}
	return parseQueryResult(payload)
}

// parseQueryResult parses a query's result: an error, or two numbers.
func parseQueryResult(p []byte) (a, b uint32, err error) {
	f := fields{b: p}
	if err := resultError(f.u16(), f.s16()); err != nil {
		return 0, 0, err
	}
	a, b = f.u32(), f.u32()
	return a, b, f.err
}

// Counts implements queues.Proxy.
func (p *proxy) Counts(node, vhost, name string) (ready, consumers int, err error) {
	r, c, err := p.query(node, queryCounts, vhost, name)
	return int(r), int(c), err
}

// Purge implements queues.Proxy.
func (p *proxy) Purge(node, vhost, name string) (int, error) {
	n, _, err := p.query(node, queryPurge, vhost, name)
	return int(n), err
}

// serveQuery answers a peer's query about a queue of this node.
func (n *Node) serveQuery(from string, conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(proxyTimeout))
	typ, payload, _, err := readFrame(bufio.NewReader(conn), nil)
	if err != nil || typ != frQuery {
		return
	}
	f := fields{b: payload}
	op, vhost, name := f.u8(), f.s16(), f.s16()
	if f.err != nil {
		return
	}
	var a, b int
	switch op {
	case queryCounts:
		a, b, err = n.cfg.Broker.CountsHere(vhost, name)
	case queryPurge:
		a, err = n.cfg.Broker.PurgeHere(vhost, name, &struct{ from string }{from})
	default:
		err = fmt.Errorf("cluster: unknown proxy query %d", op)
	}
	w, at := beginFrame(nil, frResult)
	w = appendResult(w, err)
	if err == nil {
		w = binary.BigEndian.AppendUint32(w, uint32(a))
		w = binary.BigEndian.AppendUint32(w, uint32(b))
	}
	conn.Write(endFrame(w, at))
}
