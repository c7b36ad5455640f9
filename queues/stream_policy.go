package queues

import (
	"fmt"
	"strconv"
	"time"

	"github.com/warren-mq/warren/queues/policy"
)

// Policies on streams: max-length-bytes and max-age resolve through
// policy.EffectiveQueueArg with the stream queue type's precedence (the
// policy wins, as in RabbitMQ's rabbit_stream_queue), and a policy change
// re-applies the retention of the vhost's existing streams without a
// redeclare. stream-max-segment-size-bytes from a policy is not applied:
// a stream's segment size is fixed when it is created.

// streamRetention returns the retention that applies to a stream declared
// with args (the stream protocol's string form) under the vhost's
// policies.
func (b *Broker) streamRetention(vhost, name string, args map[string]string) (int64, time.Duration, error) {
	typed := map[string]any{}
	if v, ok := args["max-length-bytes"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("max-length-bytes %q: %w", v, ErrInvalidArgument)
		}
		typed["x-max-length-bytes"] = n
	}
	if v, ok := args["max-age"]; ok {
		typed["x-max-age"] = v
	}
	pol, _ := b.EffectivePolicy(vhost, name, QueueStream)
	var maxBytes int64
	var maxAge time.Duration
	if v, ok := policy.EffectiveQueueArg(QueueStream, "max-length-bytes", typed, pol); ok {
		n, ok := v.(int64)
		if !ok || n < 0 {
			return 0, 0, fmt.Errorf("max-length-bytes %v: %w", v, ErrInvalidArgument)
		}
		maxBytes = n
	}
	if v, ok := policy.EffectiveQueueArg(QueueStream, "max-age", typed, pol); ok {
		s, ok := v.(string)
		if !ok {
			return 0, 0, fmt.Errorf("max-age %v: %w", v, ErrInvalidArgument)
		}
		d, err := ParseMaxAge(s)
		if err != nil {
			return 0, 0, err
		}
		maxAge = d
	}
	return maxBytes, maxAge, nil
}

// applyStreamPolicy sets the stream's retention to what its arguments and
// the current policies give, if that changed.
func (b *Broker) applyStreamPolicy(vhost, name string, args map[string]string) {
	s, err := b.Stream(vhost, name)
	if err != nil {
		return
	}
	maxBytes, maxAge, err := b.streamRetention(vhost, name, args)
	if err != nil {
		b.log.Error("queues: stream policy", "vhost", vhost, "stream", name, "err", err)
		return
	}
	cfg := s.Config()
	if cfg.MaxLengthBytes == maxBytes && cfg.MaxAge == maxAge {
		return
	}
	if err := s.SetRetention(maxBytes, maxAge); err != nil {
		b.log.Error("queues: stream policy", "vhost", vhost, "stream", name, "err", err)
	}
}

// applyStreamPolicies re-applies the retention of every stream of vhost.
func (b *Broker) applyStreamPolicies(vhost string) {
	var defs []StreamDef
	if err := b.cat.scan(streamKey(vhost, ""), func(_, v []byte) error {
		var def StreamDef
		if err := unmarshal(v, &def); err != nil {
			return err
		}
		defs = append(defs, def)
		return nil
	}); err != nil {
		b.log.Error("queues: stream policies", "vhost", vhost, "err", err)
		return
	}
	for _, def := range defs {
		b.applyStreamPolicy(def.VHost, def.Name, def.Args)
	}
}

// watchStreamPolicies applies the policies to the streams now and after
// every policy change. Called once by Open.
func (b *Broker) watchStreamPolicies() error {
	var vhosts []string
	if err := b.cat.scan([]byte("v/"), func(_, v []byte) error {
		var vh VHost
		if err := unmarshal(v, &vh); err != nil {
			return err
		}
		vhosts = append(vhosts, vh.Name)
		return nil
	}); err != nil {
		return err
	}
	for _, vh := range vhosts {
		b.applyStreamPolicies(vh)
	}
	b.WatchPolicies(b.applyStreamPolicies)
	return nil
}
