package classic

import (
	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/segment"
)

// Fan-out by reference, the queue's side. A message routed to several
// durable queues is stored once, in its vhost's body log (package
// queues), and each queue's log gets a reference record (recRef) naming
// the body's offset there (PublishRef). The body log drops its oldest
// segments once no queue holds a reference into them: RefLow tells the
// broker how low this queue's references go.
//
// A queue takes its references in body order, so the oldest reference
// in its log names its lowest body. Every reference has a chunk filter
// value (refFilter, unless it has 't' or 'e'), so a chunk without a
// Bloom filter holds none and RefLow's search passes it by its header.

// refFilter is the chunk filter value of a persistent reference without
// an expiration. Never modified.
var refFilter = []byte{'r'}

// refLowCache is what RefLow found. Guarded by q.pub.
type refLowCache struct {
	// scanned: the log holds no reference below it that RefLow has not
	// seen (it searches on from there).
	scanned uint64
	has     bool   // at is the offset of the log's oldest reference
	at      uint64 // valid when has
	low     uint64 // the body offset that reference names
	// valid: no reference came since a search that found none (and
	// none was waiting then).
	valid bool
}

// RefLow returns the lowest body offset the queue's references name:
// those in its log that may still be read (at or above its head, or
// with history all it keeps) and those waiting to be written; false when
// it holds none. It reads the log only past where it last looked (so over the
// queue's life, each chunk once at most, and a chunk without a Bloom
// filter by its header alone); the usual call reads nothing. A
// reference published while RefLow runs is not counted: the caller
// bounds what it drops by the body log's offsets assigned before it
// called.
func (q *Queue) RefLow() (uint64, bool, error) {
	base := q.log.FirstSegmentBase()
	if !q.config().history() {
		// Settled messages are never read again (a history reader would).
		q.mu.Lock()
		base = max(base, q.mu.settled.FirstGap(0))
		q.mu.Unlock()
	}
	q.pub.Lock()
	c := q.pub.refLow
	if c.has && c.at >= base {
		q.pub.Unlock()
		return c.low, true, nil // the oldest reference seen is still there
	}
	// What is waiting to be written: flying is older than cur.
	pendLow, pend := uint64(0), false
	for _, pb := range []*pubBatch{q.pub.flying, q.pub.cur} {
		if pb != nil && pb.bodyEnd > 0 {
			pendLow, pend = pb.firstBody, true
			break
		}
	}
	if !c.has && c.valid && c.scanned >= base && !pend {
		q.pub.Unlock()
		return 0, false, nil // none since the last search found none
	}
	refs := q.pub.refs
	q.pub.Unlock()

	at, low, found, scanned, err := q.findRef(max(base, c.scanned))
	if err != nil {
		return 0, false, err
	}
	q.pub.Lock()
	// A search that found none stays good only while no reference comes.
	q.pub.refLow = refLowCache{scanned: scanned, has: found, at: at, low: low,
		valid: found || (!pend && q.pub.refs == refs)}
	q.pub.Unlock()
	switch {
	case found && pend:
		return min(low, pendLow), true, nil
	case found:
		return low, true, nil
	case pend:
		return pendLow, true, nil
	}
	return 0, false, nil
}

// findRef searches q's log from offset from for its first reference
// record: its offset and the body offset it names. scanned is where the
// search stopped (the log's end, or past the reference).
func (q *Queue) findRef(from uint64) (at, low uint64, found bool, scanned uint64, err error) {
	r, err := q.log.NewReader(osiris.AtOffset(from), osiris.ReaderOptions{})
	if err != nil {
		return 0, 0, false, from, err
	}
	defer r.Close()
	scanned = from
	var buf []byte
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			return 0, 0, false, scanned, err
		}
		if !ok {
			return 0, 0, false, scanned, nil
		}
		h := &c.Header
		if h.BloomSize == 0 || h.Type != segment.ChunkUser || h.NextOffset() <= from {
			scanned = max(scanned, h.NextOffset())
			continue
		}
		if buf, err = c.ReadData(buf[:0]); err != nil {
			return 0, 0, false, scanned, err
		}
		id := h.ChunkID
		for data := buf; len(data) > 0; id++ {
			e, rest, err := segment.ParseEntry(data)
			if err != nil || e.SubBatch {
				return 0, 0, false, scanned, segment.ErrCorrupt
			}
			data = rest
			if id < from || !isRef(e.Data) {
				continue
			}
			rec, err := parseRef(e.Data)
			if err != nil {
				continue // dropped when taken
			}
			return id, rec.bodyOff, true, id + 1, nil
		}
		scanned = max(scanned, h.NextOffset())
	}
}

// Closed reports whether the queue is shut down or shutting down.
func (q *Queue) Closed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.closed
}
