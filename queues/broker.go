package queues

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/alarm"
	"github.com/warren-mq/warren/queues/classic"
)

// Default identity created in a new data directory, as RabbitMQ does.
const (
	DefaultVHost    = "/"
	DefaultUser     = "guest"
	DefaultPassword = "guest"
)

// Options configure a Broker.
type Options struct {
	Logger *slog.Logger
	// StreamOptions are passed to every stream opened (clock, retention
	// interval, chunk size).
	StreamOptions osiris.Options
	// LoopbackUsers may only connect from loopback; nil means {"guest"},
	// as in RabbitMQ's default loopback_users (an empty, non-nil slice:
	// nobody is restricted).
	LoopbackUsers []string
	// Bootstrap is the identity a new data directory gets (RabbitMQ's
	// default_user, default_pass, default_vhost, default_user_tags and
	// default_permissions); zero fields take RabbitMQ's defaults.
	Bootstrap Bootstrap
	// ChannelMaxPerNode bounds the channels open on the node, as
	// RabbitMQ's channel_max_per_node: OpenChannel beyond it is refused
	// with a *LimitError of Scope "node"; zero means no limit.
	ChannelMaxPerNode int
	// QueueSegmentSize is the segment size of new classic and quorum
	// queue logs (the unit in which settled messages and a queue's
	// history go); 0 means 8 MiB.
	QueueSegmentSize int64
	// BodyReclaimInterval is how often the body logs of fan-out by
	// reference are checkpointed and reclaimed (bodies.go); 0 is a
	// second, negative never (tests call ReclaimBodies).
	BodyReclaimInterval time.Duration
	// Clustered says the catalog is a cluster's (SetReplicator follows
	// Open): Open does not create the default identity in an empty
	// catalog; BootstrapCluster proposes it once the cluster runs.
	Clustered bool
	// NodeName is this node's name in the cluster (Clustered): the
	// streams it is a member of open as their leader or a replica.
	NodeName string
}

// Bootstrap is the identity created in an empty catalog.
type Bootstrap struct {
	User, Password, VHost string
	// Tags default to administrator; Permissions to ".*" for all three.
	Tags        []string
	Permissions *Permissions
}

func (o Bootstrap) withDefaults() Bootstrap {
	if o.User == "" {
		o.User = DefaultUser
	}
	if o.Password == "" && o.User == DefaultUser {
		o.Password = DefaultPassword
	}
	if o.VHost == "" {
		o.VHost = DefaultVHost
	}
	if o.Tags == nil {
		o.Tags = []string{"administrator"}
	}
	if o.Permissions == nil {
		o.Permissions = &Permissions{Configure: ".*", Write: ".*", Read: ".*"}
	}
	return o
}

// Broker is the model both front ends share. Its methods are safe for
// concurrent use.
type Broker struct {
	dataDir      string
	log          *slog.Logger
	opts         Options
	cat          *catalog
	loopback     map[string]bool
	topo         topoState // exchanges and bindings (topology_state.go)
	queues       *queueRegistry
	persist      *classic.Persister         // writes the ack state of durable queues
	qenv         *classic.Env               // what the queues see of the broker (queue_host.go)
	pol          policyState                // policies (policy.go)
	conns        connRegistry               // open client connections (conns.go)
	topicAuth    topicAuth                  // topic permissions compiled (topic_auth.go)
	churn        Churn                      // connection, channel and queue churn (metrics.go)
	streamErrs   StreamErrors               // stream protocol error responses (metrics.go)
	deadLettered classic.DeadLetterCounters // dead-lettered messages (metrics.go)
	alarms       alarm.Set                  // resource alarms in effect (Alarms)
	replies      ReplyRegistry              // direct reply-to requesters (reply_to.go)
	bodies       bodyLogs                   // the vhosts' body logs (bodies.go)
	repl         *replication               // the cluster's catalog log; nil on a single node (replicate.go)
	cstreams     clusterStreams             // a cluster's streams (streams_cluster.go)

	mu struct {
		sync.Mutex
		streams  map[streamName]*osiris.Stream // open streams
		placed   map[streamName]StreamDef      // in a cluster: every stream's placement (streams_cluster.go)
		watchers map[int]func(vhost, name string)
		nextW    int
	}
}

type streamName struct{ vhost, name string }

// Alarms returns the broker's resource alarms: the front ends block
// publishers while one is in effect, the API and the metrics show them.
// A monitor (alarm.Start) sets them; without one none is ever raised.
func (b *Broker) Alarms() *alarm.Set { return &b.alarms }

