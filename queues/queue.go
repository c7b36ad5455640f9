package queues

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/classic"
	"github.com/warren-mq/warren/segment"
)

// The broker's registry of classic and quorum queues (AMQP 0-9-1
// queues): declare (with the declare rules of queue_args.go and
// queue_quorum.go), lookup, delete, exclusive and auto-delete queues,
// x-expires deletions (queue_host.go), recovery at Open. The queue
// itself, a view over its private log, is package classic; the broker
// is what it sees through classic.Broker (queue_host.go), and the front
// ends use its types by their names here (queue_view.go).
//
// Catalog keys of queues (see doc.go for the others):
//
//	q/<vhost> 0x00 <queue>    queueRecord (JSON; Args gob-encoded, see table.go)
//	qa/<id u64 big-endian>    the queue's ack state (package classic)
//
// Directories: dataDir/queues/<id> holds a durable queue's log,
// dataDir/transient/<id> a transient queue's (wiped at Open).
//
// Lock order: registry.opMu → registry.mu → the queue's locks (package
// classic documents them). registry.opMu is held across the topology
// hooks (which take no queue lock). A queue calls its broker
// (classic.Broker) with none of its locks held.

// DeclareOptions is a queue.declare.
type DeclareOptions struct {
	Def     QueueDef // Name "" asks for a server-named queue (amq.gen-...)
	Passive bool
	// Owner identifies the declaring connection; exclusive queues belong
	// to it and are refused to other owners (405). It must be comparable
	// (a pointer).
	Owner any
}

// Queue log settings.
const (
	// queueSegmentSize is the segment size of queue logs: small, so that
	// settled messages are deleted soon.
	queueSegmentSize = 8 << 20
	// queueMaxChunkBytes bounds the chunks of queue logs, and so what a
	// dispatcher reads and buffers at a time (a requeued message costs a
	// read of its whole chunk).
	queueMaxChunkBytes = 256 << 10
	serverNamePrefix   = "amq.gen-"
)

// queueRegistry is a broker's set of open queues.
type queueRegistry struct {
	// opMu serialises declares, deletes, recovery and close. It is held
	// across their catalog and log I/O, but not while a deleted queue
	// drains and removes its files.
	opMu sync.Mutex
	mu   struct {
		sync.Mutex
		queues        map[streamName]*Queue
		placed        map[streamName]*placedQueue // in a cluster: the replicated queues (quorum_cluster.go)
		nextTransient uint64                      // directory ids of transient queues
	}
	segmentSize int64     // log segment size; tests lower it before declaring
	watchOnce   sync.Once // watchQueuePolicies
}

func newQueueRegistry() *queueRegistry {
	r := &queueRegistry{segmentSize: queueSegmentSize}
	r.mu.queues = map[streamName]*Queue{}
	r.mu.placed = map[streamName]*placedQueue{}
	return r
}

// queueReg returns the broker's queue registry.
func (b *Broker) queueReg() *queueRegistry { return b.queues }

func (r *queueRegistry) get(vhost, name string) *Queue {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.queues[streamName{vhost, name}]
}

func queueKey(vhost, name string) []byte { return []byte("q/" + vhost + "\x00" + name) }

// queueRecord is a durable queue in the catalog.
type queueRecord struct {
	VHost      string `json:"vhost"`
	Name       string `json:"name"`
	ID         uint64 `json:"id"`
	Type       string `json:"type"`
	AutoDelete bool   `json:"auto_delete,omitempty"`
	Args       []byte `json:"args,omitempty"` // encodeArgs
	// In a cluster, a quorum queue's members, leader and the leader's
	// epoch (quorum_cluster.go); a classic queue's home node as its only
	// member and leader (classic_cluster.go); empty for a node's own
	// queue.
	Members []string `json:"members,omitempty"`
	Leader  string   `json:"leader,omitempty"`
	Epoch   uint64   `json:"epoch,omitempty"`
	// A classic queue of a cluster's that is not durable (it goes with
	// its home node's restart), or exclusive to a connection there.
	Transient bool `json:"transient,omitempty"`
	Exclusive bool `json:"exclusive,omitempty"`
	// Lost counts the members forgotten (forget_cluster.go): majorities
	// are still taken of len(Members)+Lost.
	Lost int `json:"lost,omitempty"`
}

