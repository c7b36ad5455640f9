package amqp

import (
	"bytes"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/internal/flow"
	"github.com/warren-mq/warren/queues"
)

// assembly is a basic.publish being received: the method, then a content
// header, then body frames.
type assembly struct {
	active    bool
	exchange  string
	key       string
	mandatory bool
	gotHeader bool
	props     []byte
	size      uint64
	body      []byte
}

// contentHeaderMin is a content header's fixed part: class, weight and
// body size. rabbit_command_assembler cannot analyze a shorter one.
const contentHeaderMin = 12

// unexpected is rabbit_command_assembler's answer to a frame the publish
// being assembled does not expect: after no publish, a method; after
// basic.publish, its content header; after the header, body frames.
func (a *assembly) unexpected() *amqpError {
	switch {
	case !a.active:
		return newError(wire.UnexpectedFrame, "expected method frame, got non method frame instead")
	case !a.gotHeader:
		return newError(wire.UnexpectedFrame, "expected content header for class 60, got non content header frame instead").withMethod(&wire.BasicPublish{})
	}
	return newError(wire.UnexpectedFrame, "expected content body, got non content body frame instead").withMethod(&wire.BasicPublish{})
}

func (a *assembly) reset() {
	a.active, a.gotHeader = false, false
	a.props = a.props[:0]
	a.body = a.body[:0]
}

func (ch *channel) startPublish(m *wire.BasicPublish) error {
	if m.Immediate {
		return newError(wire.NotImplemented, "immediate=true")
	}
	if err := ch.check(queues.PermWrite, "exchange", m.Exchange); err != nil {
		return err
	}
	a := &ch.assembly
	a.active = true
	a.exchange, a.key, a.mandatory = m.Exchange, m.RoutingKey, m.Mandatory
	return nil
}

func (ch *channel) handleHeader(payload []byte) error {
	a := &ch.assembly
	if len(payload) < contentHeaderMin {
		return shortFrame(wire.Frame{Type: wire.FrameHeader, Payload: payload})
	}
	if !a.active || a.gotHeader {
		return a.unexpected()
	}
	h, err := wire.ParseContentHeader(payload)
	if err != nil {
		// RabbitMQ decodes properties later and fails then (541); the
		// frame is refused here, its properties shown.
		return newError(wire.FrameError, "cannot decode %s", erlBinaryW(payload[12:])).withMethod(&wire.BasicPublish{})
	}
	if h.ClassID != wire.ClassBasic {
		return newError(wire.UnexpectedFrame, "expected content header for class 60, got one for class %d instead", h.ClassID).withMethod(&wire.BasicPublish{})
	}
	if h.Weight != 0 {
		// rabbit_command_assembler matches weight 0 only.
		return a.unexpected()
	}
	if h.BodySize > MaxMessageSizeLimit {
		// rabbit_command_assembler: a frame error, before the body.
		return newError(wire.FrameError, "content body size %d exceeds maximum allowed size %d", h.BodySize, MaxMessageSizeLimit).withMethod(&wire.BasicPublish{})
	}
	if max := ch.c.srv.cfg.MaxMessageSize; h.BodySize > max {
		// rabbit_channel:check_msg_size's texts. RabbitMQ reads the body
		// first; refusing at the header spares reading it into memory.
		a.reset()
		format := "message size %d is larger than configured max size %d"
		if max == MaxMessageSizeLimit {
			format = "message size %d is larger than max size %d"
		}
		return newError(wire.PreconditionFailed, format, h.BodySize, max).withMethod(&wire.BasicPublish{})
	}
	a.gotHeader = true
	a.props = append(a.props[:0], h.Props...)
	a.size = h.BodySize
	a.body = a.body[:0]
	if a.size == 0 {
		return ch.finishPublish()
	}
	return nil
}

func (ch *channel) handleBody(payload []byte) error {
	a := &ch.assembly
	if !a.active || !a.gotHeader {
		return a.unexpected()
	}
	if uint64(len(a.body))+uint64(len(payload)) > a.size {
		return newError(wire.FrameError, "content body frame exceeds remaining content size").withMethod(&wire.BasicPublish{})
	}
	a.body = append(a.body, payload...)
	if uint64(len(a.body)) == a.size {
		return ch.finishPublish()
	}
	return nil
}

