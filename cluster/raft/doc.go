// Package raft is Warren's multi-group raft host on go.etcd.io/raft/v3:
// one Host per node runs any number of raft groups (the catalog is group
// 0, each quorum queue another; see docs/design-cluster.md) from a
// single driver goroutine, over one pebble database and a Transport the
// caller provides.
//
// # The driver loop
//
// Each Host has one goroutine (Host.run) that owns every group's
// etcd raft RawNode. It wakes on its ticker, on requests (StartGroup,
// Propose, Barrier, ...: closures queued under Host.mu) and on received
// messages (Host.Receive queues them, it never blocks on the driver).
// Each iteration:
//
//  1. ticks every group (on a tick), runs the queued requests and steps
//     the received messages into their groups;
//  2. collects the Ready of every group that has one among those the
//     tick, a message or a request reached, or that had more to do
//     after the last round (a round between ticks touches only the
//     groups its messages are for);
//  3. writes all of them, entries (replacing any from the first new
//     index on), hard states and received snapshots, in ONE pebble
//     batch, synced when any Ready says MustSync or carries a snapshot;
//  4. sends every group's messages, one Transport.Send per destination
//     node; nothing is sent before step 3 is durable, which is what
//     etcd raft requires without AsyncStorageWrites (messages may depend
//     on the hard state and on entries of this and earlier Readys);
//  5. restores a received snapshot into the state machine, applies the
//     committed entries in order (normal entries with a payload to the
//     StateMachine, configuration changes to the RawNode) and ends the
//     proposals those entries settle. A group's entries after a
//     configuration change wait until its new ConfState is written: the
//     groups that changed configuration share one synced batch per pass;
//  6. calls Advance on each group and ends the barriers whose read
//     index is now applied;
//  7. takes a snapshot of a group whose state machine has applied
//     Config.SnapshotEntries entries since its last one, and compacts
//     its log up to Config.CatchUpEntries before it.
//
// A slow state machine therefore delays every group of the host; it
// should apply in memory and persist in its own batches.
//
// # Storage
//
// All groups of a host share one pebble database (Config.Dir). Every key
// of a group starts with 'R' and the group id; the format version is
// under "V/raft-format" (1):
//
//	'R' | group u64 | 'c'                  pb.ConfState: configuration after the last applied change or snapshot
//	'R' | group u64 | 'e' | index u64      pb.Entry, one per log index
//	'R' | group u64 | 'h'                  pb.HardState: term, vote, commit
//	'R' | group u64 | 's'                  pb.Snapshot: metadata and the state machine's bytes
//	'R' | group u64 | 't'                  u64 index | u64 term of the last compacted entry
//
// Integers are big-endian, so a group's entries sort by index; values
// are protobuf (raftpb). The first log index is the truncated index + 1.
// Each group keeps its last 512 entries in memory, so Term, LastIndex
// and appends to followers that keep up do not read pebble.
//
// # Entries
//
// The data of an entry Propose makes starts with a 25-byte header that
// names the proposal, so the proposer can tell when it is applied:
//
//	u8 format (1) | u64 node | u64 incarnation | u64 sequence | payload
//
// The incarnation is random per Open, so a restarted host never mistakes
// an old entry for a new proposal. Entries with empty data are the ones
// a new leader appends; the state machine does not see them.
//
// Membership changes (Host.AddMember, Host.RemoveMember; members.go) are
// raft configuration changes (pb.ConfChange, one voter at a time) whose
// Context is the same 25-byte header without payload. Applying one
// stores the group's new ConfState ('c') before any later entry is
// applied, and the host then takes a snapshot at once: etcd raft refuses
// a snapshot whose ConfState lacks the node it is sent to, so a member
// added after the last snapshot could not catch up from it.
//
// # Wire format
//
// A transport carries Envelopes; AppendEnvelope and DecodeEnvelopes
// encode a sequence of them, each
//
//	u64 group | u32 length | length bytes of a protobuf raftpb.Message
//
// and DecodeEnvelopes refuses a length over MaxMessageSize or the bytes
// left before it allocates.
//
// # Guarantees
//
//   - Propose returns nil once the entry is committed and applied on
//     this node, with its index. ErrProposalDropped means it was not
//     applied and will not be: raft refused it (no leader, a leadership
//     transfer) or another entry was committed at the index it had in
//     this node's log. ErrProposalUnknown (a proposal forwarded to a
//     leader that lost leadership before the entry reached this node's
//     log, or an index replaced by a snapshot), a context error or
//     ErrClosed leave the outcome open: the entry may still be applied.
//     A forwarded proposal lost on the way without a leader change is
//     ended by its context only.
//   - Apply sees each entry once in the life of a state machine, as long
//     as StateMachine.Applied reports what it durably applied: a restart
//     resumes after it (raft's Config.Applied), or restores the stored
//     snapshot first if the state machine is behind it.
//   - AddMember and RemoveMember return nil once the change is applied
//     on this node; a change proposed while another is pending is
//     dropped (ErrProposalDropped on the leader; on a follower the
//     outcome is open as for a forwarded proposal). A removed leader
//     steps down.
//   - Barrier returns once this node applied everything the leader had
//     committed when it was called (ReadIndex, re-asked every election
//     timeout while no leader answers).
//   - The Transport may drop, delay and reorder; Host.ReportUnreachable
//     tells every group's leader to stop streaming to a node. A MsgSnap is
//     reported finished as soon as it is handed to the Transport; a lost
//     one is sent again after the leader probes the follower.
//
// Elections use PreVote and CheckQuorum, so a node cut off does not
// disrupt the others when it returns, and a leader cut off from a
// majority steps down after an election timeout.
package raft
