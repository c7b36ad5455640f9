// Package osiris is a stream: one directory of segments (package segment)
// with a single writer goroutine, any number of readers, offset tracking and
// publisher deduplication stored in the log itself, and retention.
//
// # Directory
//
//	stream.json                     the stream's Config
//	00000000000000000000.segment    segments, named by their first chunk id
//	00000000000000000000.index
//	00000000000000123456.segment
//	...
//
// # Writing
//
// Appenders hand Batches to Submit (or Append, which waits). The writer
// goroutine takes every batch queued since its last write, forms chunks
// (at most Options.MaxChunkBytes of entry data each), writes them with one
// write per file, syncs if the fsync policy asks, publishes the new
// committed tail to readers and then calls each batch's Done. While one
// write and sync is in flight the next batches accumulate: group commit.
//
// # Segment format versions
//
// Each segment file carries its format version, which says how its chunks'
// Bloom filters are read (see package segment). Segments of an older
// version are read and filtered as written but take no appends: on a
// stream's first write after an upgrade the writer rolls to a new segment
// (an empty active segment takes the current version in place when the
// stream opens), so the older segments stay as they were until retention
// deletes them.
//
// # Idle streams
//
// An idle stream costs no goroutine and no open file. The writer
// goroutine starts with the first write (a stream opens idle) and exits
// after Options.IdleTimeout with nothing queued, having let go of the
// active segment, whose files then close like a sealed segment's: when the
// last reader holding them moves on. Readers that have read everything
// let go of the active segment while they wait (see Reader.Park). The
// writer keeps in memory the tail, the next offset and the tracking, so it
// resumes by reopening the active segment's two files (segment.Open checks
// the last chunk, which must end where the writer left it); tracking is not
// replayed again. Requests on an idle stream (Flush, TruncateBefore, SetRetention,
// EnforceRetention) run on the caller's goroutine without starting the
// writer; the retention timer is a time.AfterFunc, which costs no goroutine
// between ticks and takes the writer only when something is due.
//
// # Tracking
//
// Consumer offsets (reference -> offset) and publisher sequences (producer
// reference -> last publishing id) live in the log, in the Osiris formats:
// in the trailer of the user chunk written with them, in a tracking-delta
// chunk when there is no user data, and in a tracking-snapshot chunk that
// starts every segment rolled to while there is tracking, so retention
// never loses them. As in Osiris, a stream without tracking gets no
// snapshots: its offsets are its messages'. On open the writer replays
// the last segment, which starts with a snapshot or began with no
// tracking (and the one before it, when a crash left the last empty).
//
// Trailer and delta records:
//
//	+---------+-----------+-----+-----------+
//	| type u8 | id len u8 | id  | value u64 |   type 0 sequence, 1 offset
//	+---------+-----------+-----+-----------+
//
// Snapshot records: offsets as above; sequences carry the chunk id too:
//
//	+-----+-----------+-----+--------------+---------+
//	| 0   | id len u8 | id  | chunk id u64 | seq u64 |
//	+-----+-----------+-----+--------------+---------+
//
// The stream's state (StoreState, State; Warren's own, not Osiris's) is
// one opaque blob, in a delta chunk of its own and, when there is one,
// last in every snapshot; the id is empty (ignored when read). A stream
// that never stored a state has no such record, so the formats above are
// unchanged for it:
//
//	+-----+-----------+-----+------------+------+
//	| 3   | id len u8 | id  | length u32 | blob |
//	+-----+-----------+-----+------------+------+
//
// StoreState's blob is written with the writer's next cycle (the newest
// of those queued before it), after the cycle's user chunks; its done is
// called as a batch's Done would be (synced under FsyncAlways; on a
// replicated leader, once committed). The newest state is in the last
// segment (a snapshot carries it), so truncation and retention keep it
// and a replica, which applies it from the chunks it appends, has it
// when it is promoted. A queue (package queues/classic) keeps its ack
// state there when its log is replicated.
//
// # Reading
//
// A Reader starts at an OffsetSpec (first, last, next, an offset, a
// timestamp) and returns committed chunks in order, blocking at the end
// until the writer publishes more. It hands out the file and position of
// each chunk so the protocol layer can send the data with sendfile.
//
// # Replication
//
// A stream opened with Options.Replication is a member of a replicated
// stream, as in RabbitMQ's Osiris: one leader writes, replicas pull its
// chunks and append them verbatim, and readers everywhere read only
// what a majority holds. Everything is transport-independent: the leader
// serves each replica with ServeReplica and a replica follows with
// Follow, over a connection the caller provides (see replnet.go for the
// exchange and replproto.go for the frames); AppendChunks, SetCommit,
// Acknowledge, EpochHistory, TruncateTail and ResetTo are the same steps
// for another transport. A stream opened without Replication is a
// single node and takes none of these paths: it commits what it writes.
//
// Commit offset. The leader's commit offset is the last chunk held by
// Replication.Members/2+1 members, itself included (it counts its own
// chunks once written, and synced under FsyncAlways; replicas say what
// they hold with Ack frames). A replica's is the leader's (sent with
// every Chunks frame, and alone when only it moved) as far as the
// replica holds it. Readers never pass the commit offset: the writer
// publishes to readers (the published tail) only the commit points
// (ends of its writes) that the commit offset covers, and a segment it
// rolled away from stays unsealed until the commit passes it, so the
// reader code is unchanged. Batch.Done is called once the commit covers
// the batch's chunks; Close fails the batches still waiting. After Open
// nothing is committed until the commit offset reaches the end of the
// log the member opened with (the commit is not persisted); to know the
// extents of its older segments without sealing them, Open of a
// replicated stream opens each segment once. Stats, FirstSegmentBase
// and CommittedChunkID describe the committed log; Stats.LastChunkID
// the written one.
//
// Epochs. The leader stamps its epoch (Replication.Epoch, persisted in
// the Config; a new leader's is greater, and Open refuses one below the
// log's last chunk's) on every chunk. As Raft does with terms, a leader
// moves the commit offset by counting replicas only to chunks of its own
// epoch, so a leader of a log that ends in an older epoch writes an
// empty tracking delta chunk when it opens (it takes one offset), whose
// commit commits the older tail: an older epoch's chunk that a majority
// came to hold only under a later leader could otherwise be committed
// and then replaced. A log's epoch history, the first
// chunk id of each epoch, comes from the index records, which carry the
// epoch (EpochHistory, a binary search per segment and epoch change). A
// replica joining a leader sends its history and log end; the leader
// finds the last offset both logs share (FollowPoint: the newest epoch
// both hold, up to where the shorter run of it ends) and the replica
// truncates to there (TruncateTail), replaying its tracking from what is
// left. When they share nothing, or the leader's retention has deleted
// what the replica would need next, the replica empties its log and
// starts again at the leader's first offset (ResetTo), as Osiris does;
// the leader's first segment starts with a tracking snapshot, so the
// replica's tracking is whole again.
//
// Replica segments. A replica writes nothing of its own, so its chunks,
// offsets and epochs are the leader's, byte for byte. It rolls at its own
// size limits, but only in front of a tracking snapshot chunk (the first
// chunk of each of the leader's segments while there is tracking) or
// while there is no tracking, so that each of its segments, like each of
// the leader's, starts with a snapshot or began with no tracking:
// retention never loses tracking and Open replays only the last segment.
// Its segments are therefore at least the leader's size when there is
// tracking, and need not line up with the leader's. Its tracking follows
// the chunks it appends (trailers, deltas, snapshots), so a replica
// reopened as leader deduplicates and answers offset queries as the old
// leader did.
//
// A replica appends on its writer goroutine, which goes idle after
// Options.IdleTimeout without appends as a leader's does.
//
// Catching up. The leader ships from its segment files whatever the
// replica lacks, however far back, up to 256 KiB of whole chunks a frame,
// then each write as it happens. A replica whose next chunk the leader's
// retention deleted while it was being served loses the connection and
// is reset at its next Hello. Retention on a member deletes only
// committed segments.
//
// # Retention
//
// Whole segments are deleted, oldest first, never the active one: by total
// size (MaxLengthBytes) and by age of their newest chunk (MaxAge). Retention
// runs when a segment rolls and on a timer (Options.RetentionInterval).
package osiris
