package streamproto

import (
	"context"
	"errors"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/segment"
	"github.com/warren-mq/warren/streamproto/wire"
	"github.com/warren-mq/warren/superstream"
)

// subscription is a consumer on this connection. While it delivers, a
// delivery goroutine waits for credit and chunks and queues Deliver
// frames. A plain subscription delivers from Subscribe until it ends; a
// single active consumer delivers only while it is its group's active
// member, with a new reader and goroutine for each activation.
type subscription struct {
	// Static after subscribe.
	c      *conn
	id     uint8
	stream string
	s      *osiris.Stream
	spec   osiris.OffsetSpec // the Subscribe offset spec
	opts   osiris.ReaderOptions
	sac    *superstream.Member // nil unless single active consumer
	ctx    context.Context     // cancelled when the subscription ends
	cancel context.CancelFunc

	props  map[string]string // the Subscribe properties, for Info; not modified
	credit atomic.Int32
	signal chan struct{} // cap 1: credit arrived; never closed
	active atomic.Bool   // a delivery was started and not stopped
	// For Info: the next offset the delivery reads (set when it starts
	// and after each chunk) and the records delivered.
	next     atomic.Uint64
	consumed atomic.Uint64

	// mu guards del: the reader goroutine starts deliveries, and the
	// single active consumer coordinator (any goroutine) stops them.
	mu struct {
		sync.Mutex
		del *delivery
	}
}

// delivery is one run of a subscription's delivery goroutine.
type delivery struct {
	// deliverV2 is fixed when the delivery starts: the reader goroutine
	// owns conn.deliverV2.
	deliverV2 bool
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{} // closed when the goroutine has exited

	// mu is held by whoever reads chunks and queues them: the delivery
	// goroutine, except while it waits for credit (mu.waiting), when the
	// connection's reader goroutine may deliver from handleCredit
	// without waiting for anything, so that a credit costs no goroutine
	// hand-off. The delivery goroutine waits for new data holding mu.
	mu struct {
		sync.Mutex
		reader   *osiris.Reader // closed by the goroutine (nil then)
		waiting  bool           // the goroutine waits for credit
		unkicked int            // chunks queued since the last flush
	}
}

func newSubscription(c *conn, id uint8, stream string, s *osiris.Stream, spec osiris.OffsetSpec, credit uint16, props map[string]string) *subscription {
	sub := &subscription{c: c, id: id, stream: stream, s: s, spec: spec, opts: readerOptions(props),
		props: props, signal: make(chan struct{}, 1)}
	sub.ctx, sub.cancel = context.WithCancel(c.ctx)
	sub.credit.Store(int32(credit))
	return sub
}

// startDelivery starts a delivery goroutine over rd, which it takes over.
// It reports false (closing rd) once the subscription has ended.
func (s *subscription) startDelivery(rd *osiris.Reader, deliverV2 bool) bool {
	s.mu.Lock()
	if s.ctx.Err() != nil || s.mu.del != nil {
		s.mu.Unlock()
		rd.Close()
		return false
	}
	d := &delivery{deliverV2: deliverV2, done: make(chan struct{})}
	d.mu.reader = rd
	d.ctx, d.cancel = context.WithCancel(s.ctx)
	s.mu.del = d
	s.next.Store(rd.NextOffset())
	s.active.Store(true)
	s.mu.Unlock()
	go func() {
		// done is closed after the labels are dropped: a goroutine
		// labelled stream-sub is one that was not waited for.
		defer close(d.done)
		pprof.Do(context.Background(), pprof.Labels("stream-sub", s.stream), func(context.Context) {
			s.deliver(d)
		})
	}()
	return true
}

// StopDelivery stops the delivery goroutine, if any, and waits for it.
func (s *subscription) StopDelivery() {
	s.mu.Lock()
	d := s.mu.del
	s.mu.del = nil
	s.active.Store(false)
	s.mu.Unlock()
	if d != nil {
		d.cancel()
		<-d.done
	}
}

// stop ends the subscription and waits for its delivery goroutine.
func (s *subscription) stop() {
	s.cancel()
	s.StopDelivery()
}

