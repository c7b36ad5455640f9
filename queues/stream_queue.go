package queues

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues/policy"
)

// Streams as AMQP 0-9-1 queues (x-queue-type=stream), as
// rabbit_stream_queue does: a stream is one entity whichever protocol
// created it. queue.declare creates or checks it (CreateStream's catalog
// entry and log), the default exchange and bindings route to it (it is a
// queue destination in the topology), queue.delete deletes it. Queues
// and streams share one name space per vhost: a name is either.
//
// Lock order: registry.opMu → Broker.mu (CreateStream and DeleteStream
// take both, so that a classic queue and a stream cannot get one name).

// streamEquivalenceArgs are the arguments compared on redeclare of a
// stream, in RabbitMQ's order (rabbit_stream_queue:capabilities
// queue_arguments).
var streamEquivalenceArgs = [...]string{
	"x-max-length-bytes", "x-queue-type", "x-max-age", "x-stream-max-segment-size-bytes",
	"x-stream-filter-size-bytes", "x-initial-cluster-size", "x-queue-leader-locator",
}

// streamArgNames maps the AMQP stream arguments to the stream protocol's
// names, in which StreamDef.Args keeps them (rabbit_stream_manager
// stream_queue_arguments does the reverse).
var streamArgNames = map[string]string{
	"x-max-length-bytes":              "max-length-bytes",
	"x-max-age":                       "max-age",
	"x-stream-max-segment-size-bytes": "stream-max-segment-size-bytes",
	"x-stream-filter-size-bytes":      "stream-filter-size-bytes",
	"x-initial-cluster-size":          "initial-cluster-size",
	"x-queue-leader-locator":          "queue-leader-locator",
}

// otherQueueTypeArgs are the arguments of the classic and quorum queue
// types that streams refuse (rabbit_amqqueue:check_arguments_key: all
// types' queue_arguments minus the stream's).
var otherQueueTypeArgs = map[string]bool{
	"x-expires": true, "x-message-ttl": true, "x-dead-letter-exchange": true,
	"x-dead-letter-routing-key": true, "x-dead-letter-strategy": true, "x-max-length": true,
	"x-max-priority": true, "x-overflow": true, "x-queue-mode": true, "x-queue-version": true,
	"x-single-active-consumer": true, "x-queue-master-locator": true,
	"x-max-in-memory-length": true, "x-max-in-memory-bytes": true,
	"x-quorum-initial-group-size": true, "x-member-placement-tag": true, "x-delivery-limit": true,
	"x-consumer-disconnected-timeout": true, "x-consumer-timeout": true,
	"x-delayed-retry-type": true, "x-delayed-retry-min": true, "x-delayed-retry-max": true,
	"x-history-max-age": true, "x-history-max-length-bytes": true, // Warren's queue history: a stream is all history
}

// streamTypeModule is how RabbitMQ's texts name the stream queue type.
const streamTypeModule = "rabbit_stream_queue"

// LookupStream returns the open stream vhost/name, without allocating.
func (b *Broker) LookupStream(vhost, name string) (*osiris.Stream, bool) {
	b.mu.Lock()
	s, ok := b.mu.streams[streamName{vhost, name}]
	b.mu.Unlock()
	return s, ok
}

// LookupDestination returns the queue or the stream a routed name
// designates (both nil when it is neither), without allocating.
func (b *Broker) LookupDestination(vhost, name string) (*Queue, *osiris.Stream) {
	if q := b.queueReg().get(vhost, name); q != nil {
		return q, nil
	}
	s, _ := b.LookupStream(vhost, name)
	return nil, s
}

// StreamMessageCount is what queue.declare-ok reports for a stream: the
// records it holds.
func StreamMessageCount(s *osiris.Stream) int {
	st := s.Stats()
	if st.NextOffset <= st.FirstOffset {
		return 0
	}
	return int(min(st.NextOffset-st.FirstOffset, 1<<31-1))
}

// errStreamQueue is the text RabbitMQ uses for operations streams do not
// support (queue.purge, basic.get): 540.
func errStreamQueue(what, vhost, name string) *Error {
	return Errorf(CodeNotImplemented, "%s not supported by stream queues %s", what, rs("queue", name, vhost))
}

// ErrStreamPurge is queue.purge of a stream.
func ErrStreamPurge(vhost, name string) error { return errStreamQueue("queue.purge", vhost, name) }

// ErrStreamGet is basic.get from a stream.
func ErrStreamGet(vhost, name string) error { return errStreamQueue("basic.get", vhost, name) }

