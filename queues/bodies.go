package queues

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/classic"
	"github.com/warren-mq/warren/segment"
)

// Fan-out by reference, the broker's side (docs/design-fanout-by-reference.md).
//
// A message routed to two or more durable classic or quorum queues is
// stored once, in its vhost's body log (dataDir/bodies/<hex of the vhost
// name>, an osiris stream without tracking, synced like a durable
// queue's log), and each of those queues gets a reference record naming
// the body's offset (classic.PublishRef). A message for one durable
// queue, or for transient queues, or for streams, is written as before.
//
// Order and durability: a fan-out takes its body offset and hands its
// references to the queues under bodyLog.fan, so each queue gets its
// references in body order and in the publisher's order among its other
// messages. A queue writes a batch holding references only once the
// bodies they name are durable (bodyLog.AfterDurable), so a reference on
// disk never names a body that is not, and a publish is confirmed when
// its body and every reference are durable.
//
// Journal: a batch of references only is written to a queue's log
// without an fsync (its publishes are confirmed once the bodies are
// durable and the references written), because the body log is their
// journal: each body entry names the durable queues it was routed to
// (classic.AppendBody). Every second the broker checkpoints each body
// log (checkpoint): it notes the offset C the next body will get and
// each durable queue's log end, waits until the references to bodies
// below C are written, syncs those queues' logs, and stores C and the
// ends in the catalog (bc/<vhost>). At start, before a queue recovers,
// the references it lost in a crash are rebuilt from the bodies from C
// on that name it (rebuildRefs). So a confirmed fan-out costs one
// fsync, of the body log, and the queues' logs are synced once a second
// instead of once per batch: each fsync rewrites a partly written page,
// which for small references would cost more bytes than the references.
//
// Space: the body log drops its oldest segments once no queue holds a
// reference below them (reclaim, each reclaimInterval): the lowest body
// offset each durable queue of the vhost references (Queue.RefLow,
// which reads a queue's log only where it has not looked before), and
// the offsets taken but not yet handed to queues. No per-message count
// exists. A crash between a body and its references leaves a body that
// nothing references: it goes with its segment, as soon as the queues
// are past it.

// reclaimInterval is how often body logs drop what no queue references.
const reclaimInterval = time.Second

// bodyLogs are the broker's body logs, by vhost.
type bodyLogs struct {
	bodies, refs atomic.Uint64 // fan-outs stored by reference, references written
	mu           sync.Mutex
	logs         map[string]*bodyLog
	stop         chan struct{} // closed by closeBodies: the reclaimer ends
	done         chan struct{} // closed when it has
}

// bodyLog is one vhost's body log.
type bodyLog struct {
	vhost string
	s     *osiris.Stream
	ctr   *bodyLogs // the broker's counters

	// fan is held while a fan-out takes its body offset and hands its
	// references to the queues, and while reclaim reads assigned.
	fan      sync.Mutex
	assigned uint64 // offsets below are taken; guarded by fan

	// ckpt is the journal checkpoint's start: bodies from it on may be
	// needed to rebuild references, so reclaim keeps them.
	ckpt atomic.Uint64
	// rebuild: by queue id, the bodies from the checkpoint on that name
	// the queue; loaded at open for rebuildRefs, then dropped.
	rebuild map[uint64][]classic.BodyRef
	// ckptEnds: by queue id, its log's end at the checkpoint (where
	// rebuildRefs looks for its last reference); loaded at open.
	ckptEnds map[uint64]uint64

	mu struct {
		sync.Mutex
		expect  uint64 // the offset the next completed body must have
		durable uint64 // every body below is durable
		broken  error  // a body write failed: no more fan-outs here
		waiters []bodyWaiter
	}
	doneFn func(osiris.Result) // bl.bodyDone, bound once
	run    []bodyWaiter        // bodyDone's scratch (the writer goroutine's)
}

type bodyWaiter struct {
	end uint64
	fn  func(error)
}

var _ classic.BodyGate = (*bodyLog)(nil)

func (b *Broker) bodiesDir() string { return filepath.Join(b.dataDir, "bodies") }

func bodyLogDir(root, vhost string) string {
	return filepath.Join(root, hex.EncodeToString([]byte(vhost)))
}