// ConsumerUpdate queues ConsumerUpdate (corr, subscription id, active).
func (s *subscription) ConsumerUpdate(corr uint32, active bool) {
	var flag byte
	if active {
		flag = 1
	}
	s.c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, wire.KeyConsumerUpdate, 1)
		b = wire.AppendU32(b, corr)
		b = append(b, s.id, flag)
		return wire.EndFrame(b, start)
	})
}

// offsetSpec decodes a Subscribe/ResolveOffsetSpec offset specification.
func offsetSpec(r *reader) (osiris.OffsetSpec, bool) {
	return offsetSpecOfType(r.u16(), r)
}

// offsetSpecOfType decodes the rest of an offset specification of type
// typ: the offset or timestamp for types 4 and 5. It reports false for an
// unknown type (including 0, none).
func offsetSpecOfType(typ uint16, r *reader) (osiris.OffsetSpec, bool) {
	switch typ {
	case wire.OffsetTypeFirst:
		return osiris.First(), true
	case wire.OffsetTypeLast:
		return osiris.Last(), true
	case wire.OffsetTypeNext:
		return osiris.Next(), true
	case wire.OffsetTypeOffset:
		return osiris.AtOffset(r.u64()), true
	case wire.OffsetTypeTimestamp:
		return osiris.AtTimestamp(int64(r.u64())), true
	}
	return osiris.OffsetSpec{}, false
}

// readerOptions builds reader options from Subscribe properties.
func readerOptions(props map[string]string) osiris.ReaderOptions {
	var opts osiris.ReaderOptions
	var values [][]byte
	for k, v := range props {
		if strings.HasPrefix(k, "filter.") {
			values = append(values, []byte(v))
		}
	}
	if len(values) > 0 {
		opts.Filter = segment.NewMatcher(values, props["match-unfiltered"] == "true")
	}
	if props["chunk_selector"] == "all" {
		opts.AllChunks = true
	}
	// Small chunks come in memory from a read-ahead: one pread for many
	// chunks, and deliver sends them with one writev.
	opts.ReadAhead = true
	return opts
}

func (c *conn) handleSubscribe(r *reader) {
	corr := r.u32()
	id := r.u8()
	stream := r.string()
	spec, ok := offsetSpec(r)
	credit := r.u16()
	var props map[string]string
	if !r.empty() {
		props = r.stringMap()
	}
	if r.err != nil {
		return
	}
	if !ok {
		c.respond(wire.KeySubscribe, corr, wire.CodePreconditionFailed)
		return
	}
	if code := c.subscribe(corr, id, stream, spec, credit, props); code != wire.CodeOK {
		c.respond(wire.KeySubscribe, corr, code)
	}
}

