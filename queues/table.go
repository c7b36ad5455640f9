package queues

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"sync"
	"time"

	"github.com/warren-mq/warren/internal/amqptab"
)

// Arguments (of queues, exchanges, bindings and consumers) are AMQP field
// tables: map[string]any with the Go types of the table codec,
// internal/amqptab (bool, int8 … int64, uint8 … uint32, float32,
// float64, amqptab.Decimal, string, []byte, []any, map[string]any,
// time.Time, nil). The catalog keeps them with their types, since
// equivalence checks compare types as RabbitMQ does.

// decimalGobName is the name under which gob writes an amqptab.Decimal
// into the catalog. It is the name gob.Register gave the type while it
// was amqp/wire.Decimal, registered by the AMQP front end; catalogs
// written then carry it. It is on disk: do not change it.
const decimalGobName = "github.com/warren-mq/warren/amqp/wire.Decimal"

var registerOnce sync.Once

func registerArgTypes() {
	registerOnce.Do(func() {
		gob.Register([]any(nil))
		gob.Register(map[string]any(nil))
		gob.Register(time.Time{})
		gob.RegisterName(decimalGobName, amqptab.Decimal{})
	})
}

type argsRecord struct{ Args map[string]any }

// encodeArgs encodes an argument table for the catalog.
func encodeArgs(args map[string]any) ([]byte, error) {
	registerArgTypes()
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(argsRecord{normalizeArgs(args)}); err != nil {
		return nil, fmt.Errorf("queues: encode arguments: %w", err)
	}
	return buf.Bytes(), nil
}

// decodeArgs decodes what encodeArgs wrote.
func decodeArgs(b []byte) (map[string]any, error) {
	registerArgTypes()
	var r argsRecord
	if len(b) == 0 {
		return nil, nil
	}
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&r); err != nil {
		return nil, fmt.Errorf("queues: decode arguments: %w", err)
	}
	return r.Args, nil
}

// normalizeArgs converts named table types (type Table map[string]any) to
// plain maps, recursively, so that gob needs no front-end registration for
// them.
func normalizeArgs(args map[string]any) map[string]any {
	if args == nil {
		return nil
	}
	out := make(map[string]any, len(args))
	for k, v := range args {
		out[k] = normalizeValue(v)
	}
	return out
}

func normalizeValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return normalizeArgs(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	}
	if m, ok := asMap(v); ok {
		return normalizeArgs(m)
	}
	return v
}