// DeclareQueue creates a queue or checks an existing one (equivalence 406,
// exclusivity 405, reserved amq. prefix 403). It returns the queue, its
// ready message count and consumer count. Durable queues are in the
// catalog when it returns. A stream's declare (x-queue-type=stream, or
// the name of an existing stream) returns a nil q (stream_queue.go).
func (b *Broker) DeclareQueue(o DeclareOptions) (q *Queue, messages, consumers int, err error) {
	reg := b.queueReg()
	def := o.Def
	def.Name = strings.NewReplacer("\r", "", "\n", "").Replace(def.Name)
	if o.Passive {
		q := reg.get(def.VHost, def.Name)
		if q == nil {
			if s, ok := b.LookupStream(def.VHost, def.Name); ok {
				return nil, StreamMessageCount(s), 0, nil // a stream (stream_queue.go)
			}
			if _, ok := reg.placement(def.VHost, def.Name); ok {
				return nil, 0, 0, nil // led by another node: its counts are there
			}
			if _, ok := b.StreamPlacement(def.VHost, def.Name); ok {
				return nil, 0, 0, nil // a stream with no copy here
			}
			return nil, 0, 0, errNoQueue(def.VHost, def.Name)
		}
		if err := q.CheckOwner(o.Owner); err != nil {
			return nil, 0, 0, err
		}
		m, c := q.Declared()
		return q, m, c, nil
	}
	b.churn.QueuesDeclared.Add(1)
	if !b.VHostExists(def.VHost) {
		return nil, 0, 0, Errorf(CodeNotFound, "no vhost '%s'", def.VHost)
	}
	quorumDef := def // as sent: quorum queues refuse exclusive before non-durable
	if def.Exclusive {
		def.Durable = false // exclusive queues are forced transient
	}
	reg.opMu.Lock()
	defer reg.opMu.Unlock()
	def.Args = b.withDefaultQueueType(reg, def)
	quorumDef.Args = def.Args
	if handled, m, err := b.declareStreamLocked(o, def); handled {
		return nil, m, 0, err // a stream: q is nil (stream_queue.go)
	}
	serverNamed := def.Name == ""
	if serverNamed && queueTypeOf(def.Args) == QueueQuorum {
		return nil, 0, 0, errServerNamedQuorum()
	}
	if serverNamed {
		for def.Name == "" || reg.get(def.VHost, def.Name) != nil {
			def.Name = serverName()
			if _, taken := reg.placement(def.VHost, def.Name); taken {
				def.Name = ""
			}
		}
	}
	if q := reg.get(def.VHost, def.Name); q != nil {
		// rabbit_amqqueue:assert_equivalence: owner (strict), durable,
		// auto_delete, arguments.
		var want any
		if def.Exclusive {
			want = o.Owner
		}
		if q.Owner() != want {
			return nil, 0, 0, errQueueLocked(def.VHost, def.Name)
		}
		if err := checkQueueEquivalence(q.Def(), def.Durable, def.AutoDelete, def.Args); err != nil {
			return nil, 0, 0, err
		}
		m, c := q.Declared()
		return q, m, c, nil
	}
	if rec, ok := reg.placement(def.VHost, def.Name); ok {
		return nil, 0, 0, existingPlacedLocked(rec, def) // led by another node
	}
	quorumDef.Name = def.Name
	if def, err = newQueueDef(def, quorumDef, serverNamed); err != nil {
		return nil, 0, 0, err
	}
	if err := b.checkQueueLimitLocked(def.VHost, def.Name, 1); err != nil {
		return nil, 0, 0, err
	}
	var owner any
	if def.Exclusive {
		owner = o.Owner
	}
	b.watchQueuePolicies()
	if b.repl != nil && def.Type == QueueQuorum {
		q, err = b.declareQuorumCluster(reg, def)
		return q, 0, 0, err
	}
	if b.repl != nil {
		q, err = b.declareClassicCluster(reg, def, owner) // classic_cluster.go
		return q, 0, 0, err
	}
	q, err = b.createQueue(reg, def, owner)
	if err != nil {
		return nil, 0, 0, err
	}
	reg.mu.Lock()
	reg.mu.queues[streamName{def.VHost, def.Name}] = q
	reg.mu.Unlock()
	b.churn.QueuesCreated.Add(1)
	b.topoQueueAdded(def.VHost, def.Name, def.Durable)
	q.Start()
	return q, 0, 0, nil
}

