package osiris

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/warren-mq/warren/segment"
)

// FsyncPolicy says when the writer calls fsync, and so when appenders are
// told their entries are durable.
type FsyncPolicy string

// Fsync policies.
const (
	// FsyncNone confirms once a write has reached the OS (RabbitMQ streams).
	// A killed process loses nothing confirmed; a power cut may.
	FsyncNone FsyncPolicy = "none"
	// FsyncInterval confirms like FsyncNone and syncs at most every
	// Config.FsyncInterval while there is unsynced data.
	FsyncInterval FsyncPolicy = "interval"
	// FsyncAlways confirms only after the data is synced (quorum queues).
	FsyncAlways FsyncPolicy = "always"
)

// Defaults.
const (
	DefaultMaxSegmentSize   = 500_000_000
	DefaultMaxSegmentChunks = 256_000
	DefaultFilterSize       = 16
	DefaultFsyncInterval    = 200 * time.Millisecond
	DefaultMaxChunkBytes    = 1<<20 - 64 // a Deliver frame of one chunk stays within a 1 MiB frame max
	DefaultRetentionEvery   = time.Minute
	DefaultIdleTimeout      = 30 * time.Second
	// MaxSegmentSizeLimit is the largest segment size a stream accepts.
	MaxSegmentSizeLimit = 3_000_000_000
	// MaxReferenceLen bounds tracking references (consumer and producer).
	MaxReferenceLen = 255

	configFile = "stream.json"
)

// Config is a stream's persistent configuration. Zero fields take defaults.
type Config struct {
	MaxLengthBytes   int64         `json:"max_length_bytes,omitempty"`   // retention by size; 0: unlimited
	MaxAge           time.Duration `json:"max_age,omitempty"`            // retention by age; 0: unlimited
	MaxSegmentSize   int64         `json:"max_segment_size,omitempty"`   // roll size in bytes
	MaxSegmentChunks int           `json:"max_segment_chunks,omitempty"` // roll after this many chunks
	FilterSize       int           `json:"filter_size,omitempty"`        // Bloom bytes per chunk, 16..255
	Fsync            FsyncPolicy   `json:"fsync,omitempty"`              // when to sync
	FsyncInterval    time.Duration `json:"fsync_interval,omitempty"`     // for FsyncInterval
	Epoch            uint64        `json:"epoch,omitempty"`              // writer epoch stamped on chunks
}

// ErrInvalidConfig marks a Config that cannot be used.
var ErrInvalidConfig = errors.New("osiris: invalid config")

// withDefaults returns c with defaults filled in, or an error.
func (c Config) withDefaults() (Config, error) {
	if c.MaxSegmentSize == 0 {
		c.MaxSegmentSize = DefaultMaxSegmentSize
	}
	if c.MaxSegmentChunks == 0 {
		c.MaxSegmentChunks = DefaultMaxSegmentChunks
	}
	if c.FilterSize == 0 {
		c.FilterSize = DefaultFilterSize
	}
	if c.Fsync == "" {
		c.Fsync = FsyncNone
	}
	if c.FsyncInterval == 0 {
		c.FsyncInterval = DefaultFsyncInterval
	}
	if c.Epoch == 0 {
		c.Epoch = 1
	}
	switch {
	case c.MaxLengthBytes < 0 || c.MaxAge < 0:
		return c, fmt.Errorf("negative retention: %w", ErrInvalidConfig)
	case c.MaxSegmentSize < 4096 || c.MaxSegmentSize > MaxSegmentSizeLimit:
		return c, fmt.Errorf("max segment size %d: %w", c.MaxSegmentSize, ErrInvalidConfig)
	case c.MaxSegmentChunks < 1:
		return c, fmt.Errorf("max segment chunks %d: %w", c.MaxSegmentChunks, ErrInvalidConfig)
	case c.FilterSize < segment.MinBloomSize || c.FilterSize > segment.MaxBloomSize:
		return c, fmt.Errorf("filter size %d: %w", c.FilterSize, ErrInvalidConfig)
	case c.Fsync != FsyncNone && c.Fsync != FsyncInterval && c.Fsync != FsyncAlways:
		return c, fmt.Errorf("fsync policy %q: %w", c.Fsync, ErrInvalidConfig)
	}
	return c, nil
}

// Options are run-time settings of an open stream (not persisted).
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RetentionInterval is how often retention runs besides on roll; 0
	// means DefaultRetentionEvery, negative disables the timer.
	RetentionInterval time.Duration
	// MaxChunkBytes bounds a chunk's entry data (a larger single entry
	// still gets a chunk of its own). 0 means DefaultMaxChunkBytes.
	MaxChunkBytes int
	// IdleTimeout is how long the writer stays up with nothing to do
	// before it stops its goroutine and lets go of the active segment's
	// files (it goes after between one and two IdleTimeouts without work;
	// the next write starts it again, without recovery). 0 means
	// DefaultIdleTimeout; negative keeps the writer and its files up from
	// Open to Close.
	IdleTimeout time.Duration
	// Logger receives recovery and retention events; nil discards them.
	Logger *slog.Logger
	// TrustTail says the machine has not restarted since the stream was
	// last written, so its page cache still held everything written: a
	// crash of the process can only have torn the tail of the last
	// segment, and Open checks only the tail (segment.Open). Unset, the
	// safe default, Open validates every chunk of the last segment
	// (segment.Recover), which a power cut can damage anywhere after its
	// last sync.
	TrustTail bool
	// BeforeCycle, when set, is called on the writer goroutine before it
	// writes each group of batches; it may block, holding the writer.
	// Tests use it to stand in for a slow disk; nil in production.
	BeforeCycle func()
	// Replication makes the stream a member of a replicated stream (see
	// Replication); nil, the default, is a single-node stream, which
	// commits what it writes.
	Replication *Replication
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RetentionInterval == 0 {
		o.RetentionInterval = DefaultRetentionEvery
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxChunkBytes <= 0 {
		o.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// writeConfig stores c in dir atomically.
func writeConfig(dir string, c Config) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, configFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("osiris: write config: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("osiris: write config: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("osiris: write config: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("osiris: write config: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, configFile)); err != nil {
		return fmt.Errorf("osiris: write config: %w", err)
	}
	return syncDir(dir)
}

func readConfig(dir string) (Config, error) {
	var c Config
	b, err := os.ReadFile(filepath.Join(dir, configFile))
	if err != nil {
		return c, fmt.Errorf("osiris: read config: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("osiris: read config %s: %v: %w", dir, err, ErrInvalidConfig)
	}
	return c, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