// subscribe checks and starts a subscription; the OK response is queued
// before the delivery goroutine starts (or, for a single active consumer,
// before its first ConsumerUpdate), so it precedes the first Deliver.
func (c *conn) subscribe(corr uint32, id uint8, stream string, spec osiris.OffsetSpec, credit uint16, props map[string]string) wire.Code {
	vhost := c.vhost()
	s, err := c.srv.broker.Stream(vhost, stream)
	if err != nil {
		return wire.CodeStreamDoesNotExist
	}
	if err := c.srv.broker.CheckPermission(c.user, vhost, queues.PermRead, stream); err != nil {
		return wire.CodeAccessRefused
	}
	single := props["single-active-consumer"] == "true"
	name := props["name"]
	if single && (name == "" || len(name) > superstream.MaxNameLen) {
		return wire.CodePreconditionFailed
	}
	c.mu.Lock()
	if _, ok := c.mu.subs[id]; ok {
		c.mu.Unlock()
		return wire.CodeSubscriptionIDExists
	}
	if len(c.mu.subs) >= maxSubscriptions {
		c.mu.Unlock()
		return wire.CodePreconditionFailed
	}
	sub := newSubscription(c, id, stream, s, spec, credit, props)
	if !single {
		defer c.mu.Unlock()
		rd, err := s.NewReader(spec, sub.opts)
		if err != nil {
			sub.cancel()
			if errors.Is(err, osiris.ErrClosed) {
				return wire.CodeStreamNotAvailable
			}
			return wire.CodeInternalError
		}
		c.mu.subs[id] = sub
		c.respond(wire.KeySubscribe, corr, wire.CodeOK)
		sub.startDelivery(rd, c.deliverV2)
		return wire.CodeOK
	}
	sub.sac = superstream.NewMember(c, sub, id)
	// A single active consumer joins its group without a reader. It is
	// in c.mu.subs first, so a concurrent stream deletion finds it.
	c.mu.subs[id] = sub
	c.mu.Unlock()
	superStream := props["super-stream"]
	partition := -1
	if superStream != "" {
		partition = c.srv.super.PartitionIndex(vhost, superStream, stream)
	}
	key := superstream.GroupKey{VHost: vhost, Stream: stream, Name: name}
	joinErr := c.srv.sac.Join(sub.sac, key, s, superStream, partition, func() {
		c.respond(wire.KeySubscribe, corr, wire.CodeOK)
	})
	if joinErr != nil { // ErrOtherSuperStream
		c.mu.Lock()
		if c.mu.subs[id] == sub {
			delete(c.mu.subs, id)
		}
		c.mu.Unlock()
		sub.cancel()
		return wire.CodePreconditionFailed
	}
	if sub.ctx.Err() != nil {
		// The stream was deleted while joining; streamDeleted may have
		// left the group before this member was in it.
		c.srv.sac.Leave(sub.sac)
	}
	return wire.CodeOK
}

// kickEvery bounds the chunks queued between two writes of them (a
// kick of the writer goroutine or a flush).
const kickEvery = 32

// deliver is the delivery goroutine: it sends chunks while there is
// credit, until cancelled or the stream goes away. Chunks the reader has
// in memory are queued whole and written once per run of them: every
// kickEvery chunks it wakes the writer goroutine, which writes while
// this one reads on; before it waits (for credit or data) it flushes,
// writing the run itself when the socket is free and it can do so
// without blocking (else the writer goroutine does). A replay of small
// chunks so costs one write for many chunks. While it waits for credit,
// the connection's reader goroutine delivers what a credit allows
// (deliverOnCredit).
func (s *subscription) deliver(d *delivery) {
	d.mu.Lock()
	defer func() {
		s.flushLocked(d)
		d.mu.reader.Close()
		d.mu.reader = nil
		d.mu.Unlock()
	}()
	for {
		for s.credit.Load() <= 0 {
			s.flushLocked(d)
			d.mu.waiting = true
			d.mu.Unlock()
			select {
			case <-s.signal:
			case <-d.ctx.Done():
			}
			d.mu.Lock()
			d.mu.waiting = false
			if d.ctx.Err() != nil {
				return
			}
		}
		ch, ok, err := d.mu.reader.TryNext()
		if err == nil && !ok {
			s.flushLocked(d)
			ch, err = d.mu.reader.Next(d.ctx)
		}
		if err != nil {
			if d.ctx.Err() == nil && !errors.Is(err, osiris.ErrClosed) {
				s.c.log.Error("stream subscription read", "stream", s.stream, "err", err)
				go s.c.readFailed(s) // it waits for this goroutine to end
			}
			return
		}
		if !s.sendLocked(d, &ch) {
			return
		}
		if d.mu.unkicked >= kickEvery {
			// Mid-run, with credit and chunks left: the writer
			// goroutine writes this run while this one reads the next.
			s.c.out.kick()
			d.mu.unkicked = 0
		}
	}
}

