package classic

import "github.com/warren-mq/warren/osiris"

// Test hooks. The broker's tests (package queues) drive queues through
// a Broker, as the front ends do, and then check bookkeeping that no
// other method shows: they cannot reach this package's unexported
// fields. These read it for them, each under the lock that guards it.
// Production code must not call them (their names end in ForTest).

// CompactAtForTest is the size from which the expiry heap and the TTL-0
// list are compacted (compactAt).
const CompactAtForTest = compactAt

// StateForTest is a queue's bookkeeping, as StateForTest reads it.
type StateForTest struct {
	Ready            int    // ready messages
	ReadyBytes       int64  // their body bytes
	PendingPublishes int    // admitted under a reject overflow, not stored
	Unacked          int    // delivered and not settled
	Head             uint64 // the lowest offset not settled
	Tail             uint64 // the offset after the last stored message
	ClaimedRanges    int    // ranges claimed for dead-lettering, not settled
	DeadLettering    bool   // the dead-letter worker runs
	TTLArmed         bool   // the TTL timer is armed
	Expiries         int    // entries in the expiry heap
	DeliveredMark    uint64 // the offset after the highest delivered
	MarkSafe         uint64 // the delivered mark known to be on disk
	Dispatching      bool   // the dispatcher goroutine runs
	// DispatcherDone is closed when the last dispatcher started exits
	// (nil before the first).
	DispatcherDone <-chan struct{}
}

// StateForTest returns q's bookkeeping, read under q.mu.
func (q *Queue) StateForTest() StateForTest {
	q.mu.Lock()
	defer q.mu.Unlock()
	var st StateForTest
	st.Ready, st.ReadyBytes, st.PendingPublishes = q.mu.ready, q.mu.readyBytes, q.mu.pendPub
	st.Unacked = len(q.mu.unacked)
	st.Head, st.Tail = q.mu.settled.FirstGap(0), q.mu.tail
	st.ClaimedRanges, st.DeadLettering = q.mu.claimed.Len(), q.mu.dlRunning
	st.TTLArmed, st.Expiries = q.mu.ttlArmed, len(q.mu.expq)
	st.DeliveredMark, st.MarkSafe = q.mu.deliveredMark, q.mu.markSafe
	st.Dispatching, st.DispatcherDone = q.mu.dispatching, q.mu.dispDone
	return st
}

// GetReaderForTest reports whether basic.get's main reader is open and
// whether it holds a chunk's buffer. It must not be called from a Get's
// callback.
func (q *Queue) GetReaderForTest() (open, buffered bool) {
	q.get.Lock()
	defer q.get.Unlock()
	return q.get.rd.main.r != nil, q.get.rd.main.data != nil
}

// SweepForTest runs the queue's idle sweep (deleting settled segments,
// closing an unused basic.get reader) now.
func (q *Queue) SweepForTest() error { return q.sweep() }

// LogStatsForTest returns the stats of the queue's log.
func (q *Queue) LogStatsForTest() osiris.Stats { return q.log.Stats() }

// FlushForTest writes the state of every queue that changed now, as the
// persister's next regular flush would.
func (p *Persister) FlushForTest() { p.flush() }

// PersistedForTest reports whether everything q changed has been
// written, after waiting for a write in progress; if not, it returns a
// channel closed when a write that starts later has landed.
func (p *Persister) PersistedForTest(q *Queue) (bool, <-chan struct{}) {
	// Under flushMu no write is under way: q is dirty exactly when it is
	// in the persister's list, and the write that takes it starts after
	// next is read, so it closes next when it lands. Without flushMu, a
	// write could take q and replace next before next is read, then
	// encode q after dirty is read: next would wait for another write,
	// which may never come.
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	next := p.mu.next
	p.mu.Unlock()
	q.mu.Lock()
	dirty := q.mu.dirty
	q.mu.Unlock()
	if dirty {
		return false, next
	}
	return true, nil
}

// WithoutWritesForTest calls fn while no queue state is being written,
// so that fn sees the files of the last write whole.
func (p *Persister) WithoutWritesForTest(fn func()) {
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	fn()
}
