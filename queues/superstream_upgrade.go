package queues

import (
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Before super streams were exchanges (package superstream), a super
// stream was its own catalog record under x/<vhost> 0x00 <name>. Open
// rewrites each such record, once, as what RabbitMQ and package
// superstream make of a super stream: a durable direct exchange with
// x-super-stream=true and one binding per partition stream with the
// partition's binding key and x-stream-partition-order. The rewrite and
// the removal of the old record are one synced batch.

// legacySuperStream is the x/ record's JSON.
type legacySuperStream struct {
	VHost       string   `json:"vhost"`
	Name        string   `json:"name"`
	Partitions  []string `json:"partitions"`   // in partition order
	BindingKeys []string `json:"binding_keys"` // BindingKeys[i] routes to Partitions[i]
}

// Arguments that make an exchange a super stream and order its
// partitions; package superstream owns their meaning.
const (
	argSuperStream    = "x-super-stream"
	argPartitionOrder = "x-stream-partition-order"
)

// upgradeSuperStreams rewrites x/ records as exchange and binding records.
// An exchange of the same name wins: the super stream's partitions stay
// as plain streams, and a warning is logged.
func (b *Broker) upgradeSuperStreams() error {
	batch := b.cat.db.NewBatch()
	defer batch.Close()
	n := 0
	err := b.cat.scan([]byte("x/"), func(k, v []byte) error {
		var ss legacySuperStream
		if err := unmarshal(v, &ss); err != nil {
			return err
		}
		if err := batch.Delete(k, nil); err != nil {
			return err
		}
		n++
		if ok, err := b.cat.has(exchangeKey(ss.VHost, ss.Name)); err != nil {
			return err
		} else if ok {
			b.log.Warn("super stream not upgraded: an exchange has its name", "vhost", ss.VHost, "super_stream", ss.Name)
			return nil
		}
		args, err := encodeArgs(map[string]any{argSuperStream: true})
		if err != nil {
			return err
		}
		x, err := json.Marshal(exchangeRecord{VHost: ss.VHost, Name: ss.Name, Type: ExchangeDirect, Durable: true, Args: args})
		if err != nil {
			return err
		}
		if err := batch.Set(exchangeKey(ss.VHost, ss.Name), x, nil); err != nil {
			return err
		}
		for i, p := range ss.Partitions {
			if i >= len(ss.BindingKeys) {
				break
			}
			def := BindingDef{VHost: ss.VHost, Source: ss.Name, DestKind: DestQueue, Dest: p, Key: ss.BindingKeys[i],
				Args: normalizeArgs(map[string]any{argPartitionOrder: int64(i)})}
			args, err := encodeArgs(def.Args)
			if err != nil {
				return err
			}
			rec, err := json.Marshal(bindingRecord{VHost: def.VHost, Source: def.Source, DestKind: def.DestKind, Dest: def.Dest, Key: def.Key, Args: args})
			if err != nil {
				return err
			}
			if err := batch.Set(bindingKey(ss.VHost, def.Ident()), rec, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || n == 0 {
		return err
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("queues: catalog: upgrade super streams: %w", err)
	}
	b.log.Info("super streams upgraded to exchanges", "count", n)
	return nil
}