// finishPublish routes a complete message.
func (ch *channel) finishPublish() error {
	a := &ch.assembly
	a.active, a.gotHeader = false, false
	if !ch.publishing.Load() {
		ch.publishing.Store(true)
	}
	ctr := &ch.c.ctr
	ctr.Received.Add(1)
	if ch.conf.enabled() {
		ctr.ReceivedConfirm.Add(1)
	}
	ctr.ObserveSize(len(a.body))
	// Topic authorisation, before the message is read, as RabbitMQ does
	// (a missing or internal exchange is refused by the routing).
	if err := ch.c.broker.CheckTopicPermission(ch.c.user, ch.c.vhost, a.exchange, queues.PermWrite, a.key); err != nil {
		return err
	}
	if ch.tx != nil {
		ch.tx.pubs = append(ch.tx.pubs, txPub{
			exchange: a.exchange, key: a.key, mandatory: a.mandatory,
			props: bytes.Clone(a.props), body: bytes.Clone(a.body),
		})
		return nil
	}
	return ch.publish(a.exchange, a.key, a.mandatory, a.props, a.body, ch.conf.next(ch))
}

// publish routes a message and appends it to its queues. done, when not
// nil, is called once every queue has stored it (or one failed).
func (ch *channel) publish(exchange, key string, mandatory bool, props, body []byte, done *pubConfirm) error {
	err := ch.route(exchange, key, mandatory, props, body, done)
	if err != nil {
		done.drop()
	}
	return err
}

// route does publish's work; on an error, done is untouched.
func (ch *channel) route(exchange, key string, mandatory bool, props, body []byte, done *pubConfirm) error {
	pv, err := wire.ScanProperties(props)
	if err != nil {
		return newError(wire.FrameError, "cannot decode content properties: %v", err)
	}
	if pv.Flags&wire.FlagUserID != 0 && string(pv.UserID) != ch.c.user {
		return newError(wire.PreconditionFailed, "user_id property set to '%s' but authenticated user was '%s'", pv.UserID, ch.c.user)
	}
	if pv.Flags&wire.FlagExpiration != 0 {
		if e := checkExpiration(pv.Expiration); e != nil {
			return e
		}
	}
	if string(pv.ReplyTo) == replyToName {
		if props, err = ch.rewriteReplyTo(props); err != nil {
			return err
		}
		if pv, err = wire.ScanProperties(props); err != nil {
			return newError(wire.FrameError, "cannot decode content properties: %v", err)
		}
	}
	if isReplyKey(exchange, key) {
		ch.deliverReply(exchange, key, props, body)
		ch.c.ctr.Routed.Add(1)
		done.complete(nil) // routed, even when the requester is gone
		return nil
	}
	keys := append(ch.keyBuf[:0], key)
	var headers map[string]any
	if pv.Headers != nil {
		var e *amqpError
		props, headers, keys, e = ch.prepareHeaders(props, pv, keys)
		if e != nil {
			return e
		}
	}
	ch.keyBuf = keys
	ch.rm = queues.RoutingMessage{Keys: keys, Headers: headers, Props: queues.RoutingProps{
		MessageID: pv.MessageID, CorrelationID: pv.CorrelationID,
		Timestamp: pv.Timestamp, HasTimestamp: pv.Flags&wire.FlagTimestamp != 0,
	}}
	qs, err := ch.c.broker.RouteMessage(ch.c.vhost, exchange, &ch.rm, ch.routeBuf[:0])
	ch.rm = queues.RoutingMessage{}
	ch.routeBuf = qs[:0]
	if err != nil {
		return err
	}
	if len(qs) == 0 {
		ch.unroutable(mandatory, exchange, key, props, body)
		done.complete(nil)
		return nil
	}
	msg := queues.Message{Exchange: exchange, RoutingKey: key, Props: props, Body: body, Persistent: pv.DeliveryMode == 2}
	rec := queues.EncodeRecord(nil, &msg)
	targets := ch.targets[:0]
	defer func() {
		clear(targets)
		ch.targets = targets[:0]
		ch.streamMsg = streamMessage{}
		ch.pub = queues.Publishing{}
	}()
	for _, name := range qs {
		if d, ok := ch.c.broker.Destination(ch.c.vhost, name); ok {
			targets = append(targets, d)
		}
	}
	if len(targets) == 0 {
		ch.unroutable(mandatory, exchange, key, props, body)
		done.complete(nil)
		return nil
	}
	done.expect(len(targets))
	ch.c.ctr.Routed.Add(1)
	ch.streamMsg = streamMessage{exchange: exchange, key: key, props: props, body: body}
	ch.pub = queues.Publishing{Record: rec, Persistent: msg.Persistent, Stream: &ch.streamMsg, SizeHint: len(props) + len(body)}
	if done != nil {
		// Publisher flow control (flow.go): the message holds credit
		// until every queue has written it.
		done.credit = int64(len(exchange)+len(key)+len(props)+len(body)) + flow.MessageOverhead
		ch.c.credit.Take(done.credit)
	}
	queues.Publish(targets, &ch.pub, done.complete)
	return nil
}