// bodyLogConfig is a body log's osiris configuration: a durable queue
// log's.
func (b *Broker) bodyLogConfig() osiris.Config { return b.queueReg().queueLogConfig(true) }

// openBodies opens the body logs on disk (before the queues recover:
// their consumers read them), removes those of vhosts that are gone, and
// starts the reclaimer.
func (b *Broker) openBodies() error {
	b.bodies.logs = map[string]*bodyLog{}
	root := b.bodiesDir()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("queues: %w", err)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("queues: %w", err)
	}
	for _, e := range ents {
		name, err := hex.DecodeString(e.Name())
		vhost := string(name)
		if err != nil || !b.VHostExists(vhost) {
			b.log.Warn("queues: removing the body log of a deleted vhost", "dir", e.Name())
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return fmt.Errorf("queues: %w", err)
			}
			continue
		}
		s, err := osiris.Open(filepath.Join(root, e.Name()), b.queueLogOptions())
		if err != nil {
			return fmt.Errorf("queues: open the body log of vhost %q: %w", vhost, err)
		}
		bl := newBodyLog(&b.bodies, vhost, s)
		b.bodies.logs[vhost] = bl
		if err := b.loadJournal(bl); err != nil {
			return err
		}
	}
	b.bodies.stop, b.bodies.done = make(chan struct{}), make(chan struct{})
	go b.reclaimLoop()
	return nil
}

// journalRebuilt drops what openBodies loaded for rebuildRefs, once every
// queue has recovered.
func (b *Broker) journalRebuilt() {
	b.bodies.mu.Lock()
	defer b.bodies.mu.Unlock()
	for _, bl := range b.bodies.logs {
		bl.rebuild, bl.ckptEnds = nil, nil
	}
}

func newBodyLog(ctr *bodyLogs, vhost string, s *osiris.Stream) *bodyLog {
	bl := &bodyLog{vhost: vhost, s: s, ctr: ctr}
	next := s.Stats().NextOffset
	bl.assigned, bl.mu.expect, bl.mu.durable = next, next, next
	bl.doneFn = bl.bodyDone
	return bl
}

// closeBodies stops the reclaimer and closes the body logs (after the
// queues have closed).
func (b *Broker) closeBodies() error {
	if b.bodies.stop == nil {
		return nil
	}
	close(b.bodies.stop)
	<-b.bodies.done
	b.bodies.mu.Lock()
	logs := b.bodies.logs
	b.bodies.logs = nil // no more body logs: fan-outs are copies
	b.bodies.mu.Unlock()
	var errs []error
	for _, bl := range logs {
		errs = append(errs, bl.s.Close())
	}
	return errors.Join(errs...)
}

// deleteVHostBodies deletes vhost's body log (its queues are gone) and
// its checkpoint.
func (b *Broker) deleteVHostBodies(vhost string) error {
	b.bodies.mu.Lock()
	bl := b.bodies.logs[vhost]
	delete(b.bodies.logs, vhost)
	b.bodies.mu.Unlock()
	if err := b.cat.delete(bodyCkptKey(vhost)); err != nil {
		return err
	}
	if bl == nil {
		return nil
	}
	return bl.s.Delete()
}

// bodyLog returns vhost's body log, creating it on first use; nil when
// it cannot be had (fan-outs are then written as copies).
func (b *Broker) bodyLog(vhost string) *bodyLog {
	b.bodies.mu.Lock()
	defer b.bodies.mu.Unlock()
	if bl := b.bodies.logs[vhost]; bl != nil || b.bodies.logs == nil {
		return bl
	}
	dir := bodyLogDir(b.bodiesDir(), vhost)
	s, err := osiris.Create(dir, b.bodyLogConfig(), b.queueLogOptions())
	if errors.Is(err, osiris.ErrExists) {
		s, err = osiris.Open(dir, b.queueLogOptions())
	}
	if err != nil {
		b.log.Error("queues: cannot make a body log; fan-outs are written as copies", "vhost", vhost, "err", err)
		return nil
	}
	bl := newBodyLog(&b.bodies, vhost, s)
	b.bodies.logs[vhost] = bl
	return bl
}

// BodyLog returns vhost's body log (classic.Broker).
func (h queueHost) BodyLog(vhost string) (*osiris.Stream, error) {
	h.b.bodies.mu.Lock()
	defer h.b.bodies.mu.Unlock()
	if bl := h.b.bodies.logs[vhost]; bl != nil {
		return bl.s, nil
	}
	return nil, fmt.Errorf("queues: vhost %q has no body log", vhost)
}