// deliverOnCredit is the connection's reader goroutine delivering after
// a credit, while the delivery goroutine waits for credit: the chunks
// already committed, as far as the credit goes, without waiting for
// anything. It reports whether it left work for the delivery goroutine
// (credit left, a new chunk to wait for, an error), which is then to be
// signalled.
func (s *subscription) deliverOnCredit() (signal bool) {
	s.mu.Lock()
	d := s.mu.del
	s.mu.Unlock()
	if d == nil || !d.mu.TryLock() {
		return true
	}
	defer d.mu.Unlock()
	if !d.mu.waiting || d.mu.reader == nil || d.ctx.Err() != nil {
		return true
	}
	for n := 0; s.credit.Load() > 0; n++ {
		if n == kickEvery || d.ctx.Err() != nil {
			s.flushLocked(d)
			return true // more is the goroutine's
		}
		ch, ok, err := d.mu.reader.TryNext()
		if err != nil || !ok {
			// At the end, or an error: the goroutine waits or reports.
			s.flushLocked(d)
			return true
		}
		if !s.sendLocked(d, &ch) {
			return true
		}
	}
	s.flushLocked(d)
	return false
}

// flushLocked flushes the chunks queued since the last flush.
// REQUIRES: d.mu held.
func (s *subscription) flushLocked(d *delivery) {
	if d.mu.unkicked > 0 {
		s.c.out.flush()
		d.mu.unkicked = 0
	}
}

// sendLocked queues ch's Deliver frame, taking a credit, and reports
// false once the connection's queue is closed. REQUIRES: d.mu held.
func (s *subscription) sendLocked(d *delivery, ch *osiris.Chunk) bool {
	c := s.c
	s.credit.Add(-1)
	h := ch.Header
	v2 := d.deliverV2
	var committed uint64
	if v2 {
		committed = uint64(max(s.s.CommittedChunkID(), 0))
	}
	// Counted before the client can see it, so that a client that has
	// its messages finds them counted.
	c.ctr.Delivery[queues.QTStream].Delivered.Add(uint64(h.NumRecords))
	head := func(b []byte) []byte {
		start := len(b)
		b = append(b, 0, 0, 0, 0)
		if v2 {
			b = wire.AppendU16(b, uint16(wire.KeyDeliver))
			b = wire.AppendU16(b, 2)
			b = append(b, s.id)
			b = wire.AppendU64(b, committed)
		} else {
			b = wire.AppendU16(b, uint16(wire.KeyDeliver))
			b = wire.AppendU16(b, 1)
			b = append(b, s.id)
		}
		b = h.AppendWire(b)
		size := len(b) - start - 4 + int(h.DataLen)
		b[start], b[start+1], b[start+2], b[start+3] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
		return b
	}
	queued := false
	if ch.Data != nil && len(ch.Data) <= smallSpan {
		// Larger chunks go by sendfile, as before read-ahead.
		var ok bool
		queued, ok = c.out.deliverInline(func(b []byte) []byte { return append(head(b), ch.Data...) })
		if !ok {
			return false
		}
		if queued {
			d.mu.unkicked++
		}
	}
	if !queued {
		release, err := ch.Hold()
		if err != nil {
			return false
		}
		if !c.out.deliver(head, ch.File, ch.DataPos(), int64(h.DataLen), release) {
			return false
		}
	}
	s.consumed.Add(uint64(h.NumRecords))
	s.next.Store(h.NextOffset())
	return true
}

func (c *conn) handleCredit(r *reader) {
	id := r.u8()
	credit := int16(r.u16())
	if r.err != nil {
		return
	}
	c.mu.Lock()
	sub := c.mu.subs[id]
	c.mu.Unlock()
	if sub == nil {
		c.creditError(id, wire.CodeSubscriptionIDDoesNotExist)
		return
	}
	if credit > 0 {
		sub.credit.Add(int32(credit))
		if sub.deliverOnCredit() {
			select {
			case sub.signal <- struct{}{}:
			default:
			}
		}
	}
	if sub.sac != nil && !sub.active.Load() {
		// An inactive single active consumer keeps the credit for when
		// it is activated, but is told it is not delivering.
		c.creditError(id, wire.CodePreconditionFailed)
	}
}

// creditError queues the Credit error frame, which has no correlation id.
func (c *conn) creditError(id uint8, code wire.Code) {
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, wire.KeyCredit|wire.ResponseBit, 1)
		b = wire.AppendU16(b, uint16(code))
		b = append(b, id)
		return wire.EndFrame(b, start)
	})
}

