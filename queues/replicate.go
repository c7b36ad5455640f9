package queues

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Catalog commands (issue 20, docs/design-cluster.md "The catalog").
//
// A change of the catalog is a command: the operation with everything
// the proposer decided in it (a password's salted hash, a generated
// name), so that applying it is a function of the catalog alone. On a
// single node a command is applied where it is made, as before. In a
// cluster it is handed to a Replicator, which puts it in the catalog's
// raft log; every node applies the log in the same order through
// ApplyCommand, and the node that made the command takes its result from
// its own apply.
//
// Apply must be deterministic (the same catalog and command give the
// same catalog on every node) and tolerate being applied twice in a row
// (a node that crashes between an apply's writes and the record of its
// log index applies it again at restart): commands set values rather
// than add to them, and a command that finds its work done gives the
// same catalog. What apply does outside the catalog (closing the
// connections of a deleted user, opening a stream's files) happens on
// every node, each for its own connections and files.

// Replicator orders catalog commands across a cluster.
type Replicator interface {
	// Replicate proposes data and returns once this node has applied it
	// (through Broker.ApplyCommand), or with an error if it could not be
	// committed; then it may or may not have been applied.
	Replicate(ctx context.Context, data []byte) error
}

// command is one catalog change.
type command interface {
	// op names the command in the log.
	op() string
	// apply makes the change on this node; its result goes back to the
	// caller that made the command.
	apply(b *Broker) (any, error)
}

// commandTypes makes an empty command of each op, for decoding.
var commandTypes = map[string]func() command{}

func registerCommand(f func() command) { commandTypes[f().op()] = f }

// envelope is a command as the log carries it: the proposing node and
// its sequence number, so that node can match its own applies.
type envelope struct {
	Node string          `json:"n,omitempty"`
	Seq  uint64          `json:"s,omitempty"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"a"`
}

// replication is a broker's part in a cluster's catalog: nil on a
// single node.
type replication struct {
	r       Replicator
	node    string
	timeout time.Duration
	seq     atomic.Uint64
	mu      sync.Mutex
	waiting map[uint64]*applyResult
	// single: the catalog was a single node's when the broker joined
	// (seed.go); static after SetReplicator.
	single bool
}

type applyResult struct {
	done bool
	val  any
	err  error
}

// ErrNotApplied is a command a cluster did not apply in time (no quorum,
// no leader): it may still be applied later.
var ErrNotApplied = errors.New("queues: the cluster did not apply the change")

// SetReplicator makes the broker a node of a cluster named node whose
// catalog changes go through r. Call it before the broker serves
// anything; commands then wait at most timeout (0: 30 s) to be applied.
func (b *Broker) SetReplicator(r Replicator, node string, timeout time.Duration) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	rp := &replication{r: r, node: node, timeout: timeout, waiting: map[uint64]*applyResult{}}
	var err error
	if rp.single, err = b.singleNodeCatalog(); err != nil {
		b.log.Error("cluster: is the catalog a single node's?", "err", err)
	}
	b.repl = rp
}

// exec makes the change c: on a single node it is applied here and now;
// in a cluster once the catalog's log has it, on every node.
func (b *Broker) exec(c command) (any, error) {
	rp := b.repl
	if rp == nil {
		return c.apply(b)
	}
	args, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("queues: encode %s: %w", c.op(), err)
	}
	seq := rp.seq.Add(1)
	data, err := json.Marshal(envelope{Node: rp.node, Seq: seq, Op: c.op(), Args: args})
	if err != nil {
		return nil, err
	}
	res := &applyResult{}
	rp.mu.Lock()
	rp.waiting[seq] = res
	rp.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), rp.timeout)
	err = rp.r.Replicate(ctx, data)
	cancel()
	rp.mu.Lock()
	delete(rp.waiting, seq)
	done := res.done
	rp.mu.Unlock()
	switch {
	case done:
		return res.val, res.err
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w", ErrNotApplied, c.op(), err)
	default:
		return nil, fmt.Errorf("%w: %s: committed but not applied here", ErrNotApplied, c.op())
	}
}