// checkExpiration validates the expiration property: a decimal count of
// milliseconds, at most ten years.
func checkExpiration(v []byte) *amqpError {
	n, err := strconv.ParseInt(string(v), 10, 64)
	switch {
	case err != nil:
		return newError(wire.PreconditionFailed, "invalid expiration '%s': {invalid_integer,\"%s\"}", v, v)
	case n < 0:
		return newError(wire.PreconditionFailed, "invalid expiration '%s': {value_negative,%d}", v, n)
	case n > 315_360_000_000:
		return newError(wire.PreconditionFailed, "invalid expiration '%s': {value_too_large,%d}", v, n)
	}
	return nil
}

// prepareHeaders reads CC and BCC, drops BCC and sorts the headers by
// key, as RabbitMQ 4.x delivers them. It returns the properties to store,
// the decoded headers for routing and the routing keys.
func (ch *channel) prepareHeaders(props []byte, pv wire.PropsView, keys []string) ([]byte, map[string]any, []string, *amqpError) {
	t, _, err := amqptab.ReadTable(pv.Headers)
	if err != nil {
		return nil, nil, nil, newError(wire.FrameError, "cannot decode message headers: %v", err)
	}
	for _, h := range [...]string{"CC", "BCC"} {
		v, ok := t[h]
		if !ok {
			continue
		}
		arr, ok := v.([]any)
		if !ok {
			return nil, nil, nil, newError(wire.PreconditionFailed, "invalid message: {unacceptable_type_in_header,\"%s\",%s}", h, typeName(v))
		}
		for _, k := range arr {
			if s, ok := k.(string); ok {
				keys = append(keys, s)
			}
		}
	}
	_, hasBCC := t["BCC"]
	sorted, _ := amqptab.TableSorted(pv.Headers)
	if hasBCC || !sorted {
		delete(t, "BCC")
		var out []byte
		out = append(out, props[:pv.HeadersPos]...)
		out, err = amqptab.AppendTable(out, t)
		if err != nil {
			return nil, nil, nil, newError(wire.InternalError, "re-encode headers: %v", err)
		}
		out = append(out, props[pv.HeadersPos+len(pv.Headers):]...)
		props = out
	}
	return props, t, keys, nil
}

// typeName names a table value's type as RabbitMQ's error texts do.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "longstr"
	case int32:
		return "signedint"
	case int64:
		return "long"
	case int16:
		return "short"
	case int8:
		return "byte"
	case bool:
		return "bool"
	case wire.Table, map[string]any:
		return "table"
	case []any:
		return "array"
	case float64:
		return "double"
	case float32:
		return "float"
	case []byte:
		return "binary"
	}
	return "unknown"
}

// unroutable is a message routed nowhere: returned when mandatory, else
// dropped.
func (ch *channel) unroutable(mandatory bool, exchange, key string, props, body []byte) {
	if mandatory {
		ch.c.ctr.UnroutableReturned.Add(1)
		ch.sendReturn(wire.NoRoute, "NO_ROUTE", exchange, key, props, body)
		return
	}
	ch.c.ctr.UnroutableDropped.Add(1)
}

// sendReturn sends basic.return with the message.
func (ch *channel) sendReturn(code uint16, text, exchange, key string, props, body []byte) {
	frameMax := ch.c.frameMax
	ret := &wire.BasicReturn{ReplyCode: code, ReplyText: text, Exchange: exchange, RoutingKey: key}
	ch.c.out.frames(func(b []byte) []byte {
		b = wire.AppendMethodFrame(b, ch.id, ret)
		b = wire.AppendHeaderFrame(b, ch.id, wire.ClassBasic, uint64(len(body)), props)
		return wire.AppendBodyFrames(b, ch.id, body, frameMax)
	})
}

// confirms is a channel's publisher-confirm state. Publishes get
// sequence numbers in order; they complete in any order (on log writer
// goroutines); acks go out coalesced with multiple=true up to the lowest
// sequence still pending.
type confirms struct {
	ch     *channel
	on     atomic.Bool
	queued bool // in the out queue's flush list; guarded by outQueue.mu

	mu struct {
		sync.Mutex
		seq     uint64        // last sequence number given out
		pending []*pubConfirm // in sequence order; sent ones are removed from the front
		closed  bool
	}
}

func (c *confirms) enable()       { c.on.Store(true) }
func (c *confirms) enabled() bool { return c.on.Load() }

