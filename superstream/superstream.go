package superstream

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/warren-mq/warren/internal/amqptab"
	"github.com/warren-mq/warren/queues"
)

// MaxPartitions bounds a super stream's partitions, as RabbitMQ's
// max_super_stream_partitions does.
const MaxPartitions = 1000

// Arguments of the exchange and of its partition bindings, as RabbitMQ
// names them.
const (
	ArgSuperStream    = "x-super-stream"           // on the exchange: true
	ArgPartitionOrder = "x-stream-partition-order" // on a binding: the partition's index
)

// Manager creates, deletes and queries super streams of one Broker, with
// the permission checks of RabbitMQ's stream plugin. Create and Delete are
// serialised; queries take no lock of their own. A broker needs one
// Manager; its methods are safe for concurrent use.
type Manager struct {
	b  *queues.Broker
	mu sync.Mutex // serialises Create and Delete
}

// NewManager returns the Manager of b.
func NewManager(b *queues.Broker) *Manager { return &Manager{b: b} }

// Create makes super stream name in vhost for user: the exchange, a stream
// per partition with args (stream-protocol argument names, as
// CreateStream takes them) and the bindings, partition i bound with
// bindingKeys[i] and x-stream-partition-order i. Partitions must be
// unique valid stream names, as many as the binding keys, between 1 and
// MaxPartitions (else queues.ErrInvalidArgument); neither the exchange
// nor any partition may exist (queues.ErrExists). The user needs configure
// permission on the name and every partition, read on the name and write
// on the partitions (queues.ErrAccessRefused). On failure what was made
// is removed again. In a cluster the partitions' leaders are spread over
// the nodes (queues.Broker.CreateStreamBalanced).
func (m *Manager) Create(user, vhost, name string, partitions, bindingKeys []string, args map[string]string) error {
	if !m.allowed(user, vhost, queues.PermConfigure, append([]string{name}, partitions...)...) ||
		!m.allowed(user, vhost, queues.PermRead, name) || !m.allowed(user, vhost, queues.PermWrite, partitions...) {
		return fmt.Errorf("super stream %q: %w", name, queues.ErrAccessRefused)
	}
	if !queues.ValidStreamName(name) {
		return fmt.Errorf("super stream name %q: %w", name, queues.ErrInvalidArgument)
	}
	if len(partitions) == 0 || len(partitions) > MaxPartitions || len(partitions) != len(bindingKeys) {
		return fmt.Errorf("super stream %q: %d partitions, %d binding keys: %w", name, len(partitions), len(bindingKeys), queues.ErrInvalidArgument)
	}
	seen := map[string]bool{}
	for _, p := range partitions {
		if seen[p] || !queues.ValidStreamName(p) {
			return fmt.Errorf("super stream %q: partition %q: %w", name, p, queues.ErrInvalidArgument)
		}
		seen[p] = true
	}
	if _, err := queues.StreamConfig(args); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.b.Exchange(vhost, name); err == nil {
		return fmt.Errorf("super stream %q: there is already an exchange named %s: %w", name, name, queues.ErrExists)
	}
	for _, p := range partitions {
		if _, placed := m.b.PlacementOf(vhost, p); placed {
			return fmt.Errorf("super stream %q: there is already a queue named %s: %w", name, p, queues.ErrExists)
		}
		if q, s := m.b.LookupDestination(vhost, p); q != nil || s != nil {
			return fmt.Errorf("super stream %q: there is already a queue named %s: %w", name, p, queues.ErrExists)
		}
	}
	// All partitions or none, as rabbit_stream_manager checks
	// would_exceed_queue_limit before it creates any.
	if err := m.b.CheckQueueLimit(vhost, partitions[0], len(partitions)); err != nil {
		return fmt.Errorf("super stream %q: %w", name, err)
	}
	err := m.b.DeclareExchange(queues.ExchangeDef{
		VHost: vhost, Name: name, Type: queues.ExchangeDirect, Durable: true,
		Args: map[string]any{ArgSuperStream: true},
	})
	if err != nil {
		return fmt.Errorf("super stream %q: %w", name, err)
	}
	var created []string
	undo := func() {
		_ = m.b.DeleteExchange(vhost, name, false)
		for _, c := range created {
			_ = m.b.DeleteStream(vhost, c)
		}
	}
	for _, p := range partitions {
		// In a cluster each partition's leader goes to the node leading
		// the fewest streams, so the partitions spread their leaders
		// (and their publishers' load) over the nodes.
		if err := m.b.CreateStreamBalanced(vhost, p, args); err != nil {
			undo()
			return fmt.Errorf("super stream %q: partition %q: %w", name, p, err)
		}
		created = append(created, p)
	}
	for i, p := range partitions {
		err := m.b.Bind(queues.BindingDef{
			VHost: vhost, Source: name, DestKind: queues.DestQueue, Dest: p, Key: bindingKeys[i],
			Args: map[string]any{ArgPartitionOrder: int64(i)},
		})
		if err != nil {
			undo()
			return fmt.Errorf("super stream %q: binding partition %q: %w", name, p, err)
		}
	}
	return nil
}

