package classic

import (
	"context"
	"fmt"
	"math"

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
	pendLow, pend := q.pendingRefLowLocked()
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
	scanned, err = scanRefs(q.log, from, func(id, bodyOff uint64) bool {
		at, low, found = id, bodyOff, true
		return false
	})
	if found {
		scanned = at + 1
	}
	return at, low, found, scanned, err
}

// scanRefs calls fn with the offset and body offset of each reference
// record of s at or after offset from, in log order, until fn returns
// false. A chunk without a Bloom filter holds no reference (every one
// has a filter value) and is passed by its header. It returns the offset
// past the last chunk it looked at (from when none).
func scanRefs(s *osiris.Stream, from uint64, fn func(at, bodyOff uint64) bool) (scanned uint64, err error) {
	r, err := s.NewReader(osiris.AtOffset(from), osiris.ReaderOptions{})
	if err != nil {
		return from, err
	}
	defer r.Close()
	scanned = from
	var buf []byte
	for {
		c, ok, err := r.TryNext()
		if err != nil || !ok {
			return scanned, err
		}
		h := &c.Header
		if h.BloomSize == 0 || h.Type != segment.ChunkUser || h.NextOffset() <= from {
			scanned = max(scanned, h.NextOffset())
			continue
		}
		if buf, err = c.ReadData(buf[:0]); err != nil {
			return scanned, err
		}
		id := h.ChunkID
		for data := buf; len(data) > 0; id++ {
			e, rest, err := segment.ParseEntry(data)
			if err != nil || e.SubBatch {
				return scanned, segment.ErrCorrupt
			}
			data = rest
			if id < from || !isRef(e.Data) {
				continue
			}
			if ref, err := parseRef(e.Data); err == nil && !fn(id, ref.bodyOff) {
				return scanned, nil // dropped when taken, if it does not parse
			}
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

// pendingRefLowLocked returns the lowest body offset named by a
// reference waiting to be written (in the batch in flight, then in the
// one forming: references go in body order); false when none waits.
// REQUIRES: q.pub held.
func (q *Queue) pendingRefLowLocked() (uint64, bool) {
	for _, pb := range [2]*pubBatch{q.pub.flying, q.pub.cur} {
		if pb != nil && pb.bodyEnd > 0 {
			return pb.firstBody, true
		}
	}
	return 0, false
}

// RefsWritten waits until every reference the queue took for a body
// below end has been written to its log (or failed), for the broker's
// journal checkpoint. A batch of references only is written without an
// fsync: SyncLog makes them durable.
func (q *Queue) RefsWritten(end uint64) {
	q.pub.Lock()
	defer q.pub.Unlock()
	q.pub.refWaiters++
	defer func() { q.pub.refWaiters-- }()
	for {
		if low, ok := q.pendingRefLowLocked(); !ok || low >= end {
			return
		}
		q.pub.idle.Wait()
	}
}

// NoJournalFloor is a journal floor that keeps nothing for a rebuild
// (Recover).
const NoJournalFloor = math.MaxUint64

const noFloor = NoJournalFloor

// SetJournalFloor tells the queue where the broker's last journal
// checkpoint found its log's end: a rebuild after a crash looks for the
// queue's last reference from there (RebuildRefs), so the sweep keeps
// every segment from there on, settled or not, until the next
// checkpoint raises it.
func (q *Queue) SetJournalFloor(end uint64) {
	if old := q.journalFloor.Swap(end); end > old {
		q.sweepSoon() // it may have held settled segments back
	}
}

// sweepSoon arms the sweep timer (recover.go).
func (q *Queue) sweepSoon() {
	q.mu.Lock()
	q.scheduleLocked()
	q.mu.Unlock()
}

// ClearJournalFloor lets the sweep delete what it likes again, unless the
// queue has taken a reference since the broker opened: a checkpoint that
// does not list the queue calls it (no rebuild will look at its log).
func (q *Queue) ClearJournalFloor() {
	q.pub.Lock()
	cleared := q.pub.refs == 0 && q.journalFloor.Swap(noFloor) != noFloor
	q.pub.Unlock()
	if cleared {
		q.sweepSoon()
	}
}

// SyncRefs syncs the queue's log if a batch of references only was
// written to it since the last SyncRefs (osiris.Stream.Sync).
func (q *Queue) SyncRefs() error {
	if !q.refsUnsynced.Swap(false) {
		return nil
	}
	if err := q.log.Sync(); err != nil {
		q.refsUnsynced.Store(true)
		return err
	}
	return nil
}

// RefsTaken is how many references the queue has taken since it opened.
func (q *Queue) RefsTaken() uint64 {
	q.pub.Lock()
	defer q.pub.Unlock()
	return q.pub.refs
}

// LogNext is the offset the queue's next record will get.
func (q *Queue) LogNext() uint64 { return uint64(q.log.CommittedOffset() + 1) }

// BodyRef is a body of the vhost's body log that names a queue: what
// RebuildRefs needs to write its reference.
type BodyRef struct {
	Off uint64
	Rec []byte // the body record (ParseBody)
}

// RebuildRefs appends to s, the log of a durable queue that is about to
// be recovered (quorum: a quorum queue), the references a crash lost: of
// bodies, the bodies naming the queue from the broker's last journal
// checkpoint on (in body order), those past the last reference s holds
// at or after offset from (where the checkpoint found s's end). A batch
// of references only is written without an fsync and confirmed, so the
// lost ones are a suffix of what the queue took. It returns how many it
// wrote.
func RebuildRefs(s *osiris.Stream, quorum bool, from uint64, bodies []BodyRef) (int, error) {
	if len(bodies) == 0 {
		return 0, nil
	}
	last, has, err := lastRef(s, from)
	if err != nil {
		return 0, err
	}
	var msgs []osiris.Message
	for _, b := range bodies {
		if has && b.Off <= last {
			continue
		}
		r, err := parseRecord(b.Rec)
		if err != nil || r.ref {
			continue // the queue would drop it
		}
		if !r.persistent && !quorum {
			continue // transient: gone with the restart anyway
		}
		m, err := parseMeta(r, 255)
		if err != nil {
			continue
		}
		ref := appendRefMeta(nil, r.persistent, b.Off, m)
		filter := refFilter
		switch {
		case !r.persistent:
			filter = transientFilter
		case m.msgTTL >= 0:
			filter = expiringFilter
		}
		msgs = append(msgs, osiris.Message{Entry: ref, Filter: filter})
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	if _, err := s.Append(context.Background(), "", msgs...); err != nil {
		return 0, fmt.Errorf("queues: rebuild references: %w", err)
	}
	return len(msgs), nil
}

// lastRef returns the body offset of the last reference in s at or after
// offset from.
func lastRef(s *osiris.Stream, from uint64) (last uint64, has bool, err error) {
	_, err = scanRefs(s, max(from, s.FirstSegmentBase()), func(_, bodyOff uint64) bool {
		last, has = max(last, bodyOff), true
		return true
	})
	return last, has, err
}
