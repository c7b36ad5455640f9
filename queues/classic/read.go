package classic

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/qerr"
	"github.com/warren-mq/warren/segment"
)

// Reading messages back from a queue's log.
//
// Each taker (the dispatcher goroutine, basic.get) owns its readers, so
// the record bytes it hands to a Sink stay valid without a lock: a main
// reader that follows the cursor chunk by chunk, and a second one for
// requeued messages, which jumps back to their offsets. Claims are
// optimistic: a taker reads the record at the offset it saw under q.mu,
// then claims it under q.mu only if nobody moved meanwhile.

// taken is a message claimed by a taker.
type taken struct {
	id    uint64
	count uint32 // deliveries before this one
	rec   record // aliases the taker's reader buffer
	prio  uint8
	exp   int64         // expiry instant; noExpiry
	anns  []HeaderEntry // headers added since it was stored (Annotate)
}

// unacked is the unacked entry of t, delivered to c (nil: basic.get).
func (t *taken) unacked(c *Consumer) unackedMsg {
	return unackedMsg{c: c, count: t.count + 1, size: uint32(len(t.rec.body)), prio: t.prio, exp: t.exp}
}

// takeReaders are one taker's readers.
type takeReaders struct {
	main        chunkReader // follows the fresh messages
	requeue     chunkReader // reads requeued messages
	mainBody    bodyReader  // the bodies main's references name
	requeueBody bodyReader  // those of requeue's
}

func (t *takeReaders) init(q *Queue) {
	t.main.s, t.requeue.s = q.log, q.log
	t.mainBody.q, t.requeueBody.q = q, q
}

func (t *takeReaders) close() {
	t.main.close()
	t.requeue.close()
	t.mainBody.cr.close()
	t.requeueBody.cr.close()
}

// errBodyGone is a reference whose body the body log dropped: a settled
// message an ack lost in a crash brought back. It is settled again,
// quietly.
var errBodyGone = errors.New("queues: body reclaimed")

// bodyReader resolves a queue's reference records (recRef) into the
// body records they name in the vhost's body log. Consecutive references
// name nearby offsets, so its chunkReader mostly reads forward.
type bodyReader struct {
	q   *Queue
	cr  chunkReader
	ids []uint64 // scratch for ParseBody
}

// resolve returns raw (a record without its entry size) when it is not
// a reference, and otherwise the body record it names, valid until the
// next resolve. A body missing from the body log is an error: the
// reference was written only after its body was durable, and bodies go
// only when no reference to them is left.
func (b *bodyReader) resolve(raw []byte) ([]byte, error) {
	if !isRef(raw) {
		return raw, nil
	}
	r, err := parseRef(raw)
	if err != nil {
		return nil, err
	}
	if b.cr.s == nil {
		s, err := b.q.env.Broker.BodyLog(b.q.def.VHost)
		if err != nil {
			return nil, err
		}
		b.cr.s = s
	}
	body, found, _, err := b.cr.record(r.bodyOff)
	if err != nil {
		b.cr.close()
		b.cr.s = nil // the body log may have been reopened
		return nil, fmt.Errorf("body %d: %w", r.bodyOff, err)
	}
	if !found {
		if r.bodyOff < b.cr.s.FirstSegmentBase() {
			// Reclaimed: every queue had settled it, this one before a
			// crash lost its ack (bodies.go in package queues).
			return nil, errBodyGone
		}
		return nil, fmt.Errorf("body %d missing from the body log: %w", r.bodyOff, errBadRecord)
	}
	if b.ids, body, err = ParseBody(body, b.ids[:0]); err != nil {
		return nil, fmt.Errorf("body %d: %w", r.bodyOff, err)
	}
	if isRef(body) {
		return nil, fmt.Errorf("body %d is a reference: %w", r.bodyOff, errBadRecord)
	}
	return body, nil
}

// take claims the next ready message: the head of the highest priority
// level that has one, requeued messages first. On success it returns
// with q.mu held, the message no longer ready and not yet recorded as
// delivered; the caller records it (deliveredLocked) and unlocks.
// Messages due to expire are expired on the way (never delivered), and a
// record that does not parse is dropped (logged). It returns
// errPersistWait when the head may go out only once the persister has
// written the queue's state (persist.go).
func (q *Queue) take(rd *takeReaders) (taken, bool, error) {
	for {
		q.mu.Lock()
		if q.mu.closed {
			q.mu.Unlock()
			return taken{}, false, nil
		}
		q.expireDueLocked()
		p, req, id, ok := q.headLocked()
		q.mu.Unlock()
		if !ok {
			return taken{}, false, nil
		}

		cr, br := &rd.main, &rd.mainBody
		if req {
			cr, br = &rd.requeue, &rd.requeueBody
		}
		raw, found, _, err := cr.record(id)
		if err != nil {
			return taken{}, false, fmt.Errorf("%s: offset %d: %w", qerr.Resource("queue", q.def.Name, q.def.VHost), id, err)
		}
		var rec record
		var perr error
		if found {
			if raw, perr = br.resolve(raw); perr == nil {
				rec, perr = parseRecord(raw)
			}
		}

		q.mu.Lock()
		if q.mu.closed {
			q.mu.Unlock()
			return taken{}, false, nil
		}
		if p2, req2, id2, ok := q.headLocked(); !ok || p2 != p || req2 != req || id2 != id {
			q.mu.Unlock() // taken by another taker, purged, expired, or outranked
			continue
		}
		var seq uint64
		if req {
			seq = q.mu.levels[p].req.peek().seq
		}
		if !q.mayDeliverLocked(id, req, seq) {
			q.mu.Unlock()
			return taken{}, false, errPersistWait
		}
		h := q.popHeadLocked(p, req)
		if !found || perr != nil {
			q.settleLocked(id)
			q.mu.Unlock()
			if perr != errBodyGone {
				q.logDropped(id, found, perr)
			}
			continue
		}
		t := taken{id: id, count: h.count, rec: rec, prio: h.prio, exp: h.exp}
		if !req {
			ttl := h.ttl
			if m, err := parseMeta(rec, 0); err == nil {
				ttl = effectiveTTL(h.ttl, m.msgTTL)
			}
			t.exp = expiryOf(h.at, ttl)
			// TTL 0: deliverable to a consumer that takes it at once (a
			// requeue expires it).
			if ttl > 0 && t.exp <= q.nowMs() {
				q.deadFn(reasonExpired)(idRange{id, id + 1})
				q.mu.Unlock()
				continue
			}
			if id < q.mu.redeliverBelow {
				t.count = 1 // delivered before the last restart (at least maybe)
			}
		} else if t.exp != noExpiry && t.exp <= q.nowMs() {
			q.deadFn(reasonExpired)(idRange{id, id + 1})
			q.mu.Unlock()
			continue
		}
		return t, true, nil
	}
}