// newQueueDef checks the declare of a new classic or quorum queue, its
// name and arguments, and returns its definition as it is created. sent
// is the declare as the client sent it (before an exclusive queue is
// forced transient: quorum queues refuse exclusive before non-durable).
func newQueueDef(def, sent QueueDef, serverNamed bool) (QueueDef, error) {
	if !serverNamed && strings.HasPrefix(def.Name, "amq.") {
		return def, Errorf(CodeAccessRefused, "queue name '%s' contains reserved prefix 'amq.*'", def.Name)
	}
	if err := validateQueueArgs(def.VHost, def.Name, def.Args); err != nil {
		return def, err
	}
	def.Type = QueueClassic
	if queueTypeOf(def.Args) == QueueClassic {
		if err := checkClassicOnlyArgs(def); err != nil {
			return def, err
		}
	}
	if queueTypeOf(def.Args) == QueueQuorum {
		if err := validateQuorumDeclare(sent); err != nil {
			return def, err
		}
		def.Type, def.Durable = QueueQuorum, true // queue_quorum.go
	}
	def.Args = normalizeArgs(def.Args)
	return def, nil
}

// serverName returns a new server-generated queue name: "amq.gen-" and 22
// characters of base64url, as RabbitMQ's rabbit_guid:binary does.
func serverName() string {
	var r [16]byte
	_, _ = rand.Read(r[:])
	return serverNamePrefix + base64.RawURLEncoding.EncodeToString(r[:])
}

// queueLogConfig is the osiris configuration of a queue log.
func (r *queueRegistry) queueLogConfig(durable bool) osiris.Config {
	cfg := osiris.Config{MaxSegmentSize: r.segmentSize, FilterSize: segment.MinBloomSize, Fsync: osiris.FsyncNone}
	if durable {
		// Confirm after fsync; group commit shares one sync among all the
		// publishes that arrive while the previous one is in flight.
		cfg.Fsync = osiris.FsyncAlways
	}
	return cfg
}

// queueLogOptions are the run-time options of queue logs: the broker's,
// without the retention timer (queues truncate themselves) and with
// smaller chunks.
// withDefaultQueueType returns def's arguments with the vhost's default
// queue type added, as RabbitMQ's augment_declare_args does: only when
// the declare names no x-queue-type and the queue is one the type can be
// (durable, not exclusive, not auto-delete). A queue that exists keeps
// its type: the default is added only when it is that type already, so a
// classic queue made before the vhost got a default still redeclares.
// REQUIRES: reg.opMu held.
func (b *Broker) withDefaultQueueType(reg *queueRegistry, def QueueDef) map[string]any {
	if _, ok := def.Args["x-queue-type"]; ok || !def.Durable || def.Exclusive || def.AutoDelete {
		return def.Args
	}
	v, err := b.GetVHost(def.VHost)
	if err != nil || v.DefaultQueueType == "" || v.DefaultQueueType == QueueClassic {
		return def.Args
	}
	if q := reg.get(def.VHost, def.Name); q != nil && q.Def().Type != v.DefaultQueueType {
		return def.Args
	}
	if _, ok := b.LookupStream(def.VHost, def.Name); ok && v.DefaultQueueType != QueueStream {
		return def.Args
	}
	args := make(map[string]any, len(def.Args)+1)
	for k, val := range def.Args {
		args[k] = val
	}
	args["x-queue-type"] = v.DefaultQueueType
	return args
}

func (b *Broker) queueLogOptions() osiris.Options {
	o := b.opts.StreamOptions
	o.RetentionInterval = -1
	if o.IdleTimeout == 0 {
		// An idle queue closes its log's files and ends its writer
		// goroutine sooner than a stream does: there may be many.
		o.IdleTimeout = 5 * time.Second
	}
	if o.MaxChunkBytes == 0 || o.MaxChunkBytes > queueMaxChunkBytes {
		o.MaxChunkBytes = queueMaxChunkBytes
	}
	return o
}

