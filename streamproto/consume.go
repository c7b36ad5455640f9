package streamproto

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/segment"
)

// subscription is a consumer on this connection. Its goroutine waits for
// credit and chunks and queues deliveries.
type subscription struct {
	id     uint8
	stream string
	s      *osiris.Stream
	reader *osiris.Reader
	// deliverV2 is fixed when the subscription starts: the reader
	// goroutine owns conn.deliverV2.
	deliverV2 bool
	credit    atomic.Int32
	signal    chan struct{} // cap 1: credit arrived
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
}

// stop cancels the subscription and waits for its goroutine.
func (s *subscription) stop() {
	s.cancel()
	<-s.done
}

// offsetSpec decodes a Subscribe/ResolveOffsetSpec offset specification.
func offsetSpec(r *reader) (osiris.OffsetSpec, bool) {
	switch r.u16() {
	case offsetTypeFirst:
		return osiris.First(), true
	case offsetTypeLast:
		return osiris.Last(), true
	case offsetTypeNext:
		return osiris.Next(), true
	case offsetTypeOffset:
		return osiris.AtOffset(r.u64()), true
	case offsetTypeTimestamp:
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
		c.respond(KeySubscribe, corr, CodePreconditionFailed)
		return
	}
	if code := c.subscribe(corr, id, stream, spec, credit, props); code != CodeOK {
		c.respond(KeySubscribe, corr, code)
	}
}

// subscribe checks and starts a subscription; the OK response is queued
// before the goroutine starts, so it precedes the first Deliver.
func (c *conn) subscribe(corr uint32, id uint8, stream string, spec osiris.OffsetSpec, credit uint16, props map[string]string) Code {
	vhost := c.vhost()
	s, err := c.srv.broker.Stream(vhost, stream)
	if err != nil {
		return CodeStreamDoesNotExist
	}
	if err := c.srv.broker.CheckPermission(c.user, vhost, queues.PermRead, stream); err != nil {
		return CodeAccessRefused
	}
	if props["single-active-consumer"] == "true" {
		// Single active consumer groups are not implemented yet; refusing
		// is better than letting every member read.
		return CodePreconditionFailed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.subs[id]; ok {
		return CodeSubscriptionIDExists
	}
	if len(c.mu.subs) >= maxSubscriptions {
		return CodePreconditionFailed
	}
	rd, err := s.NewReader(spec, readerOptions(props))
	if err != nil {
		if errors.Is(err, osiris.ErrClosed) {
			return CodeStreamNotAvailable
		}
		return CodeInternalError
	}
	sub := &subscription{id: id, stream: stream, s: s, reader: rd, deliverV2: c.deliverV2,
		signal: make(chan struct{}, 1), done: make(chan struct{})}
	sub.ctx, sub.cancel = context.WithCancel(c.ctx)
	sub.credit.Store(int32(credit))
	c.mu.subs[id] = sub
	c.respond(KeySubscribe, corr, CodeOK)
	go sub.run(c)
	return CodeOK
}

// run delivers chunks while there is credit, until cancelled or the
// stream goes away.
func (s *subscription) run(c *conn) {
	defer close(s.done)
	defer s.reader.Close()
	for {
		for s.credit.Load() <= 0 {
			select {
			case <-s.signal:
			case <-s.ctx.Done():
				return
			}
		}
		ch, err := s.reader.Next(s.ctx)
		if err != nil {
			if s.ctx.Err() == nil && !errors.Is(err, osiris.ErrClosed) {
				c.log.Error("stream subscription read", "stream", s.stream, "err", err)
			}
			return
		}
		release, err := ch.Hold()
		if err != nil {
			return
		}
		s.credit.Add(-1)
		h := ch.Header
		v2 := s.deliverV2
		var committed uint64
		if v2 {
			committed = uint64(max(s.s.CommittedChunkID(), 0))
		}
		ok := c.out.deliver(func(b []byte) []byte {
			start := len(b)
			b = append(b, 0, 0, 0, 0)
			if v2 {
				b = appendU16(b, uint16(KeyDeliver))
				b = appendU16(b, 2)
				b = append(b, s.id)
				b = appendU64(b, committed)
			} else {
				b = appendU16(b, uint16(KeyDeliver))
				b = appendU16(b, 1)
				b = append(b, s.id)
			}
			b = h.AppendWire(b)
			size := len(b) - start - 4 + int(h.DataLen)
			b[start], b[start+1], b[start+2], b[start+3] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
			return b
		}, ch.File, ch.DataPos(), int64(h.DataLen), release)
		if !ok {
			return
		}
	}
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
		c.out.frame(func(b []byte) []byte {
			b, start := beginFrame(b, KeyCredit|responseBit, 1)
			b = appendU16(b, uint16(CodeSubscriptionIDDoesNotExist))
			b = append(b, id)
			return endFrame(b, start)
		})
		return
	}
	if credit > 0 {
		sub.credit.Add(int32(credit))
		select {
		case sub.signal <- struct{}{}:
		default:
		}
	}
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
		c.respond(KeyUnsubscribe, corr, CodeSubscriptionIDDoesNotExist)
		return
	}
	sub.stop()
	c.respond(KeyUnsubscribe, corr, CodeOK)
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
	s, err := c.srv.broker.Stream(vhost, stream)
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
	if err := s.StoreOffset(ref, offset); err != nil {
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
	code, offset := CodeOK, uint64(0)
	vhost := c.vhost()
	s, err := c.srv.broker.Stream(vhost, stream)
	switch {
	case err != nil:
		code = CodeStreamDoesNotExist
	case c.srv.broker.CheckPermission(c.user, vhost, queues.PermRead, stream) != nil:
		code = CodeAccessRefused
	default:
		var ok bool
		if offset, ok = s.QueryOffset(ref); !ok {
			code = CodeNoOffset
		}
	}
	c.out.frame(func(b []byte) []byte {
		b, start := beginResponse(b, KeyQueryOffset, corr, code)
		b = appendU64(b, offset)
		return endFrame(b, start)
	})
}