func (q *Queue) logDropped(id uint64, found bool, err error) {
	if !found {
		err = fmt.Errorf("requeued message missing from the log")
	}
	q.env.Logger.Error("queues: dropping unreadable message", "vhost", q.def.VHost, "queue", q.def.Name, "id", id, "err", err)
}

// chunkReader reads records by offset through an osiris Reader, keeping
// the last chunk read and the positions of its entries.
type chunkReader struct {
	s     *osiris.Stream
	r     *osiris.Reader // nil until needed
	have  bool           // data holds the chunk [first, next)
	first uint64
	next  uint64
	data  []byte
	pos   []uint32 // position of each entry in data
}

// record returns the record at offset id, valid until the next call. found
// is false when no message has that offset (a tracking chunk's, or one
// deleted); next is then the first offset of the following user chunk,
// or 0 when none is committed.
func (cr *chunkReader) record(id uint64) (rec []byte, found bool, next uint64, err error) {
	if cr.have && id >= cr.first && id < cr.next {
		return cr.at(id), true, 0, nil
	}
	// Go on reading forward when id is ahead of the reader (the cursor's
	// usual case); seek otherwise, and after a long skip.
	if cr.r == nil || id < cr.r.NextOffset() {
		if err := cr.seek(id); err != nil {
			return nil, false, 0, err
		}
	}
	for skipped := 0; ; skipped++ {
		if skipped == 64 {
			if err := cr.seek(id); err != nil {
				return nil, false, 0, err
			}
		}
		c, ok, err := cr.r.TryNext()
		if err != nil {
			cr.close()
			return nil, false, 0, err
		}
		if !ok {
			return nil, false, 0, nil
		}
		h := &c.Header
		if h.NextOffset() <= id {
			continue // before id: its header is enough
		}
		if err := cr.load(&c); err != nil {
			cr.close()
			return nil, false, 0, err
		}
		// The chunk is in memory now: a reader at the end of the log lets
		// go of the active segment's files, so an idle queue holds none.
		cr.r.Park()
		if id < h.ChunkID {
			return nil, false, h.ChunkID, nil
		}
		return cr.at(id), true, 0, nil
	}
}

// seek repositions the reader at the chunk holding id.
func (cr *chunkReader) seek(id uint64) error {
	if cr.r != nil {
		cr.r.Close()
		cr.r = nil
	}
	cr.have = false
	r, err := cr.s.NewReader(osiris.AtOffset(id), osiris.ReaderOptions{})
	if err != nil {
		return err
	}
	cr.r = r
	return nil
}

// load reads a chunk's entries and indexes them.
func (cr *chunkReader) load(c *osiris.Chunk) error {
	cr.have = false
	if cap(cr.data) > 64<<10 && int(c.Header.DataLen) < cap(cr.data)/4 {
		cr.data = nil // don't keep a big chunk's buffer for small ones
	}
	data, err := c.ReadData(cr.data[:0])
	cr.data = data
	if err != nil {
		return err
	}
	cr.pos = cr.pos[:0]
	for p := 0; p < len(data); {
		e, rest, err := segment.ParseEntry(data[p:])
		if err != nil {
			return fmt.Errorf("chunk %d: %w", c.Header.ChunkID, err)
		}
		if e.SubBatch {
			return fmt.Errorf("chunk %d: sub-batch entry: %w", c.Header.ChunkID, errBadRecord)
		}
		cr.pos = append(cr.pos, uint32(p))
		p = len(data) - len(rest)
	}
	if uint32(len(cr.pos)) != c.Header.NumRecords {
		return fmt.Errorf("chunk %d: %d entries for %d records: %w", c.Header.ChunkID, len(cr.pos), c.Header.NumRecords, segment.ErrCorrupt)
	}
	cr.first, cr.next, cr.have = c.Header.ChunkID, c.Header.NextOffset(), true
	return nil
}

// at returns the record of offset id in the loaded chunk.
func (cr *chunkReader) at(id uint64) []byte {
	p := cr.pos[id-cr.first]
	n := binary.BigEndian.Uint32(cr.data[p:])
	return cr.data[p+4 : p+4+n]
}

// close releases the reader and its buffers.
func (cr *chunkReader) close() {
	if cr.r != nil {
		cr.r.Close()
		cr.r = nil
	}
	cr.have = false
	cr.data, cr.pos = nil, nil
}