func (b *Broker) queueDir(durable bool, id uint64) string {
	sub := "transient"
	if durable {
		sub = "queues"
	}
	return filepath.Join(b.dataDir, sub, strconv.FormatUint(id, 10))
}

// createQueue makes a new queue's log and, for a durable queue, its
// catalog entry.
// REQUIRES: reg.opMu held.
func (b *Broker) createQueue(reg *queueRegistry, def QueueDef, owner any) (*Queue, error) {
	if def.Durable {
		id, err := b.cat.nextStreamID()
		if err != nil {
			return nil, err
		}
		def.ID = id
	} else {
		reg.mu.Lock()
		reg.mu.nextTransient++
		def.ID = reg.mu.nextTransient
		reg.mu.Unlock()
	}
	dir := b.queueDir(def.Durable, def.ID)
	s, err := osiris.Create(dir, reg.queueLogConfig(def.Durable), b.queueLogOptions())
	if err != nil {
		return nil, fmt.Errorf("queues: create %s: %w", rs("queue", def.Name, def.VHost), err)
	}
	if def.Durable {
		args, err := encodeArgs(def.Args)
		if err == nil {
			err = b.cat.put(queueKey(def.VHost, def.Name), queueRecord{
				VHost: def.VHost, Name: def.Name, ID: def.ID, Type: def.Type, AutoDelete: def.AutoDelete, Args: args,
			})
		}
		if err != nil {
			s.Delete()
			return nil, err
		}
	}
	return classic.New(b.qenv, def, owner, s), nil
}

// Queue returns an open queue, or a 404 *Error.
func (b *Broker) Queue(vhost, name string) (*Queue, error) {
	reg := b.queueReg()
	if q := reg.get(vhost, name); q != nil {
		return q, nil
	}
	if rec, ok := reg.placement(vhost, name); ok {
		return nil, errQueueElsewhere(vhost, name, rec)
	}
	return nil, errNoQueue(vhost, name)
}

// Queues returns the open queues of vhost.
func (b *Broker) Queues(vhost string) []*Queue {
	reg := b.queueReg()
	reg.mu.Lock()
	defer reg.mu.Unlock()
	var out []*Queue
	for k, q := range reg.mu.queues {
		if k.vhost == vhost {
			out = append(out, q)
		}
	}
	return out
}

// DeleteQueue deletes a queue (a missing one is not an error: count 0),
// cancelling its consumers. ifUnused / ifEmpty refuse with 406. It returns
// the number of ready messages the queue held; when it returns, the
// queue's files are gone. It waits for a Deliver in progress, so it must
// not be called from a Sink of that queue, nor with a lock its Sinks take.
func (b *Broker) DeleteQueue(vhost, name string, owner any, ifUnused, ifEmpty bool) (messages int, err error) {
	reg := b.queueReg()
	reg.opMu.Lock()
	q := reg.get(vhost, name)
	if rec, placed := reg.placement(vhost, name); placed {
		reg.opMu.Unlock()
		switch {
		case q != nil:
			if err := q.CheckOwner(owner); err != nil {
				return 0, err
			}
		case rec.Exclusive:
			return 0, errQueueLocked(vhost, name) // its owner is a connection of its home node
		}
		return b.deleteQuorumCluster(q, vhost, name, ifUnused, ifEmpty)
	}
	if q == nil {
		reg.opMu.Unlock()
		return b.deleteStreamQueue(vhost, name) // a stream, or nothing
	}
	if err := q.CheckOwner(owner); err != nil {
		reg.opMu.Unlock()
		return 0, err
	}
	n, err := q.BeginShutdown(ifUnused, ifEmpty)
	if err != nil {
		reg.opMu.Unlock()
		return 0, err
	}
	err = b.unregisterQueueLocked(reg, q)
	reg.opMu.Unlock()
	err = errors.Join(err, q.FinishShutdown(true))
	b.queueDeleted(vhost, name)
	return n, err
}

// unregisterQueueLocked removes a queue being deleted from the registry,
// the catalog and the topology.
// REQUIRES: reg.opMu held; q.beginShutdown succeeded.
func (b *Broker) unregisterQueueLocked(reg *queueRegistry, q *Queue) error {
	def := q.Def()
	reg.mu.Lock()
	delete(reg.mu.queues, streamName{def.VHost, def.Name})
	reg.mu.Unlock()
	b.churn.QueuesDeleted.Add(1)
	var err error
	if def.Durable {
		err = b.cat.delete(queueKey(def.VHost, def.Name))
	}
	b.topoQueueRemoved(def.VHost, def.Name)
	return err
}