// next returns the tracker for the next publish: it confirms when
// confirms are on, and always releases the channel's publish barrier.
func (c *confirms) next(ch *channel) *pubConfirm {
	if !c.on.Load() {
		p := &pubConfirm{ch: ch}
		p.remaining.Store(1)
		ch.barrier.add()
		return p
	}
	ch.barrier.add()
	c.mu.Lock()
	c.mu.seq++
	p := &pubConfirm{c: c, ch: ch, seq: c.mu.seq}
	p.remaining.Store(1)
	c.mu.pending = append(c.mu.pending, p)
	c.mu.Unlock()
	return p
}

// close drops pending confirms: the channel is gone.
func (c *confirms) close() {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.pending = nil
	c.mu.Unlock()
}

// barrier counts a channel's publishes not yet stored. Operations that
// observe queue state (get, declare, purge, delete) wait for it, so that a
// channel sees its own publishes, as RabbitMQ's per-channel ordering
// guarantees.
type barrier struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func (b *barrier) add() {
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
}

func (b *barrier) release() {
	b.mu.Lock()
	b.n--
	if b.n == 0 && b.cond != nil {
		b.cond.Broadcast()
	}
	b.mu.Unlock()
}

// wait waits until every earlier publish of the channel is stored.
func (b *barrier) wait() {
	b.mu.Lock()
	for b.n > 0 {
		if b.cond == nil {
			b.cond = sync.NewCond(&b.mu)
		}
		b.cond.Wait()
	}
	b.mu.Unlock()
}

// pubConfirm tracks one publish until every queue has stored it.
type pubConfirm struct {
	c         *confirms // nil: confirms are off
	ch        *channel  // its barrier is released on completion
	seq       uint64
	credit    int64 // publish credit taken for it (flow.go), given back when done
	remaining atomic.Int32
	failed    atomic.Bool
	done      atomic.Bool
	// onDone, when set, replaces the confirm: it gets the outcome
	// (transactions use it).
	onDone func(failed bool)
}

// expect sets how many queues must store the message.
func (p *pubConfirm) expect(n int) {
	if p != nil {
		p.remaining.Store(int32(n))
	}
}

// drop abandons a publish that failed with a channel error: no confirm
// (the channel is closing), but the barrier is released.
func (p *pubConfirm) drop() {
	if p != nil && p.ch != nil && !p.done.Swap(true) {
		p.giveCredit()
		p.ch.barrier.release()
	}
}

// giveCredit returns the publish's flow credit to its connection.
func (p *pubConfirm) giveCredit() {
	if p.credit != 0 {
		p.ch.c.credit.Give(p.credit)
	}
}

// complete is one queue's outcome; the last one settles the publish.
func (p *pubConfirm) complete(err error) {
	if p == nil {
		return
	}
	if err != nil {
		p.failed.Store(true)
	}
	if p.remaining.Add(-1) != 0 {
		return
	}
	if p.done.Swap(true) {
		return
	}
	if p.ch != nil {
		p.giveCredit()
		p.ch.barrier.release()
	}
	if p.onDone != nil {
		p.onDone(p.failed.Load())
		return
	}
	if p.c != nil {
		// The writer goroutine flushes before its next write, so the
		// completions of one log batch go out as one multiple ack.
		p.c.ch.c.out.requestFlush(p.c)
	}
}

// flush sends the confirms that are settled from the front of pending.
func (c *confirms) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return
	}
	var runStart, ackUpTo, confirmed uint64
	i := 0
	for ; i < len(c.mu.pending); i++ {
		p := c.mu.pending[i]
		if !p.done.Load() {
			break
		}
		if p.failed.Load() {
			if ackUpTo != 0 {
				c.sendAck(ackUpTo, ackUpTo != runStart)
				ackUpTo = 0
			}
			c.ch.c.out.frames(func(b []byte) []byte {
				return wire.AppendMethodFrame(b, c.ch.id, &wire.BasicNack{DeliveryTag: p.seq})
			})
			continue
		}
		if ackUpTo == 0 {
			runStart = p.seq
		}
		ackUpTo = p.seq
		confirmed++
	}
	if confirmed > 0 {
		c.ch.c.ctr.Confirmed.Add(confirmed)
	}
	if ackUpTo != 0 {
		c.sendAck(ackUpTo, ackUpTo != runStart)
	}
	c.mu.pending = c.mu.pending[i:]
	if len(c.mu.pending) == 0 {
		c.mu.pending = nil
	}
}

// sendAck sends basic.ack for seq (and, with multiple, all before it).
// REQUIRES: c.mu held.
func (c *confirms) sendAck(seq uint64, multiple bool) {
	c.ch.c.out.frames(func(b []byte) []byte {
		return wire.AppendMethodFrame(b, c.ch.id, &wire.BasicAck{DeliveryTag: seq, Multiple: multiple})
	})
}
