package streamproto

import (
	"encoding/binary"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/segment"
	"github.com/warren-mq/warren/streamproto/wire"
)

// publisher is a declared publisher.
type publisher struct {
	id        uint8
	reference string // producer reference for deduplication; may be empty
	stream    string
	s         *osiris.Stream

	// Message counts for Info: published by the reader goroutine,
	// confirmed and errored by whichever goroutine answers a batch.
	published, confirmed, errored atomic.Uint64
}

func (c *conn) handleDeclarePublisher(r *reader) {
	corr := r.u32()
	id := r.u8()
	ref := r.string()
	stream := r.string()
	if r.err != nil {
		return
	}
	c.respond(wire.KeyDeclarePublisher, corr, c.declarePublisher(id, ref, stream))
}

func (c *conn) declarePublisher(id uint8, ref, stream string) wire.Code {
	if c.srv.broker.Alarms().Active() != 0 {
		// As RabbitMQ during a (disk) alarm (alarm.go).
		c.log.Info("cannot create publisher: the connection is blocked by a resource alarm", "publisher", id, "stream", stream)
		return wire.CodePreconditionFailed
	}
	if len(ref) > osiris.MaxReferenceLen {
		return wire.CodePreconditionFailed
	}
	vhost := c.vhost()
	s, err := c.srv.broker.Stream(vhost, stream)
	if err != nil {
		return wire.CodeStreamDoesNotExist
	}
	if err := c.srv.broker.CheckPermission(c.user, vhost, queues.PermWrite, stream); err != nil {
		return wire.CodeAccessRefused
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.publishers[id]; ok {
		return wire.CodePreconditionFailed
	}
	if ref != "" {
		for _, p := range c.mu.publishers {
			if p.reference == ref && p.stream == stream {
				return wire.CodePreconditionFailed
			}
		}
	}
	c.mu.publishers[id] = &publisher{id: id, reference: ref, stream: stream, s: s}
	return wire.CodeOK
}

func (c *conn) handleDeletePublisher(r *reader) {
	corr := r.u32()
	id := r.u8()
	if r.err != nil {
		return
	}
	c.mu.Lock()
	_, ok := c.mu.publishers[id]
	delete(c.mu.publishers, id)
	c.mu.Unlock()
	code := wire.CodeOK
	if !ok {
		code = wire.CodePublisherDoesNotExist
	}
	c.respond(wire.KeyDeletePublisher, corr, code)
}

func (c *conn) handleQueryPublisherSequence(r *reader) {
	corr := r.u32()
	ref := r.string()
	stream := r.string()
	if r.err != nil {
		return
	}
	code, seq := wire.CodeOK, uint64(0)
	vhost := c.vhost()
	if s, err := c.srv.broker.Stream(vhost, stream); err != nil {
		code = wire.CodeStreamDoesNotExist
	} else if c.srv.broker.CheckPermission(c.user, vhost, queues.PermRead, stream) != nil {
		code = wire.CodeAccessRefused
	} else {
		seq = s.PublisherSequence(ref)
	}
	c.respondU64(wire.KeyQueryPublisherSequence, corr, code, seq)
}

// publishedID is one message's publishing id and, on error, its code.
type publishedID struct {
	id   uint64
	code wire.Code
}

// pubFrame is a Publish frame and the batch made of it. Frames are
// recycled: a publisher sending 100-message frames would otherwise
// allocate (and the GC scan) a frame, a message slice, a batch and two
// closures per frame.
type pubFrame struct {
	c     *conn
	pubID uint8
	pub   *publisher // counts the batch's outcome
	// credit is the flow credit the batch holds (flow.go): its frame's
	// buffer and message slice.
	credit int64
	body   []byte
	batch  osiris.Batch // Messages alias body
}

// getPubFrame returns a frame with a body of size bytes.
func (c *conn) getPubFrame(size int) *pubFrame {
	pf, _ := c.pubFrames.Get().(*pubFrame)
	if pf == nil {
		pf = &pubFrame{c: c}
		pf.batch.Done = pf.done
	}
	if cap(pf.body) < size {
		pf.body = make([]byte, size)
	}
	pf.body = pf.body[:size]
	return pf
}

func (c *conn) putPubFrame(pf *pubFrame) {
	clear(pf.batch.Messages) // no stale slices of the next frame's body
	pf.batch.Messages = pf.batch.Messages[:0]
	pf.batch.Producer = ""
	pf.pub = nil
	c.pubFrames.Put(pf)
}

// done answers the batch: PublishConfirm, or PublishError for every
// message, then recycles the frame (the out queue encodes synchronously).
func (pf *pubFrame) done(res osiris.Result) {
	c, msgs, pubID := pf.c, pf.batch.Messages, pf.pubID
	if res.Err != nil {
		pf.pub.errored.Add(uint64(len(msgs)))
		errs := make([]publishedID, len(msgs))
		for i, m := range msgs {
			errs[i] = publishedID{m.PublishingID, wire.CodeInternalError}
		}
		if errors.Is(res.Err, osiris.ErrClosed) {
			for i := range errs {
				errs[i].code = wire.CodeStreamNotAvailable
			}
		}
		c.publishErrors(pubID, errs)
	} else {
		pf.pub.confirmed.Add(uint64(len(msgs)))
		c.ctr.Confirmed.Add(uint64(len(msgs)))
		c.out.frame(func(b []byte) []byte {
			b, start := wire.BeginFrame(b, wire.KeyPublishConfirm, 1)
			b = append(b, pubID)
			b = wire.AppendU32(b, uint32(len(msgs)))
			for _, m := range msgs {
				b = wire.AppendU64(b, m.PublishingID)
			}
			return wire.EndFrame(b, start)
		})
	}
	c.returnPublishCredits(len(msgs))
	c.credit.Give(pf.credit)
	pf.credit = 0
	c.putPubFrame(pf)
}

// handlePublish parses a Publish frame (v1, or v2 with filter values),
// hands its valid entries to the stream as one batch, and answers with
// PublishConfirm once they are durable, or PublishError. The frame
// (c.pending, whose body is body) stays with the batch until it is
// confirmed.
func (c *conn) handlePublish(r *reader, version uint16, body []byte) error {
	pubID := r.u8()
	n := r.count(8 + 4)
	if r.err != nil {
		return nil
	}
	c.mu.Lock()
	p := c.mu.publishers[pubID]
	c.mu.Unlock()
	pf := c.pending
	msgs := slices.Grow(pf.batch.Messages[:0], n)
	var failed []publishedID
	for i := 0; i < n && r.err == nil; i++ {
		id := r.u64()
		var filter []byte
		if version >= 2 {
			if f, ok := r.stringBytes(); ok {
				filter = f
			}
		}
		if r.err != nil {
			break
		}
		e, rest, err := segment.ParseEntry(r.b)
		if err != nil {
			if !skipEntry(r) {
				break
			}
			// As RabbitMQ does: refuse the invalid entry and every entry
			// after it in the frame.
			failed = append(failed, publishedID{id, wire.CodePreconditionFailed})
			for i++; i < n && r.err == nil; i++ {
				id := r.u64()
				if version >= 2 {
					r.stringBytes()
				}
				if r.err == nil && skipEntry(r) {
					failed = append(failed, publishedID{id, wire.CodePreconditionFailed})
				}
			}
			break
		}
		r.b = rest
		if version >= 2 && filter != nil && e.SubBatch {
			failed = append(failed, publishedID{id, wire.CodePreconditionFailed})
			continue
		}
		msgs = append(msgs, osiris.Message{Entry: e.Raw, Filter: filter, PublishingID: id})
	}
	pf.batch.Messages = msgs // kept for reuse even when not submitted
	if r.err != nil {
		return nil
	}
	if p == nil {
		for _, m := range msgs {
			failed = append(failed, publishedID{m.PublishingID, wire.CodePublisherDoesNotExist})
		}
		msgs = nil
	}
	// As RabbitMQ's stream reader: every message of the frame counts as
	// received, each expecting a confirm.
	c.ctr.Received.Add(uint64(n))
	c.ctr.ReceivedConfirm.Add(uint64(n))
	c.ctr.ReceivedBytes.Add(uint64(len(body)))
	if p != nil {
		p.published.Add(uint64(n))
		if len(failed) > 0 {
			p.errored.Add(uint64(len(failed)))
		}
	}
	if len(failed) > 0 {
		c.publishErrors(pubID, failed)
	}
	if len(msgs) == 0 {
		return nil
	}
	c.takePublishCredits(len(msgs))
	pf.credit = int64(cap(pf.body)) + int64(cap(msgs))*messageSize
	c.credit.Take(pf.credit)
	c.pending = nil // the batch owns the frame now
	pf.pubID = pubID
	pf.pub = p
	pf.batch.Producer = p.reference
	if err := p.s.Submit(&pf.batch); err != nil {
		pf.done(osiris.Result{Err: err})
	}
	return nil
}

func (c *conn) publishErrors(pubID uint8, errs []publishedID) {
	for _, e := range errs {
		c.countCode(e.code)
	}
	c.out.frame(func(b []byte) []byte {
		b, start := wire.BeginFrame(b, wire.KeyPublishError, 1)
		b = append(b, pubID)
		b = wire.AppendU32(b, uint32(len(errs)))
		for _, e := range errs {
			b = wire.AppendU64(b, e.id)
			b = wire.AppendU16(b, uint16(e.code))
		}
		return wire.EndFrame(b, start)
	})
}

// skipEntry moves r past one entry whose framing is intact but whose
// contents may be invalid, using only its length fields. It fails r when
// even the framing does not fit.
func skipEntry(r *reader) bool {
	if len(r.b) < 4 {
		r.fail("entry")
		return false
	}
	var n uint64
	if r.b[0]&0x80 == 0 {
		n = 4 + uint64(binary.BigEndian.Uint32(r.b))
	} else {
		if len(r.b) < 11 {
			r.fail("sub-batch entry")
			return false
		}
		n = 11 + uint64(binary.BigEndian.Uint32(r.b[7:]))
	}
	if n > uint64(len(r.b)) {
		r.fail("entry")
		return false
	}
	r.b = r.b[n:]
	return true
}