// publish stores p once in the body log and a reference to it in each
// durable classic or quorum queue of dsts; done is called once per such
// queue. It reports false, having done nothing, when the body log cannot
// take the message: the caller writes copies.
func (bl *bodyLog) publish(dsts []Destination, p *Publishing, done func(error)) bool {
	bl.mu.Lock()
	broken := bl.mu.broken
	bl.mu.Unlock()
	if broken != nil {
		return false
	}
	ref, err := classic.AppendRef(make([]byte, 0, 32), p.Record, 0)
	if err != nil {
		return false // the queues refuse it as a copy
	}
	// The queues admit the message first (a reject overflow refuses it
	// before the body is written), so the body names only those that took
	// it and a rebuild never gives a queue what it refused.
	type admitted struct {
		q *Queue
		a classic.RefAdmission
	}
	var admBuf [16]admitted
	var idBuf [16]uint64
	adm, ids := admBuf[:0], idBuf[:0]
	for _, d := range dsts {
		if !d.shared() {
			continue
		}
		a, err := d.q.AdmitRef(p.Record)
		if err != nil {
			done(err)
			continue
		}
		adm = append(adm, admitted{d.q, a})
		ids = append(ids, d.q.Def().ID)
	}
	if len(adm) == 0 {
		return true
	}
	body := classic.AppendBody(nil, p.Record, ids)
	batch := &osiris.Batch{Messages: []osiris.Message{{Entry: body}}, Done: bl.doneFn}
	bl.fan.Lock()
	off, err := bl.s.SubmitCounted(batch)
	if err != nil {
		bl.fan.Unlock()
		for _, x := range adm {
			x.q.CancelRef(x.a)
			x.q.Publish(p.Record, p.Persistent, done) // a copy after all
		}
		return true
	}
	bl.assigned = off + 1
	classic.SetRefOffset(ref, off)
	for _, x := range adm {
		x.q.PublishRef(p.Record, ref, x.a, bl, off, p.Persistent, done)
	}
	bl.fan.Unlock()
	n := len(adm)
	bl.ctr.bodies.Add(1)
	bl.ctr.refs.Add(uint64(n))
	return true
}