// OwnerClosed deletes the exclusive queues of a closed connection.
func (b *Broker) OwnerClosed(owner any) {
	if owner == nil {
		return
	}
	reg := b.queueReg()
	reg.opMu.Lock()
	reg.mu.Lock()
	var mine, placed []*Queue
	for k, q := range reg.mu.queues {
		if q.Owner() == owner {
			if _, ok := reg.mu.placed[k]; ok {
				placed = append(placed, q) // the cluster's: deleted through its log
			} else {
				mine = append(mine, q)
			}
		}
	}
	reg.mu.Unlock()
	if len(placed) > 0 {
		defer func() {
			for _, q := range placed {
				if _, err := b.deleteQuorumCluster(nil, q.Def().VHost, q.Def().Name, false, false); err != nil {
					b.log.Error("queues: delete exclusive queue", "vhost", q.Def().VHost, "queue", q.Def().Name, "err", err)
				}
			}
		}()
	}
	var gone []*Queue
	for _, q := range mine {
		if _, err := q.BeginShutdown(false, false); err != nil {
			continue
		}
		if err := b.unregisterQueueLocked(reg, q); err != nil {
			b.log.Error("queues: delete exclusive queue", "vhost", q.Def().VHost, "queue", q.Def().Name, "err", err)
		}
		gone = append(gone, q)
	}
	reg.opMu.Unlock()
	for _, q := range gone {
		if err := q.FinishShutdown(true); err != nil {
			b.log.Error("queues: delete exclusive queue", "vhost", q.Def().VHost, "queue", q.Def().Name, "err", err)
		}
		b.queueDeleted(q.Def().VHost, q.Def().Name)
	}
}

