package queues

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxSuperStreamPartitions bounds a super stream's partitions, as
// RabbitMQ's max_super_stream_partitions does.
const MaxSuperStreamPartitions = 1000

// SuperStreamDef is a super stream: in RabbitMQ terms a direct exchange
// with the x-super-stream argument, bound to each partition stream with
// its binding key and x-stream-partition-order. Until exchanges exist in
// the catalog (the AMQP front end brings them), it is its own catalog
// entity; the AMQP exchange model must take these over.
type SuperStreamDef struct {
	VHost       string            `json:"vhost"`
	Name        string            `json:"name"`
	Partitions  []string          `json:"partitions"`   // in partition order
	BindingKeys []string          `json:"binding_keys"` // BindingKeys[i] routes to Partitions[i]
	Args        map[string]string `json:"args,omitempty"`
}

func superStreamKey(v, s string) []byte { return []byte("x/" + v + "\x00" + s) }

// CreateSuperStream creates the partition streams with args and the super
// stream routing to them. Partitions must be unique, as many as the
// binding keys, between 1 and MaxSuperStreamPartitions, and must not exist
// yet (ErrExists). On failure the partitions created are deleted again.
func (b *Broker) CreateSuperStream(vhost, name string, partitions, bindingKeys []string, args map[string]string) error {
	if !ValidStreamName(name) {
		return fmt.Errorf("super stream name %q: %w", name, ErrInvalidArgument)
	}
	if len(partitions) == 0 || len(partitions) > MaxSuperStreamPartitions || len(partitions) != len(bindingKeys) {
		return fmt.Errorf("super stream %q: %d partitions, %d binding keys: %w", name, len(partitions), len(bindingKeys), ErrInvalidArgument)
	}
	seen := map[string]bool{}
	for _, p := range partitions {
		if seen[p] || !ValidStreamName(p) {
			return fmt.Errorf("super stream %q: partition %q: %w", name, p, ErrInvalidArgument)
		}
		seen[p] = true
	}
	if _, err := StreamConfig(args); err != nil {
		return err
	}
	b.ssMu.Lock()
	defer b.ssMu.Unlock()
	if ok, err := b.cat.has(superStreamKey(vhost, name)); err != nil || ok {
		if ok {
			return fmt.Errorf("super stream %q: %w", name, ErrExists)
		}
		return err
	}
	for _, p := range partitions {
		if _, err := b.Stream(vhost, p); err == nil {
			return fmt.Errorf("super stream %q: partition %q: %w", name, p, ErrExists)
		}
	}
	var created []string
	for _, p := range partitions {
		if err := b.CreateStream(vhost, p, args); err != nil {
			for _, c := range created {
				b.DeleteStream(vhost, c)
			}
			return fmt.Errorf("super stream %q: partition %q: %w", name, p, err)
		}
		created = append(created, p)
	}
	def := SuperStreamDef{VHost: vhost, Name: name, Partitions: partitions, BindingKeys: bindingKeys, Args: args}
	if err := b.cat.put(superStreamKey(vhost, name), def); err != nil {
		for _, c := range created {
			b.DeleteStream(vhost, c)
		}
		return err
	}
	return nil
}

// SuperStream returns a super stream's definition, or ErrNotFound.
func (b *Broker) SuperStream(vhost, name string) (SuperStreamDef, error) {
	var def SuperStreamDef
	if err := b.cat.get(superStreamKey(vhost, name), &def); err != nil {
		return def, fmt.Errorf("super stream %q in vhost %q: %w", name, vhost, err)
	}
	return def, nil
}

// DeleteSuperStream deletes a super stream and every partition it has.
func (b *Broker) DeleteSuperStream(vhost, name string) error {
	b.ssMu.Lock()
	defer b.ssMu.Unlock()
	def, err := b.SuperStream(vhost, name)
	if err != nil {
		return err
	}
	if err := b.cat.delete(superStreamKey(vhost, name)); err != nil {
		return err
	}
	var errs []error
	for _, p := range def.Partitions {
		if err := b.DeleteStream(vhost, p); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Route returns the partitions whose binding key equals key exactly (a
// direct exchange), in partition order.
func (def *SuperStreamDef) Route(key string) []string {
	var out []string
	for i, k := range def.BindingKeys {
		if k == key {
			out = append(out, def.Partitions[i])
		}
	}
	return out
}

// PartitionIndex is the single-active-consumer partition index of stream
// as a partition of super stream superStream: its partition order, or,
// when the super stream does not list it, the integer after the last '-'
// in its name. It is -1 when neither applies.
func (b *Broker) PartitionIndex(vhost, superStream, stream string) int {
	if def, err := b.SuperStream(vhost, superStream); err == nil {
		for i, p := range def.Partitions {
			if p == stream {
				return i
			}
		}
	}
	if i := strings.LastIndexByte(stream, '-'); i >= 0 {
		if n, err := strconv.Atoi(stream[i+1:]); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}