// ApplyCommand applies one command of the catalog's log. The replicator
// calls it on every node in log order, never concurrently. It returns an
// error only for an entry it cannot read: the outcome of a command that
// reads well (refused or not) is its proposer's business.
func (b *Broker) ApplyCommand(data []byte) error {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return fmt.Errorf("queues: catalog command: %w", err)
	}
	mk, ok := commandTypes[env.Op]
	if !ok {
		return fmt.Errorf("queues: catalog command %q: unknown", env.Op)
	}
	c := mk()
	dec := json.NewDecoder(bytes.NewReader(env.Args))
	dec.UseNumber() // policy definitions keep their integers (policy.Compile)
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("queues: catalog command %q: %w", env.Op, err)
	}
	val, err := c.apply(b)
	if rp := b.repl; rp != nil && env.Node == rp.node {
		rp.mu.Lock()
		if res, ok := rp.waiting[env.Seq]; ok {
			*res = applyResult{done: true, val: val, err: err}
		}
		rp.mu.Unlock()
	}
	if err != nil {
		b.log.Debug("catalog command refused", "op", env.Op, "err", err)
	}
	return nil
}

// execErr is exec for commands whose only result is an error.
func (b *Broker) execErr(c command) error {
	_, err := b.exec(c)
	return err
}

// BootstrapCluster gives a cluster's empty catalog the default identity
// (Options.Bootstrap): every node may call it once the cluster has a
// leader; the first command applied creates the vhost, the user and its
// permissions, the others find a vhost and change nothing.
//
// A node holding a single node's catalog proposes that catalog instead
// (seed.go), and then, as at each later start, makes its own streams
// replicated ones.
func (b *Broker) BootstrapCluster() error {
	if pending, err := b.seedPending(); err != nil {
		return err
	} else if pending {
		return b.seedCluster()
	}
	id := b.opts.Bootstrap.withDefaults()
	if id.Password == "" {
		return fmt.Errorf("queues: default user %q needs a password", id.User)
	}
	if err := b.execErr(&cmdBootstrap{
		VHost: id.VHost,
		User:  User{Name: id.User, PasswordHash: HashPassword(id.Password), Tags: id.Tags},
		Perms: *id.Permissions,
	}); err != nil {
		return err
	}
	var seeder string
	if err := b.cat.get(seedKey, &seeder); err == nil && seeder == b.repl.node {
		if err := b.adoptStreams(); err != nil {
			b.log.Error("cluster: adopting this node's streams", "err", err)
		}
	}
	return nil
}

// cmdBootstrap is BootstrapCluster's command.
type cmdBootstrap struct {
	VHost string      `json:"vhost"`
	User  User        `json:"user"`
	Perms Permissions `json:"permissions"`
}

func (*cmdBootstrap) op() string { return "bootstrap" }

func (c *cmdBootstrap) apply(b *Broker) (any, error) {
	empty := true
	if err := b.cat.scan([]byte("v/"), func(_, _ []byte) error { empty = false; return nil }); err != nil {
		return nil, err
	}
	if !empty {
		return nil, nil
	}
	if err := b.cat.put(vhostKey(c.VHost), VHost{Name: c.VHost}); err != nil {
		return nil, err
	}
	if err := b.cat.put(userKey(c.User.Name), c.User); err != nil {
		return nil, err
	}
	return nil, b.setPermissions(c.User.Name, c.VHost, c.Perms)
}

func init() { registerCommand(func() command { return &cmdBootstrap{} }) }

// catalogAppliedKey holds the index of the last catalog log entry this
// node applied (a cluster's raft group 0), big-endian.
var catalogAppliedKey = []byte("n/catalog-applied")

// CatalogApplied returns the index SetCatalogApplied last stored (0:
// none): a restarted node resumes applying the catalog's log after it.
func (b *Broker) CatalogApplied() (uint64, error) {
	v, closer, err := b.cat.db.Get(catalogAppliedKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("queues: catalog applied index: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("queues: catalog applied index: %d bytes", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// SetCatalogApplied stores, durably, that the catalog's log is applied up
// to index. Every write the applies made before it is durable with it
// (pebble's log is one ordered file).
func (b *Broker) SetCatalogApplied(index uint64) error {
	if err := b.cat.db.Set(catalogAppliedKey, binary.BigEndian.AppendUint64(nil, index), pebble.Sync); err != nil {
		return fmt.Errorf("queues: catalog applied index: %w", err)
	}
	return nil
}