// declareStreamLocked is queue.declare of a stream: of an existing one
// (equivalence), or of a new one (x-queue-type=stream). handled is false
// when the declare is not a stream's: no stream has the name and the
// arguments do not ask for one, or a classic queue has the name.
// REQUIRES: reg.opMu held.
func (b *Broker) declareStreamLocked(o DeclareOptions, def QueueDef) (handled bool, messages int, err error) {
	if s, ok := b.LookupStream(def.VHost, def.Name); ok && def.Name != "" {
		return true, StreamMessageCount(s), b.checkStreamEquivalence(o, def)
	}
	if _, ok := b.StreamPlacement(def.VHost, def.Name); ok && def.Name != "" {
		// A stream with no copy on this node: its count is on its members.
		return true, 0, b.checkStreamEquivalence(o, def)
	}
	if queueTypeOf(def.Args) != QueueStream {
		return false, 0, nil
	}
	if def.Name == "" {
		return true, 0, Errorf(CodePreconditionFailed, "Cannot declare a server-named queue for type %s", streamTypeModule).Because(ErrTypeProperty)
	}
	if b.queueReg().get(def.VHost, def.Name) != nil {
		return false, 0, nil // the classic queue's equivalence check answers
	}
	args, err := newStreamArgs(o, def)
	if err != nil {
		return true, 0, err
	}
	if b.repl != nil {
		// In a cluster the creation is a command, whose apply takes the
		// registry's lock: the caller's is let go across it.
		reg := b.queueReg()
		reg.opMu.Unlock()
		err := b.createStreamCluster(def.VHost, def.Name, args, false)
		reg.opMu.Lock()
		if err != nil {
			return true, 0, streamDeclareError(def, err)
		}
		return true, 0, nil
	}
	if err := b.createStreamLocked(def.VHost, def.Name, args); err != nil {
		return true, 0, streamDeclareError(def, err)
	}
	b.applyStreamPolicy(def.VHost, def.Name, args)
	return true, 0, nil
}

// newStreamArgs checks the declare of a new stream, its name and
// arguments, and returns its arguments in the stream protocol's form.
func newStreamArgs(o DeclareOptions, def QueueDef) (map[string]string, error) {
	if strings.HasPrefix(def.Name, "amq.") {
		return nil, Errorf(CodeAccessRefused, "queue name '%s' contains reserved prefix 'amq.*'", def.Name)
	}
	return streamDeclareArgs(o, def)
}

// streamDeclareError is a failed creation of a stream as queue.declare
// answers it: a 406 unless it is an *Error already.
func streamDeclareError(def QueueDef, err error) error {
	if AsError(err) == nil {
		err = Errorf(CodePreconditionFailed, "cannot declare %s: %v", rs("queue", def.Name, def.VHost), err)
	}
	return err
}

// checkStreamEquivalence is rabbit_amqqueue:assert_equivalence for an
// existing stream: exclusive owner (strict), durable, auto_delete, then
// the stream's arguments (an absent x-queue-type is "classic", as the
// channel's augment_declare_args makes it).
func (b *Broker) checkStreamEquivalence(o DeclareOptions, def QueueDef) error {
	if def.Exclusive {
		return errQueueLocked(def.VHost, def.Name)
	}
	res := rs("queue", def.Name, def.VHost)
	if !def.Durable {
		return Errorf(CodePreconditionFailed, "inequivalent arg 'durable' for %s: received 'false' but current is 'true'", res)
	}
	if def.AutoDelete {
		return Errorf(CodePreconditionFailed, "inequivalent arg 'auto_delete' for %s: received 'true' but current is 'false'", res)
	}
	var sd StreamDef
	if err := b.cat.get(streamKey(def.VHost, def.Name), &sd); err != nil {
		return err
	}
	return streamArgsEquivalence(res, StreamQueueArgs(sd.Args), def.Args)
}

// streamArgsEquivalence compares the arguments of a redeclare (next)
// with those of the existing stream (cur), as AMQP queue arguments, in
// RabbitMQ's order, with its texts; res names the queue.
func streamArgsEquivalence(res string, cur, next map[string]any) error {
	for _, k := range streamEquivalenceArgs {
		old, hadOld := cur[k]
		nv, hasNew := next[k]
		if k == "x-queue-type" && !hasNew {
			nv, hasNew = QueueClassic, true
		}
		switch {
		case !hadOld && !hasNew:
			continue
		case hadOld && hasNew:
			if argEqual(old, nv) {
				continue
			}
			return Errorf(CodePreconditionFailed, "inequivalent arg '%s' for %s: received '%s' but current is '%s'",
				k, res, fieldBare(nv), fieldBare(old))
		}
		recv, curr := "none", "none"
		if hasNew {
			recv = fieldArgText(nv, true)
		}
		if hadOld {
			curr = fieldArgText(old, true)
		}
		return Errorf(CodePreconditionFailed, "inequivalent arg '%s' for %s: received %s but current is %s", k, res, recv, curr)
	}
	return nil
}