func (c *conn) handleUnsubscribe(r *reader) {
	corr := r.u32()
	id := r.u8()
	if r.err != nil {
		return
	}
	c.mu.Lock()
	sub := c.mu.subs[id]
	delete(c.mu.subs, id)
	c.mu.Unlock()
	if sub == nil {
		c.respond(wire.KeyUnsubscribe, corr, wire.CodeSubscriptionIDDoesNotExist)
		return
	}
	sub.stop()
	if sub.sac != nil {
		c.srv.sac.Leave(sub.sac)
	}
	c.respond(wire.KeyUnsubscribe, corr, wire.CodeOK)
}

// handleConsumerUpdateReply handles a client's answer to ConsumerUpdate:
// corr, code, offset type and, for types 4 and 5, the offset. Answering an
// activation, it opens the reader at that spec (type 0: the Subscribe
// spec) and starts delivering; answering a deactivation, it lets the
// coordinator activate the next member.
func (c *conn) handleConsumerUpdateReply(r *reader) {
	corr := r.u32()
	code := wire.Code(r.u16())
	typ := r.u16()
	spec, ok := offsetSpecOfType(typ, r)
	if r.err != nil {
		return
	}
	m := c.srv.sac.Reply(c, corr)
	if m == nil {
		return
	}
	c.mu.Lock()
	sub := c.mu.subs[m.ID()]
	c.mu.Unlock()
	if sub == nil || sub.sac != m {
		return // unsubscribed meanwhile; leaving the group handles it
	}
	if code != wire.CodeOK || !ok {
		if code != wire.CodeOK || typ != wire.OffsetTypeNone {
			c.log.Debug("consumer update reply: using the subscribe offset", "stream", sub.stream,
				"code", uint16(code), "offset_type", typ)
		}
		spec = sub.spec
	}
	rd, err := sub.s.NewReader(spec, sub.opts)
	if err != nil {
		if !errors.Is(err, osiris.ErrClosed) {
			c.log.Error("single active consumer: open reader", "stream", sub.stream, "err", err)
		}
		return
	}
	v2 := c.deliverV2
	if !c.srv.sac.Activated(m, corr, func() { sub.startDelivery(rd, v2) }) {
		rd.Close()
	}
}

// subscribedTo reports whether the connection has a subscription on stream.
func (c *conn) subscribedTo(stream string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.mu.subs {
		if s.stream == stream {
			return true
		}
	}
	return false
}

func (c *conn) handleStoreOffset(r *reader) {
	ref := r.string()
	stream := r.string()
	offset := r.u64()
	if r.err != nil {
		return
	}
	vhost := c.vhost()
	_, err := c.srv.broker.Stream(vhost, stream)
	if err != nil || ref == "" || len(ref) > osiris.MaxReferenceLen {
		c.log.Debug("store offset ignored", "stream", stream, "reference", ref)
		return
	}
	if !c.subscribedTo(stream) {
		if err := c.srv.broker.CheckPermission(c.user, vhost, queues.PermRead, stream); err != nil {
			c.log.Info("store offset refused", "stream", stream, "err", err)
			return
		}
	}
	if err := c.srv.broker.StoreStreamOffset(vhost, stream, ref, offset); err != nil {
		c.log.Debug("store offset", "stream", stream, "err", err)
	}
}

func (c *conn) handleQueryOffset(r *reader) {
	corr := r.u32()
	ref := r.string()
	stream := r.string()
	if r.err != nil {
		return
	}
	code, offset := wire.CodeOK, uint64(0)
	vhost := c.vhost()
	s, err := c.srv.broker.Stream(vhost, stream)
	switch {
	case err != nil:
		code = wire.CodeStreamDoesNotExist
	case c.srv.broker.CheckPermission(c.user, vhost, queues.PermRead, stream) != nil:
		code = wire.CodeAccessRefused
	default:
		var ok bool
		if offset, ok = s.QueryOffset(ref); !ok {
			code = wire.CodeNoOffset
		}
	}
	c.respondU64(wire.KeyQueryOffset, corr, code, offset)
}