// Open opens (creating if need be) the broker state in dataDir: the catalog
// in dataDir/catalog and streams under dataDir/streams. A new data
// directory gets vhost "/" and user guest/guest with all permissions.
func Open(dataDir string, opts Options) (*Broker, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StreamOptions.Logger == nil {
		opts.StreamOptions.Logger = opts.Logger
	}
	if opts.LoopbackUsers == nil {
		opts.LoopbackUsers = []string{DefaultUser}
	}
	if err := os.MkdirAll(filepath.Join(dataDir, "streams"), 0o755); err != nil {
		return nil, fmt.Errorf("queues: %w", err)
	}
	cat, err := openCatalog(filepath.Join(dataDir, "catalog"), opts.Logger)
	if err != nil {
		return nil, err
	}
	b := &Broker{dataDir: dataDir, log: opts.Logger, opts: opts, cat: cat, loopback: map[string]bool{}}
	for _, u := range opts.LoopbackUsers {
		b.loopback[u] = true
	}
	b.mu.streams = map[streamName]*osiris.Stream{}
	b.mu.placed = map[streamName]StreamDef{}
	b.queues = newQueueRegistry()
	if opts.QueueSegmentSize > 0 {
		b.queues.segmentSize = opts.QueueSegmentSize
	}
	b.mu.watchers = map[int]func(string, string){}
	if err := b.bootstrap(); err != nil {
		cat.close()
		return nil, err
	}
	if err := b.reloadTopicAuth(); err != nil {
		cat.close()
		return nil, err
	}
	b.persist = classic.NewPersister(cat.db, opts.Logger)
	b.qenv = &classic.Env{Broker: queueHost{b}, Persister: b.persist, Logger: opts.Logger, Now: opts.StreamOptions.Now, DeadLettered: &b.deadLettered}
	if err := b.openStreams(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.upgradeSuperStreams(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.openTopology(); err != nil {
		b.Close()
		return nil, err
	}
	b.topoStreamsAdded()
	if err := b.openPolicies(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.watchStreamPolicies(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.openBodies(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.openQueues(); err != nil {
		b.Close()
		return nil, err
	}
	b.journalRebuilt()
	return b, nil
}

// bootstrap creates the default vhost and user in an empty catalog.
func (b *Broker) bootstrap() error {
	if b.opts.Clustered {
		return nil // BootstrapCluster
	}
	empty := true
	if err := b.cat.scan([]byte("v/"), func(_, _ []byte) error { empty = false; return nil }); err != nil {
		return err
	}
	if !empty {
		return nil
	}
	id := b.opts.Bootstrap.withDefaults()
	if id.Password == "" {
		// RabbitMQ would make the user with the password "guest": a
		// trap. Refuse instead.
		return fmt.Errorf("queues: default user %q needs a password", id.User)
	}
	if err := b.AddVHost(id.VHost); err != nil {
		return err
	}
	if err := b.AddUser(id.User, id.Password, id.Tags...); err != nil {
		return err
	}
	return b.SetPermissions(id.User, id.VHost, *id.Permissions)
}

// openStreams opens every stream in the catalog.
func (b *Broker) openStreams() error {
	return b.cat.scan([]byte("s/"), func(_, value []byte) error {
		var def StreamDef
		if err := unmarshal(value, &def); err != nil {
			return err
		}
		opts, member := b.streamOptions(def)
		if !member {
			b.mu.placed[streamName{def.VHost, def.Name}] = def
			return nil // another node's
		}
		s, err := osiris.Open(b.streamDir(def.ID), opts)
		if err != nil {
			return fmt.Errorf("queues: open stream %q in vhost %q: %w", def.Name, def.VHost, err)
		}
		b.mu.streams[streamName{def.VHost, def.Name}] = s
		if len(def.Members) > 0 {
			b.mu.placed[streamName{def.VHost, def.Name}] = def
		}
		return nil
	})
}

func (b *Broker) streamDir(id uint64) string {
	return filepath.Join(b.dataDir, "streams", strconv.FormatUint(id, 10))
}

// Close closes every stream and the catalog.
func (b *Broker) Close() error {
	b.mu.Lock()
	streams := b.mu.streams
	b.mu.streams = map[streamName]*osiris.Stream{}
	b.mu.Unlock()
	errs := []error{b.closeQueues()}
	errs = append(errs, b.closeBodies())
	b.persist.Close() // after the queues' final writes
	for _, s := range streams {
		errs = append(errs, s.Close())
	}
	errs = append(errs, b.cat.close())
	return errors.Join(errs...)
}

// AddVHost creates a virtual host.
func (b *Broker) AddVHost(name string) error { return b.execErr(&cmdAddVHost{Name: name}) }

func (c *cmdAddVHost) apply(b *Broker) (any, error) {
	name := c.Name
	if ok, err := b.cat.has(vhostKey(name)); err != nil || ok {
		if ok {
			return nil, fmt.Errorf("vhost %q: %w", name, ErrExists)
		}
		return nil, err
	}
	return nil, b.cat.put(vhostKey(name), VHost{Name: name})
}

// DeleteVHost deletes a virtual host, its permissions, queues, streams
// and policies, and closes its connections (320 CONNECTION_FORCED "vhost
// '<name>' is deleted", as RabbitMQ).
func (b *Broker) DeleteVHost(name string) error { return b.execErr(&cmdDeleteVHost{Name: name}) }

func (c *cmdDeleteVHost) apply(b *Broker) (any, error) { return nil, b.deleteVHost(c.Name) }

func (b *Broker) deleteVHost(name string) error {
	if ok, err := b.cat.has(vhostKey(name)); err != nil || !ok {
		if !ok {
			return fmt.Errorf("vhost %q: %w", name, ErrNotFound)
		}
		return err
	}
	// As RabbitMQ: the permissions go first, so that no connection opens
	// in the vhost while it is deleted, then its connections are closed.
	if err := b.cat.deletePrefix(permKey(name, "")); err != nil {
		return err
	}
	if err := b.topicAuthChanged(b.cat.deletePrefix(topicPermKey(name, "", "")[:len("tp/")+len(name)+1])); err != nil {
		return err
	}
	closeConns := func() {
		b.CloseConns(func(ci ConnInfo) bool { return ci.VHost == name }, fmt.Sprintf("vhost '%s' is deleted", name))
	}
	closeConns()
	var names []string
	if err := b.cat.scan(streamKey(name, ""), func(_, v []byte) error {
		var def StreamDef
		if err := unmarshal(v, &def); err != nil {
			return err
		}
		names = append(names, def.Name)
		return nil
	}); err != nil {
		return err
	}
	for _, n := range names {
		// The apply, not DeleteStream: in a cluster this runs as a
		// command's apply, which never proposes another.
		if _, err := (&cmdDeleteStream{VHost: name, Name: n}).apply(b); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	if err := b.deleteVHostQueues(name); err != nil {
		return err
	}
	if err := b.deleteVHostBodies(name); err != nil {
		return err
	}
	if err := b.deleteVHostPolicies(name); err != nil {
		return err
	}
	if err := b.cat.delete(vhostKey(name)); err != nil {
		return err
	}
	b.topoVHostDeleted(name)
	closeConns() // one that passed its vhost check before the permissions went
	return nil
}

// VHostExists reports whether the virtual host exists.
func (b *Broker) VHostExists(name string) bool {
	ok, _ := b.cat.has(vhostKey(name))
	return ok
}

// AddUser creates a user (or replaces its password and tags).
func (b *Broker) AddUser(name, password string, tags ...string) error {
	// The salted hash is made here, once: every node stores the same.
	return b.execErr(&cmdAddUser{User{Name: name, PasswordHash: HashPassword(password), Tags: tags}})
}

func (c *cmdAddUser) apply(b *Broker) (any, error) {
	return nil, b.cat.put(userKey(c.User.Name), c.User)
}

// DeleteUser deletes a user and its permissions, and closes its
// connections (320 CONNECTION_FORCED "user '<name>' is deleted", as
// RabbitMQ).
func (b *Broker) DeleteUser(name string) error { return b.execErr(&cmdDeleteUser{Name: name}) }

func (c *cmdDeleteUser) apply(b *Broker) (any, error) { return nil, b.deleteUser(c.Name) }

func (b *Broker) deleteUser(name string) error {
	if ok, err := b.cat.has(userKey(name)); err != nil || !ok {
		if !ok {
			return fmt.Errorf("user %q: %w", name, ErrNotFound)
		}
		return err
	}
	var keys [][]byte
	b.cat.scan([]byte("p/"), func(k, _ []byte) error {
		if _, u := splitPair(string(k[2:])); u == name {
			keys = append(keys, append([]byte(nil), k...))
		}
		return nil
	})
	b.cat.scan([]byte("tp/"), func(k, _ []byte) error {
		if _, rest := splitPair(string(k[3:])); strings.HasPrefix(rest, name+"\x00") {
			keys = append(keys, append([]byte(nil), k...))
		}
		return nil
	})
	for _, k := range keys {
		if err := b.cat.delete(k); err != nil {
			return b.topicAuthChanged(err)
		}
	}
	if err := b.topicAuthChanged(nil); err != nil {
		return err
	}
	if err := b.cat.delete(userKey(name)); err != nil {
		return err
	}
	b.CloseConns(func(ci ConnInfo) bool { return ci.User == name }, fmt.Sprintf("user '%s' is deleted", name))
	return nil
}

// SetPermissions gives user the permissions p in vhost.
func (b *Broker) SetPermissions(user, vhost string, p Permissions) error {
	return b.execErr(&cmdSetPermissions{User: user, VHost: vhost, Permissions: p})
}

func (c *cmdSetPermissions) apply(b *Broker) (any, error) {
	return nil, b.setPermissions(c.User, c.VHost, c.Permissions)
}

func (b *Broker) setPermissions(user, vhost string, p Permissions) error {
	if ok, _ := b.cat.has(userKey(user)); !ok {
		return fmt.Errorf("user %q: %w", user, ErrNotFound)
	}
	if ok, _ := b.cat.has(vhostKey(vhost)); !ok {
		return fmt.Errorf("vhost %q: %w", vhost, ErrNotFound)
	}
	return b.cat.put(permKey(vhost, user), p)
}

// ClearPermissions removes user's permissions in vhost.
func (b *Broker) ClearPermissions(user, vhost string) error {
	return b.execErr(&cmdClearPermissions{User: user, VHost: vhost})
}

func (c *cmdClearPermissions) apply(b *Broker) (any, error) {
	return nil, b.cat.delete(permKey(c.VHost, c.User))
}

// Authenticate checks a user's password; users in LoopbackUsers are
// refused unless remote is a loopback address.
func (b *Broker) Authenticate(user, password string, remote net.Addr) (*User, error) {
	return b.authenticate(user, &password, remote)
}

// AuthenticateExternal accepts user without a password, for SASL
// EXTERNAL: the caller has verified a client certificate that names it.
// As with Authenticate, an unknown user is ErrAuthFailed and
// LoopbackUsers apply.
func (b *Broker) AuthenticateExternal(user string, remote net.Addr) (*User, error) {
	return b.authenticate(user, nil, remote)
}

// authenticate checks user's password unless password is nil.
func (b *Broker) authenticate(user string, password *string, remote net.Addr) (*User, error) {
	var u User
	if err := b.cat.get(userKey(user), &u); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, ErrAuthFailed
		}
		return nil, err
	}
	if password != nil && !checkHash(u.PasswordHash, u.HashingAlgorithm, *password) {
		return nil, ErrAuthFailed
	}
	if b.loopback[user] && !isLoopback(remote) {
		return nil, ErrLoopbackOnly
	}
	return &u, nil
}

// CheckVHostAccess checks that user may use vhost (has permissions there).
func (b *Broker) CheckVHostAccess(user, vhost string) error {
	if !b.VHostExists(vhost) {
		return fmt.Errorf("vhost %q: %w", vhost, ErrNotFound)
	}
	if ok, _ := b.cat.has(permKey(vhost, user)); !ok {
		return fmt.Errorf("user %q, vhost %q: %w", user, vhost, ErrAccessRefused)
	}
	return nil
}

// CheckPermission checks that user has permission kind on resource in vhost.
func (b *Broker) CheckPermission(user, vhost string, kind Perm, resource string) error {
	var p Permissions
	if err := b.cat.get(permKey(vhost, user), &p); err != nil {
		return fmt.Errorf("user %q, vhost %q: %w", user, vhost, ErrAccessRefused)
	}
	re := [...]string{p.Configure, p.Write, p.Read}[kind]
	if !permMatch(re, resource) {
		return fmt.Errorf("%s access to %q in vhost %q refused for user %q: %w", kind, resource, vhost, user, ErrAccessRefused)
	}
	return nil
}

// ValidStreamName reports whether name may be used for a stream: not
// empty, not "amq."-prefixed, at most 255 bytes.
func ValidStreamName(name string) bool {
	return name != "" && len(name) <= 255 && !strings.HasPrefix(name, "amq.")
}

// CreateStream creates a stream with RabbitMQ stream arguments
// (max-length-bytes, max-age, stream-max-segment-size-bytes,
// stream-filter-size-bytes; others are ignored). It returns ErrExists if
// the stream exists with equivalent arguments, and an ErrInvalidArgument
// error (a 406 *Error) for bad arguments, for a stream that exists with
// other arguments and for a queue of that name, as RabbitMQ's
// rabbit_stream_manager answers validation_failed when the existing
// queue is not equivalent. The stream is a queue destination of the
// topology (stream_queue.go).
func (b *Broker) CreateStream(vhost, name string, args map[string]string) error {
	if b.repl != nil {
		return b.createStreamCluster(vhost, name, args, false)
	}
	reg := b.queueReg()
	reg.opMu.Lock()
	err := b.createStreamLocked(vhost, name, args)
	if errors.Is(err, ErrExists) {
		err = b.existingStreamLocked(vhost, name, args, err)
	}
	reg.opMu.Unlock()
	if err == nil {
		b.applyStreamPolicy(vhost, name, args)
	}
	return err
}

// CreateStreamBalanced is CreateStream with, in a cluster, the leader on
// the node that leads the fewest streams (ties: this node, then by name)
// whatever the stream's leader locator: super stream partitions, created
// one after the other, spread their leaders over the nodes this way. On a
// single node it is CreateStream.
func (b *Broker) CreateStreamBalanced(vhost, name string, args map[string]string) error {
	if b.repl != nil {
		return b.createStreamCluster(vhost, name, args, true)
	}
	return b.CreateStream(vhost, name, args)
}

// existingStreamLocked answers the creation of a stream whose name is
// taken: exists (err) when the stream's arguments are equivalent, a 406
// *Error otherwise.
// REQUIRES: the queue registry's opMu held.
func (b *Broker) existingStreamLocked(vhost, name string, args map[string]string, exists error) error {
	res := rs("queue", name, vhost)
	if q := b.queueReg().get(vhost, name); q != nil {
		return Errorf(CodePreconditionFailed, "inequivalent arg 'x-queue-type' for %s: received '%s' but current is '%s'", res, QueueStream, q.Def().Type)
	}
	var sd StreamDef
	if err := b.cat.get(streamKey(vhost, name), &sd); err != nil {
		return err
	}
	if err := streamArgsEquivalence(res, StreamQueueArgs(sd.Args), StreamQueueArgs(args)); err != nil {
		return err
	}
	return exists
}

// Stream returns the open stream, or ErrNotFound.
func (b *Broker) Stream(vhost, name string) (*osiris.Stream, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.mu.streams[streamName{vhost, name}]
	if !ok {
		return nil, fmt.Errorf("stream %q in vhost %q: %w", name, vhost, ErrNotFound)
	}
	return s, nil
}

// DeleteStream deletes a stream and its data (and its bindings), then
// tells the watchers.
func (b *Broker) DeleteStream(vhost, name string) error {
	if b.repl != nil {
		return b.execErr(&cmdDeleteStream{VHost: vhost, Name: name})
	}
	reg := b.queueReg()
	reg.opMu.Lock()
	s, watchers, err := b.deleteStreamLocked(vhost, name)
	reg.opMu.Unlock()
	if err != nil {
		return err
	}
	err = s.Delete()
	for _, w := range watchers {
		w(vhost, name)
	}
	return err
}

// WatchDeletions calls fn after each queue deletion (streams, classic
// and quorum queues, whatever deleted them) until cancel is called. fn
// must not block.
func (b *Broker) WatchDeletions(fn func(vhost, name string)) (cancel func()) {
	return b.watchDeletions(fn)
}

// queueDeleted tells the deletion watchers that a classic or quorum
// queue is gone. Called with no registry lock held.
func (b *Broker) queueDeleted(vhost, name string) {
	b.mu.Lock()
	ws := make([]func(string, string), 0, len(b.mu.watchers))
	for _, w := range b.mu.watchers {
		ws = append(ws, w)
	}
	b.mu.Unlock()
	for _, w := range ws {
		w(vhost, name)
	}
}

func (b *Broker) watchDeletions(fn func(vhost, name string)) (cancel func()) {
	b.mu.Lock()
	id := b.mu.nextW
	b.mu.nextW++
	b.mu.watchers[id] = fn
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.mu.watchers, id)
		b.mu.Unlock()
	}
}
