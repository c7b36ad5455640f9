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
// # Reading
//
// A Reader starts at an OffsetSpec (first, last, next, an offset, a
// timestamp) and returns committed chunks in order, blocking at the end
// until the writer publishes more. It hands out the file and position of
// each chunk so the protocol layer can send the data with sendfile.
//
// # Retention
//
// Whole segments are deleted, oldest first, never the active one: by total
// size (MaxLengthBytes) and by age of their newest chunk (MaxAge). Retention
// runs when a segment rolls and on a timer (Options.RetentionInterval).
package osiris