// Delete removes super stream name: its exchange (with the bindings) and
// every partition stream. The user needs configure permission on the name
// and every partition. A missing exchange is queues.ErrNotFound.
func (m *Manager) Delete(user, vhost, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts, err := m.partitions(vhost, name)
	if err != nil {
		return err
	}
	if !m.allowed(user, vhost, queues.PermConfigure, append([]string{name}, parts...)...) {
		return fmt.Errorf("super stream %q: %w", name, queues.ErrAccessRefused)
	}
	var errs []error
	if err := m.b.DeleteExchange(vhost, name, false); err != nil && !isNotFound(err) {
		errs = append(errs, err)
	}
	for _, p := range parts {
		if err := m.b.DeleteStream(vhost, p); err != nil && !isNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Partitions returns the streams the exchange name is bound to, in
// partition order: bindings with x-stream-partition-order by that order,
// then the others in binding order; a stream bound twice is listed once.
// The user needs read or write permission on the name and on every
// partition. A missing exchange is queues.ErrNotFound.
func (m *Manager) Partitions(user, vhost, name string) ([]string, error) {
	parts, err := m.partitions(vhost, name)
	if err != nil {
		return nil, err
	}
	for _, r := range append([]string{name}, parts...) {
		if m.b.CheckPermission(user, vhost, queues.PermRead, r) != nil && m.b.CheckPermission(user, vhost, queues.PermWrite, r) != nil {
			return nil, fmt.Errorf("super stream %q: %w", name, queues.ErrAccessRefused)
		}
	}
	return parts, nil
}

// Route returns the partitions a message with routing key key published
// to exchange name reaches (the exchange's own routing: exact key match
// for a super stream's direct exchange), in partition order; none is not
// an error. The user needs write permission on the name and on the
// streams routed to. A missing exchange is queues.ErrNotFound.
func (m *Manager) Route(user, vhost, name, key string) ([]string, error) {
	bs, err := m.partitionBindings(vhost, name)
	if err != nil {
		return nil, err
	}
	routed, err := m.b.Route(vhost, name, []string{key}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("super stream %q: %w", name, queues.ErrNotFound)
	}
	var out []string
	for _, bd := range bs { // partition order
		if slices.Contains(routed, bd.Dest) && !slices.Contains(out, bd.Dest) {
			out = append(out, bd.Dest)
		}
	}
	for _, q := range routed { // streams reached otherwise (exchange-to-exchange bindings)
		if _, ok := m.b.LookupStream(vhost, q); ok && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	if !m.allowed(user, vhost, queues.PermWrite, append([]string{name}, out...)...) {
		return nil, fmt.Errorf("super stream %q: %w", name, queues.ErrAccessRefused)
	}
	return out, nil
}

// PartitionIndex is the single-active-consumer partition index of stream
// as a partition of superStream: the x-stream-partition-order of its
// binding when it has one, else the integer after the last '-' in the
// stream's name, else -1.
func (m *Manager) PartitionIndex(vhost, superStream, stream string) int {
	if bs, err := m.partitionBindings(vhost, superStream); err == nil {
		for _, bd := range bs {
			if bd.Dest != stream {
				continue
			}
			if n, ok := partitionOrder(bd); ok {
				return int(n)
			}
			break
		}
	}
	if i := strings.LastIndexByte(stream, '-'); i >= 0 {
		if n, err := strconv.Atoi(stream[i+1:]); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}

// partitions lists the partitions of name without permission checks.
func (m *Manager) partitions(vhost, name string) ([]string, error) {
	bs, err := m.partitionBindings(vhost, name)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(bs))
	for _, bd := range bs {
		if !slices.Contains(out, bd.Dest) {
			out = append(out, bd.Dest)
		}
	}
	return out, nil
}

// partitionBindings returns the bindings from exchange name to streams,
// in partition order (RabbitMQ's rabbit_stream_utils:sort_partitions:
// ordered bindings first by their order, the rest after them).
func (m *Manager) partitionBindings(vhost, name string) ([]queues.BindingDef, error) {
	if _, err := m.b.Exchange(vhost, name); err != nil {
		return nil, fmt.Errorf("super stream %q in vhost %q: %w", name, vhost, queues.ErrNotFound)
	}
	bs := slices.DeleteFunc(m.b.BindingsFrom(vhost, name), func(bd queues.BindingDef) bool {
		if bd.DestKind != queues.DestQueue {
			return true
		}
		_, ok := m.b.LookupStream(vhost, bd.Dest)
		return !ok
	})
	slices.SortStableFunc(bs, func(a, b queues.BindingDef) int {
		oa, okA := partitionOrder(a)
		ob, okB := partitionOrder(b)
		switch {
		case okA && okB:
			return cmp.Compare(oa, ob)
		case okA:
			return -1
		case okB:
			return 1
		}
		return 0
	})
	return bs, nil
}

// partitionOrder is a binding's x-stream-partition-order as an integer;
// RabbitMQ coerces any integer type, and a numeric string.
func partitionOrder(bd queues.BindingDef) (int64, bool) {
	v := bd.Args[ArgPartitionOrder]
	if s, ok := v.(string); ok {
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	return amqptab.DecodedInt(v)
}

// allowed reports whether user has permission kind on every resource.
func (m *Manager) allowed(user, vhost string, kind queues.Perm, resources ...string) bool {
	for _, r := range resources {
		if m.b.CheckPermission(user, vhost, kind, r) != nil {
			return false
		}
	}
	return true
}

// isNotFound reports a missing exchange or stream, in either of the model's
// error forms (the sentinel, or a 404 *queues.Error).
func isNotFound(err error) bool {
	if errors.Is(err, queues.ErrNotFound) {
		return true
	}
	var qe *queues.Error
	return errors.As(err, &qe) && qe.Code == queues.CodeNotFound
}
