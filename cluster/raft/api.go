package raft

import (
	"errors"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Errors of the raft host.
var (
	// ErrProposalDropped is a proposal that was not applied and will not
	// be: raft refused it (no leader known, a leadership transfer), or
	// another entry was committed at its index. The caller may retry.
	ErrProposalDropped = errors.New("raft: proposal dropped")
	// ErrProposalUnknown is a proposal whose outcome this node cannot
	// tell: it forwarded the proposal to a leader that lost leadership
	// before the entry reached this node's log, or the entry's log
	// position was replaced by a snapshot from the leader. It may yet be
	// applied; a caller that retries must tolerate a duplicate.
	ErrProposalUnknown = errors.New("raft: proposal outcome unknown")
	// ErrGroupNotFound is a group not started on this host.
	ErrGroupNotFound = errors.New("raft: group not found")
	// ErrGroupExists is StartGroup of a group already running.
	ErrGroupExists = errors.New("raft: group already started")
	// ErrGroupStopped is a call pending on a group when it stopped or
	// failed.
	ErrGroupStopped = errors.New("raft: group stopped")
	// ErrClosed is a call on a closed host.
	ErrClosed = errors.New("raft: host closed")
	// ErrCorruption is storage or log content this package did not write.
	ErrCorruption = errors.New("raft: corruption")
	// ErrCorruptMessage is an envelope that does not decode.
	ErrCorruptMessage = errors.New("raft: corrupt message")
	// ErrMessageTooLarge is a message longer than MaxMessageSize.
	ErrMessageTooLarge = errors.New("raft: message too large")
	// ErrNotSnapshotted is a compaction past the last snapshot.
	ErrNotSnapshotted = errors.New("raft: compaction past the last snapshot")
)

// Entry is a committed entry given to a StateMachine: its log position
// and the payload given to Propose. Data is shared with the raft log
// and must not be modified.
type Entry struct {
	Index uint64
	Term  uint64
	Data  []byte
}

// StateMachine is what a group replicates. The host calls it from its
// driver goroutine only, one call at a time, so its methods hold up
// every group of the host and must not call the Host (that would wait
// for the driver they run on).
type StateMachine interface {
	// Apply applies committed entries, in log order, each exactly once
	// in the life of the state machine as long as Applied reports what
	// was applied. Entries without payload (a new leader's empty entry)
	// and configuration changes are handled by the host and not passed.
	// An error stops the group on this host: the state machine is then
	// in an unknown state.
	Apply(entries []Entry) error
	// Snapshot returns the state machine's whole state as of the last
	// entry applied.
	Snapshot() ([]byte, error)
	// Restore replaces the state with one Snapshot returned, on this or
	// another node.
	Restore(data []byte) error
	// Applied returns the index of the last entry whose effect the
	// state machine has durably recorded (0 if none): after a restart
	// the host resumes applying after it.
	Applied() uint64
}

// Transport carries messages to other hosts. Send must not block on the
// network: it queues or drops. Messages may be lost, delayed or
// reordered; raft recovers.
type Transport interface {
	// Send sends msgs, all for node to. It is called on the driver
	// goroutine and must encode msgs (AppendEnvelopes) before it
	// returns: they share entries with the raft log, which the driver
	// goes on changing (etcd raft: marshal messages in the raft loop).
	Send(to uint64, msgs []Envelope)
}

// Config configures a Host. Zero fields take the defaults.
type Config struct {
	// NodeID is this host's node id, non-zero and the same in every group.
	NodeID uint64
	// Dir is the pebble directory holding every group's raft log.
	Dir string
	// Transport sends messages to other nodes.
	Transport Transport
	// Logger receives raft's and the host's messages (default: discard).
	Logger *slog.Logger
	// FS is the file system pebble uses (default: the OS's); the
	// power-cut tests pass pebble's crashable in-memory one.
	FS vfs.FS

	// TickInterval is one raft tick (default 100ms).
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks (default 10).
	ElectionTicks int
	// HeartbeatTicks is the heartbeat interval in ticks (default 1).
	HeartbeatTicks int

	// SnapshotEntries is how many entries applied since the last
	// snapshot make the host take a new one and compact (default 10000).
	SnapshotEntries uint64
	// CatchUpEntries is how many entries before a snapshot the
	// compaction keeps, so a follower a little behind needs no
	// snapshot (default 1000; 0 keeps the default, use 1 for almost none).
	CatchUpEntries uint64

	// MaxSizePerMsg bounds the entries of one append message (default 1 MiB).
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds append messages in flight per follower (default 256).
	MaxInflightMsgs int
}

func (c Config) ensureDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.TickInterval == 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 10000
	}
	if c.CatchUpEntries == 0 {
		c.CatchUpEntries = 1000
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxInflightMsgs == 0 {
		c.MaxInflightMsgs = 256
	}
	return c
}
