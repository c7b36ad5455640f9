package queues

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/warren-mq/warren/queues/qerr"
)

// Errors of the catalog.
var (
	// ErrNotFound is a missing entity (qerr.ErrNotFound).
	ErrNotFound = qerr.ErrNotFound
	// ErrExists is an entity that already exists.
	ErrExists = errors.New("queues: already exists")
)

// VHost is a virtual host and the metadata RabbitMQ keeps for it.
type VHost struct {
	Name             string   `json:"name"`
	Description      string   `json:"description,omitempty"`
	Tags             []string `json:"tags,omitempty"`
	DefaultQueueType string   `json:"default_queue_type,omitempty"`
	// Limits are RabbitMQ's vhost limits (max-connections, max-queues),
	// enforced as RabbitMQ does (limits.go). nil in PutVHost keeps the
	// vhost's current limits; an empty map clears them.
	Limits map[string]int64 `json:"limits,omitempty"`
}

// StreamDef is a stream in the catalog.
type StreamDef struct {
	VHost string            `json:"vhost"`
	Name  string            `json:"name"`
	ID    uint64            `json:"id"`             // directory name under streams/
	Args  map[string]string `json:"args,omitempty"` // creation arguments as given
	// In a cluster: the nodes holding the stream, the one that leads it
	// and its leader's epoch (streams_cluster.go); empty on a single node.
	Members []string `json:"members,omitempty"`
	Leader  string   `json:"leader,omitempty"`
	Epoch   uint64   `json:"epoch,omitempty"`
	// Lost counts the members forgotten (forget_cluster.go): majorities
	// are still taken of len(Members)+Lost.
	Lost int `json:"lost,omitempty"`
}

// catalog is the persistent model in pebble.
type catalog struct {
	db *pebble.DB
}

func openCatalog(dir string, log *slog.Logger) (*catalog, error) {
	return openCatalogFS(dir, log, nil)
}

// openCatalogFS is openCatalog on the file system fs (nil: the OS's);
// the power-cut tests pass pebble's crashable in-memory one.
func openCatalogFS(dir string, log *slog.Logger, fs vfs.FS) (*catalog, error) {
	opts := &pebble.Options{Logger: pebbleLogger{log}}
	if fs != nil {
		opts.FS = fs
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("queues: open catalog %s: %w", dir, err)
	}
	return &catalog{db: db}, nil
}

func (c *catalog) close() error { return c.db.Close() }

func vhostKey(v string) []byte   { return []byte("v/" + v) }
func userKey(u string) []byte    { return []byte("u/" + u) }
func permKey(v, u string) []byte { return []byte("p/" + v + "\x00" + u) }
func streamKey(v, s string) []byte {
	return []byte("s/" + v + "\x00" + s)
}

var streamIDKey = []byte("n/stream-id")

func (c *catalog) get(key []byte, v any) error {
	b, closer, err := c.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("queues: catalog get %q: %w", key, err)
	}
	defer closer.Close()
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("queues: catalog %q: %w", key, err)
	}
	return nil
}

func (c *catalog) has(key []byte) (bool, error) {
	_, closer, err := c.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	closer.Close()
	return true, nil
}

// put writes v under key durably.
func (c *catalog) put(key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := c.db.Set(key, b, pebble.Sync); err != nil {
		return fmt.Errorf("queues: catalog set %q: %w", key, err)
	}
	return nil
}

func (c *catalog) delete(key []byte) error {
	if err := c.db.Delete(key, pebble.Sync); err != nil {
		return fmt.Errorf("queues: catalog delete %q: %w", key, err)
	}
	return nil
}

// deletePrefix removes every key starting with prefix.
func (c *catalog) deletePrefix(prefix []byte) error {
	end := append([]byte(nil), prefix...)
	end[len(end)-1]++
	if err := c.db.DeleteRange(prefix, end, pebble.Sync); err != nil {
		return fmt.Errorf("queues: catalog delete %q*: %w", prefix, err)
	}
	return nil
}

// scan calls fn with the value of every key starting with prefix.
func (c *catalog) scan(prefix []byte, fn func(key, value []byte) error) error {
	end := append([]byte(nil), prefix...)
	end[len(end)-1]++
	it, err := c.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: end})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// nextStreamID hands out a new stream directory id, durably.
func (c *catalog) nextStreamID() (uint64, error) {
	var id uint64
	b, closer, err := c.db.Get(streamIDKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return 0, err
	default:
		if len(b) == 8 {
			id = binary.BigEndian.Uint64(b)
		}
		closer.Close()
	}
	id++
	if err := c.db.Set(streamIDKey, binary.BigEndian.AppendUint64(nil, id), pebble.Sync); err != nil {
		return 0, err
	}
	return id, nil
}

// pebbleLogger keeps pebble's informational chatter out of the broker log
// and passes its errors on.
type pebbleLogger struct{ log *slog.Logger }

func (pebbleLogger) Infof(string, ...any) {}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("catalog: " + fmt.Sprintf(format, args...))
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error("catalog: fatal: " + fmt.Sprintf(format, args...))
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// splitPair splits a "<a>\x00<b>" key suffix.
func splitPair(s string) (string, string) {
	a, b, _ := strings.Cut(s, "\x00")
	return a, b
}