// bodyDone runs on the body log's writer goroutine, in submit order, as
// bodies become durable or fail: it releases the queue batches waiting
// for them.
func (bl *bodyLog) bodyDone(r osiris.Result) {
	bl.mu.Lock()
	want := bl.mu.expect
	bl.mu.expect++
	switch {
	case bl.mu.broken != nil:
	case r.Err != nil:
		bl.mu.broken = fmt.Errorf("queues: body log of vhost %q: %w", bl.vhost, r.Err)
	case r.Written != 1 || r.LastOffset != want:
		bl.mu.broken = fmt.Errorf("queues: body log of vhost %q: a body written at %d, expected at %d", bl.vhost, r.LastOffset, want)
	default:
		bl.mu.durable = want + 1
	}
	run := bl.run[:0]
	keep := bl.mu.waiters[:0]
	for _, w := range bl.mu.waiters {
		if bl.mu.broken != nil || w.end <= bl.mu.durable {
			run = append(run, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(bl.mu.waiters[len(keep):])
	bl.mu.waiters = keep
	err := bl.mu.broken
	bl.mu.Unlock()
	for _, w := range run {
		w.fn(err)
	}
	clear(run)
	bl.run = run
}

// AfterDurable implements classic.BodyGate.
func (bl *bodyLog) AfterDurable(end uint64, fn func(error)) {
	bl.mu.Lock()
	switch {
	case end <= bl.mu.durable:
		bl.mu.Unlock()
		fn(nil)
	case bl.mu.broken != nil:
		err := bl.mu.broken
		bl.mu.Unlock()
		fn(err)
	default:
		bl.mu.waiters = append(bl.mu.waiters, bodyWaiter{end, fn})
		bl.mu.Unlock()
	}
}

// bodyCheckpoint is a body log's journal checkpoint in the catalog.
type bodyCheckpoint struct {
	From uint64            `json:"from"` // the next body's offset then
	Ends map[uint64]uint64 `json:"ends"` // by durable queue id, its log's end then
}

func bodyCkptKey(vhost string) []byte { return []byte("bc/" + vhost) }

// loadJournal reads bl's checkpoint and the bodies from it on, for
// rebuildRefs.
func (b *Broker) loadJournal(bl *bodyLog) error {
	var ck bodyCheckpoint
	if err := b.cat.get(bodyCkptKey(bl.vhost), &ck); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	from := max(ck.From, bl.s.FirstSegmentBase())
	bl.ckpt.Store(from)
	bl.ckptEnds = ck.Ends
	if from >= bl.assigned {
		return nil
	}
	r, err := bl.s.NewReader(osiris.AtOffset(from), osiris.ReaderOptions{})
	if err != nil {
		return err
	}
	defer r.Close()
	bl.rebuild = map[uint64][]classic.BodyRef{}
	var ids []uint64
	for {
		c, ok, err := r.TryNext()
		if err != nil {
			return fmt.Errorf("queues: body log of vhost %q: %w", bl.vhost, err)
		}
		if !ok {
			return nil
		}
		data, err := c.ReadData(nil)
		if err != nil {
			return fmt.Errorf("queues: body log of vhost %q: %w", bl.vhost, err)
		}
		off := c.Header.ChunkID
		for len(data) > 0 {
			e, rest, err := segment.ParseEntry(data)
			if err != nil || e.SubBatch {
				return fmt.Errorf("queues: body log of vhost %q: chunk %d: %w", bl.vhost, c.Header.ChunkID, segment.ErrCorrupt)
			}
			data = rest
			if off >= from {
				var rec []byte
				if ids, rec, err = classic.ParseBody(e.Data, ids[:0]); err != nil {
					b.log.Error("queues: body log: unreadable body", "vhost", bl.vhost, "offset", off, "err", err)
				} else {
					for _, id := range ids {
						bl.rebuild[id] = append(bl.rebuild[id], classic.BodyRef{Off: off, Rec: rec})
					}
				}
			}
			off++
		}
	}
}

// rebuildRefs writes the references a crash lost to the log of durable
// queue def before it recovers (see Journal above). It returns the
// queue's journal floor: where the last checkpoint found its log's end,
// below which its sweep may delete (classic.SetJournalFloor).
func (b *Broker) rebuildRefs(def QueueDef, s *osiris.Stream) (floor uint64, err error) {
	b.bodies.mu.Lock()
	bl := b.bodies.logs[def.VHost]
	b.bodies.mu.Unlock()
	floor = classic.NoJournalFloor
	if bl == nil {
		return floor, nil
	}
	if end, ok := bl.ckptEnds[def.ID]; ok {
		floor = end
	}
	if len(bl.rebuild[def.ID]) == 0 {
		return floor, nil
	}
	from, ok := bl.ckptEnds[def.ID]
	if !ok {
		from = 0 // made after the checkpoint: its whole log
	}
	n, err := classic.RebuildRefs(s, def.Type == QueueQuorum, from, bl.rebuild[def.ID])
	if n > 0 {
		b.log.Info("queues: rebuilt references a crash lost", "vhost", def.VHost, "queue", def.Name, "references", n)
	}
	delete(bl.rebuild, def.ID)
	if !ok {
		floor = 0 // not in the checkpoint: its whole log, until the next
	}
	return floor, err
}

// checkpoint records bl's journal checkpoint (see Journal above).
func (b *Broker) checkpoint(bl *bodyLog) error {
	bl.fan.Lock()
	from := bl.assigned
	var qs, others []*Queue
	ends := map[uint64]uint64{}
	for _, q := range b.Queues(bl.vhost) {
		// Only queues that took references since the broker opened can
		// have lost any; a rebuild searches another's whole log.
		switch {
		case !q.Def().Durable:
		case q.RefsTaken() > 0:
			qs = append(qs, q)
			ends[q.Def().ID] = q.LogNext()
		default:
			others = append(others, q)
		}
	}
	bl.fan.Unlock()
	if from == bl.ckpt.Load() {
		return nil // no body since the last one
	}
	for _, q := range qs {
		q.RefsWritten(from)
	}
	for _, q := range qs {
		if err := q.SyncRefs(); err != nil && !q.Closed() {
			return fmt.Errorf("queues: checkpoint: sync %s: %w", rs("queue", q.Def().Name, q.Def().VHost), err)
		}
	}
	if err := b.cat.put(bodyCkptKey(bl.vhost), bodyCheckpoint{From: from, Ends: ends}); err != nil {
		return err
	}
	bl.ckpt.Store(from)
	// A rebuild now looks for each queue's last reference from its end
	// then: its sweep may delete what lies below.
	for _, q := range qs {
		q.SetJournalFloor(ends[q.Def().ID])
	}
	for _, q := range others {
		q.ClearJournalFloor() // the floor an earlier run's checkpoint set
	}
	return nil
}

// reclaimLoop runs reclaim every reclaimInterval until closeBodies.
func (b *Broker) reclaimLoop() {
	defer close(b.bodies.done)
	every := cmp.Or(b.opts.BodyReclaimInterval, reclaimInterval)
	if every < 0 {
		<-b.bodies.stop
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.bodies.stop:
			return
		case <-t.C:
			b.ReclaimBodies()
		}
	}
}

// ReclaimBodies checkpoints every body log's journal, then drops the
// sealed segments whose bodies no queue references any more and no
// rebuild can need. It returns the number of segments dropped. The
// broker runs it every second; tests call it.
func (b *Broker) ReclaimBodies() int {
	b.bodies.mu.Lock()
	logs := make([]*bodyLog, 0, len(b.bodies.logs))
	for _, bl := range b.bodies.logs {
		logs = append(logs, bl)
	}
	b.bodies.mu.Unlock()
	n := 0
	for _, bl := range logs {
		if err := b.checkpoint(bl); err != nil {
			b.log.Error("queues: body log checkpoint", "vhost", bl.vhost, "err", err)
		}
		n += b.reclaim(bl)
	}
	return n
}

// reclaim drops bl's segments below every reference.
func (b *Broker) reclaim(bl *bodyLog) int {
	// Offsets taken before this point are in their queues (pending or
	// written) by now; later ones are at or above low.
	bl.fan.Lock()
	low := bl.assigned
	bl.fan.Unlock()
	low = min(low, bl.ckpt.Load()) // a rebuild may need what follows
	if !bl.s.CanTruncateBefore(low) {
		return 0
	}
	for _, q := range b.Queues(bl.vhost) {
		if !q.Def().Durable {
			continue
		}
		l, ok, err := q.RefLow()
		if err != nil {
			if q.Closed() {
				continue // deleted or closing: its references go with it
			}
			b.log.Warn("queues: body log reclaim: cannot read a queue's references", "vhost", bl.vhost, "queue", q.Def().Name, "err", err)
			return 0
		}
		if ok {
			low = min(low, l)
		}
	}
	if !bl.s.CanTruncateBefore(low) {
		return 0
	}
	n, err := bl.s.TruncateBefore(low)
	if err != nil && !errors.Is(err, osiris.ErrClosed) {
		b.log.Error("queues: body log reclaim", "vhost", bl.vhost, "err", err)
	}
	return n
}

// BodyLogStat describes one vhost's body log.
type BodyLogStat struct {
	VHost    string
	Bytes    int64 // its segment files
	Segments int
	// FirstOffset and NextOffset bound the bodies it holds (including
	// those no queue references any more, until their segment goes).
	FirstOffset, NextOffset uint64
}

// BodyLogStats returns the body logs (fan-out by reference), by vhost.
func (b *Broker) BodyLogStats() []BodyLogStat {
	b.bodies.mu.Lock()
	logs := make([]*bodyLog, 0, len(b.bodies.logs))
	for _, bl := range b.bodies.logs {
		logs = append(logs, bl)
	}
	b.bodies.mu.Unlock()
	out := make([]BodyLogStat, 0, len(logs))
	for _, bl := range logs {
		st := bl.s.Stats()
		out = append(out, BodyLogStat{VHost: bl.vhost, Bytes: st.Bytes, Segments: st.Segments, FirstOffset: st.FirstOffset, NextOffset: st.NextOffset})
	}
	return out
}

// FanoutCounts returns the messages stored once for several queues and
// the references written for them, since the broker opened.
func (b *Broker) FanoutCounts() (bodies, refs uint64) {
	return b.bodies.bodies.Load(), b.bodies.refs.Load()
}