// StreamQueueArgs returns a stream's arguments as AMQP queue arguments,
// typed as rabbit_stream_manager stores them (long, longstr), with
// x-queue-type "stream".
func StreamQueueArgs(args map[string]string) map[string]any {
	out := map[string]any{"x-queue-type": QueueStream}
	for amqpName, name := range streamArgNames {
		v, ok := args[name]
		if !ok {
			continue
		}
		switch amqpName {
		case "x-max-age", "x-queue-leader-locator":
			out[amqpName] = v
		default:
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				out[amqpName] = n
			}
		}
	}
	return out
}

// streamDeclareArgs validates a new stream's declare as RabbitMQ does
// (rabbit_amqqueue:check_declare_arguments, then rabbit_stream_queue:
// declare) and returns its arguments in the stream protocol's form.
func streamDeclareArgs(o DeclareOptions, def QueueDef) (map[string]string, error) {
	res := rs("queue", def.Name, def.VHost)
	invalid := func(k, reason string) error {
		return Errorf(CodePreconditionFailed, "invalid arg '%s' for %s: %s", k, res, reason)
	}
	out := map[string]string{}
	// Validators in declare_args order.
	for _, k := range [...]string{
		"x-max-length-bytes", "x-max-age", "x-stream-max-segment-size-bytes",
		"x-stream-filter-size-bytes", "x-initial-cluster-size", "x-queue-leader-locator",
	} {
		v, ok := def.Args[k]
		if !ok {
			continue
		}
		switch k {
		case "x-max-age":
			s, ok := v.(string)
			if !ok {
				return nil, invalid(k, fmt.Sprintf("{unacceptable_type,%s}", fieldType(v)))
			}
			if !validMaxAge(s) {
				return nil, invalid(k, "invalid_max_age")
			}
			out[streamArgNames[k]] = s
		case "x-queue-leader-locator":
			s, ok := v.(string)
			if !ok {
				return nil, invalid(k, fmt.Sprintf("{unacceptable_type,%s}", fieldType(v)))
			}
			switch s {
			case "client-local", "balanced", "random", "least-leaders", "min-masters":
			default:
				return nil, invalid(k, "invalid_queue_locator_arg")
			}
			out[streamArgNames[k]] = s
		default:
			n, ok := argInt(v)
			switch {
			case !ok:
				return nil, invalid(k, fmt.Sprintf("%q", "expected integer, got "+fieldType(v)))
			case n < 0:
				return nil, invalid(k, fmt.Sprintf("{value_negative,%d}", n))
			case n == 0 && k == "x-initial-cluster-size":
				return nil, invalid(k, "{value_zero,0}")
			}
			out[streamArgNames[k]] = strconv.FormatInt(n, 10)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(def.Args)) {
		if otherQueueTypeArgs[k] {
			return nil, Errorf(CodePreconditionFailed, "invalid arg '%s' for %s of queue type %s", k, res, streamTypeModule)
		}
	}
	switch {
	case def.AutoDelete:
		return nil, Errorf(CodePreconditionFailed, "invalid property 'auto-delete' for %s", res).Because(ErrTypeProperty)
	case def.Exclusive:
		return nil, Errorf(CodePreconditionFailed, "invalid property 'exclusive-owner' for %s", res).Because(ErrTypeProperty)
	case !def.Durable:
		return nil, Errorf(CodePreconditionFailed, "invalid property 'non-durable' for %s", res).Because(ErrTypeProperty)
	}
	if v, ok := def.Args["x-stream-max-segment-size-bytes"]; ok {
		if n, _ := argInt(v); n > policy.MaxStreamSegmentSize {
			return nil, Errorf(CodePreconditionFailed, "Exceeded max value for x-stream-max-segment-size-bytes")
		}
	}
	if v, ok := def.Args["x-stream-filter-size-bytes"]; ok {
		if n, _ := argInt(v); n < 16 || n > 255 {
			return nil, Errorf(CodePreconditionFailed, "Invalid value for x-stream-filter-size-bytes")
		}
	}
	return out, nil
}

// validMaxAge is rabbit_amqqueue:check_max_age: digits (a positive
// number) and one unit of Y, M, D, h, m, s.
func validMaxAge(s string) bool {
	if len(s) < 2 {
		return false
	}
	for _, c := range []byte(s[:len(s)-1]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	_, err := ParseMaxAge(s)
	return err == nil
}

// streamCreateConfig checks a new stream's name and arguments and
// returns its configuration.
func streamCreateConfig(name string, args map[string]string) (osiris.Config, error) {
	if !ValidStreamName(name) {
		return osiris.Config{}, fmt.Errorf("stream name %q: %w", name, ErrInvalidArgument)
	}
	return StreamConfig(args)
}

// createStreamLocked is CreateStream's work.
// REQUIRES: reg.opMu held.
func (b *Broker) createStreamLocked(vhost, name string, args map[string]string) error {
	cfg, err := streamCreateConfig(name, args)
	if err != nil {
		return err
	}
	if b.queueReg().get(vhost, name) != nil {
		return fmt.Errorf("stream %q: a queue has the name: %w", name, ErrExists)
	}
	b.mu.Lock()
	if !b.VHostExists(vhost) {
		b.mu.Unlock()
		return fmt.Errorf("vhost %q: %w", vhost, ErrNotFound)
	}
	if _, ok := b.mu.streams[streamName{vhost, name}]; ok {
		b.mu.Unlock()
		return fmt.Errorf("stream %q: %w", name, ErrExists)
	}
	b.mu.Unlock()
	if err := b.checkQueueLimitLocked(vhost, name, 1); err != nil {
		return err
	}
	b.mu.Lock()
	id, err := b.cat.nextStreamID()
	if err != nil {
		b.mu.Unlock()
		return err
	}
	s, err := osiris.Create(b.streamDir(id), cfg, b.opts.StreamOptions)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	if err := b.cat.put(streamKey(vhost, name), StreamDef{VHost: vhost, Name: name, ID: id, Args: args}); err != nil {
		b.mu.Unlock()
		s.Delete()
		return err
	}
	b.mu.streams[streamName{vhost, name}] = s
	b.mu.Unlock()
	b.topoQueueAdded(vhost, name, true)
	b.churn.QueuesCreated.Add(1)
	return nil
}

// deleteStreamLocked removes a stream from the catalog, the open set and
// the topology, and returns it for the caller to delete its files and
// tell the watchers (outside the locks).
// REQUIRES: reg.opMu held.
func (b *Broker) deleteStreamLocked(vhost, name string) (*osiris.Stream, []func(string, string), error) {
	b.mu.Lock()
	s, ok := b.mu.streams[streamName{vhost, name}]
	if !ok {
		b.mu.Unlock()
		return nil, nil, fmt.Errorf("stream %q in vhost %q: %w", name, vhost, ErrNotFound)
	}
	if err := b.cat.delete(streamKey(vhost, name)); err != nil {
		b.mu.Unlock()
		return nil, nil, err
	}
	delete(b.mu.streams, streamName{vhost, name})
	b.churn.QueuesDeleted.Add(1)
	watchers := make([]func(string, string), 0, len(b.mu.watchers))
	for _, w := range b.mu.watchers {
		watchers = append(watchers, w)
	}
	b.mu.Unlock()
	b.topoQueueRemoved(vhost, name)
	return s, watchers, nil
}

// deleteStreamQueue is queue.delete of a name that is no classic queue:
// the stream's deletion, or nothing. if-unused and if-empty do not apply
// to streams (rabbit_stream_queue:delete ignores them). It reports 0
// messages.
func (b *Broker) deleteStreamQueue(vhost, name string) (int, error) {
	err := b.DeleteStream(vhost, name)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	return 0, err
}

// topoStreamsAdded makes the recovered streams queue destinations. Open
// calls it after openTopology and before openQueues (whose end,
// topoQueuesRecovered, drops bindings to destinations not recovered).
func (b *Broker) topoStreamsAdded() {
	b.mu.Lock()
	names := slices.Collect(maps.Keys(b.mu.streams))
	for k := range b.mu.placed {
		if _, open := b.mu.streams[k]; !open {
			names = append(names, k) // another node's: routed to, bound to
		}
	}
	b.mu.Unlock()
	for _, n := range names {
		b.topoQueueAdded(n.vhost, n.name, true)
	}
}