// deleteVHostQueues deletes every queue of vhost, for DeleteVHost.
func (b *Broker) deleteVHostQueues(vhost string) error {
	var errs []error
	for _, name := range b.PlacedQueueNames(vhost) {
		// The apply, not DeleteQueue: this runs as a command's apply
		// in a cluster, which never proposes another.
		if _, err := (&cmdDeleteQuorum{VHost: vhost, Name: name}).apply(b); err != nil {
			errs = append(errs, err)
		}
	}
	for _, q := range b.Queues(vhost) {
		if _, err := b.DeleteQueue(vhost, q.Def().Name, q.Owner(), false, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// openQueues recovers the queues in the catalog. Called by Open after
// openTopology. Transient queues do not survive: their directory is wiped.
func (b *Broker) openQueues() error {
	reg := b.queueReg()
	reg.opMu.Lock()
	defer reg.opMu.Unlock()
	if err := os.RemoveAll(filepath.Join(b.dataDir, "transient")); err != nil {
		return fmt.Errorf("queues: wipe transient queues: %w", err)
	}
	for _, sub := range []string{"queues", "transient"} {
		if err := os.MkdirAll(filepath.Join(b.dataDir, sub), 0o755); err != nil {
			return fmt.Errorf("queues: %w", err)
		}
	}
	b.watchQueuePolicies()
	var recs []queueRecord
	if err := b.cat.scan([]byte("q/"), func(_, v []byte) error {
		var rec queueRecord
		if err := unmarshal(v, &rec); err != nil {
			return err
		}
		recs = append(recs, rec)
		return nil
	}); err != nil {
		return err
	}
	ids := map[uint64]bool{}
	var opened []*Queue
	var placed []queueRecord
	for _, rec := range recs {
		if len(rec.Members) > 0 {
			// A queue of the cluster's: a replicated one opened in its
			// role (quorum_cluster.go), a classic one recovered below
			// on its home node only (classic_cluster.go).
			p := &placedQueue{rec: rec}
			reg.mu.Lock()
			reg.mu.placed[streamName{rec.VHost, rec.Name}] = p
			reg.mu.Unlock()
			placed = append(placed, rec)
			if rec.Type == QueueClassic {
				if rec.Leader != b.opts.NodeName || rec.Transient {
					continue // another node's; or gone with the restart
				}
			} else {
				if _, member := b.queueLogOptionsFor(rec); member {
					ids[rec.ID] = true
					if err := b.openPlacedLocked(reg, p); err != nil {
						return fmt.Errorf("queues: open %s: %w", rs("queue", rec.Name, rec.VHost), err)
					}
				}
				continue
			}
		}
		args, err := decodeArgs(rec.Args)
		if err != nil {
			return fmt.Errorf("queues: %s: %w", rs("queue", rec.Name, rec.VHost), err)
		}
		def := QueueDef{VHost: rec.VHost, Name: rec.Name, ID: rec.ID, Type: rec.Type, Durable: true, AutoDelete: rec.AutoDelete, Args: args}
		if def.Type == "" {
			def.Type = QueueClassic
		}
		s, err := osiris.Open(b.queueDir(true, def.ID), b.queueLogOptions())
		if err != nil {
			return fmt.Errorf("queues: open %s: %w", rs("queue", def.Name, def.VHost), err)
		}
		floor, err := b.rebuildRefs(def, s)
		if err != nil {
			s.Close()
			return fmt.Errorf("queues: recover %s: %w", rs("queue", def.Name, def.VHost), err)
		}
		q, err := classic.Recover(b.qenv, def, s, floor)
		if err != nil {
			s.Close()
			return fmt.Errorf("queues: recover %s: %w", rs("queue", def.Name, def.VHost), err)
		}
		ids[def.ID] = true
		reg.mu.Lock()
		reg.mu.queues[streamName{def.VHost, def.Name}] = q
		reg.mu.Unlock()
		opened = append(opened, q)
	}
	b.removeOrphanQueues(ids)
	for _, q := range opened {
		b.topoQueueAdded(q.Def().VHost, q.Def().Name, true)
	}
	for _, rec := range placed {
		b.topoQueueAdded(rec.VHost, rec.Name, !rec.Transient)
	}
	if err := b.topoQueuesRecovered(); err != nil {
		return err
	}
	for _, q := range opened {
		q.Start() // expire, drop, dead-letter: every queue is there now
	}
	return nil
}

// removeOrphanQueues deletes queue directories and ack states that no
// catalogued queue owns: what a crash in the middle of a declare or a
// delete leaves behind.
func (b *Broker) removeOrphanQueues(ids map[uint64]bool) {
	dir := filepath.Join(b.dataDir, "queues")
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.log.Error("queues: list queue directories", "err", err)
		return
	}
	for _, e := range ents {
		id, err := strconv.ParseUint(e.Name(), 10, 64)
		if err != nil || ids[id] {
			continue
		}
		b.log.Warn("queues: removing orphan queue log", "dir", e.Name())
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			b.log.Error("queues: remove orphan queue log", "dir", e.Name(), "err", err)
		}
	}
	var stale [][]byte
	_ = b.cat.scan([]byte(classic.AckKeyPrefix), func(k, _ []byte) error {
		if id, ok := classic.AckKeyID(k); ok && !ids[id] {
			stale = append(stale, append([]byte(nil), k...))
		}
		return nil
	})
	for _, k := range stale {
		if err := b.cat.delete(k); err != nil {
			b.log.Error("queues: remove orphan ack state", "err", err)
		}
	}
}

// closeQueues closes every queue (persisting its state). Called by Close.
func (b *Broker) closeQueues() error {
	reg := b.queues
	if reg == nil {
		return nil
	}
	reg.opMu.Lock()
	reg.mu.Lock()
	qs := make([]*Queue, 0, len(reg.mu.queues))
	for _, q := range reg.mu.queues {
		qs = append(qs, q)
	}
	clear(reg.mu.queues)
	var logs []*osiris.Stream
	for _, p := range reg.mu.placed {
		p.gen++ // a recovery in flight gives up
		if p.log != nil {
			logs = append(logs, p.log)
			p.log = nil
		}
	}
	reg.mu.Unlock()
	var errs []error
	for _, s := range logs {
		errs = append(errs, s.Close())
	}
	for _, q := range qs {
		if _, err := q.BeginShutdown(false, false); err != nil {
			continue
		}
		errs = append(errs, q.FinishShutdown(false))
	}
	reg.opMu.Unlock()
	return errors.Join(errs...)
}
