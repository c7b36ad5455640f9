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
// # Tracking
//
// Consumer offsets (reference -> offset) and publisher sequences (producer
// reference -> last publishing id) live in the log, in the Osiris formats:
// in the trailer of the user chunk written with them, in a tracking-delta
// chunk when there is no user data, and in a tracking-snapshot chunk that
// starts every segment so retention never loses them. On open the writer
// replays the snapshot and what follows it in the last segment.
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
