// Package segment is Warren's log on disk: the chunk codec, segment files,
// their chunk indexes, per-chunk Bloom filters and crash recovery.
//
// A stream (package osiris) is a directory of segments. Each segment is a
// pair of files named after the id of its first chunk, zero-padded to 20
// digits:
//
//	00000000000000000000.segment   chunks, back to back
//	00000000000000000000.index     one 29-byte record per chunk
//
// # Segment file (format version 1)
//
//	+--------+--------+---------+---------+-----+
//	| "WRNS" | ver u32| chunk 0 | chunk 1 | ... |
//	+--------+--------+---------+---------+-----+
//	  0-3      4-7      8-
//
// # Chunk
//
// A chunk is the unit of write and of delivery. Its layout is the Osiris
// chunk layout that the RabbitMQ stream protocol's Deliver frame carries,
// so a chunk is delivered as its 48-byte header followed by its entry data,
// straight from the file. All integers are big-endian.
//
//	 0      1      2      4          8               16              24
//	+------+------+------+----------+---------------+---------------+
//	|mag/v | type |nEntr | nRecords | timestamp ms  | epoch         |
//	|0x50  | u8   | u16  | u32      | i64           | u64           |
//	+------+------+------+----------+---------------+---------------+
//	24              32         36         40         44    45
//	+---------------+----------+----------+----------+-----+---------+
//	| chunk id u64  | data crc | data len | trailer  |bloom| check   |
//	| (first offset)| u32      | u32      | len u32  | u8  | 24 bits |
//	+---------------+----------+----------+----------+-----+---------+
//	48
//	+-------------------+-------------------+--------------------+
//	| bloom (bloom len) | entries (data len)| trailer (trl len)  |
//	+-------------------+-------------------+--------------------+
//
// The first byte holds magic 5 in its high nibble and version 0 in its low
// nibble. Type is 0 for user data, 1 for a tracking delta and 2 for a
// tracking snapshot. nEntries counts top-level entries (a sub-batch is one),
// nRecords counts messages and is the number of offsets the chunk uses.
// The data CRC is CRC-32 (IEEE) over the entry bytes only, as Osiris and the
// stream clients compute it.
//
// Osiris leaves bytes 45-47 reserved (zero). Warren stores there the low 24
// bits of an xxhash64 over header bytes 0-44, the Bloom bytes and the
// trailer, so that recovery also detects damage outside the entry data,
// which the data CRC does not cover. The protocol layer zeroes these bytes
// before it sends a header to a client (see Header.AppendWire).
//
// # Entries
//
// Simple entry (one record):
//
//	+-----------------------+-----------------+
//	| 0 | size (31 bits)    | record bytes    |
//	+-----------------------+-----------------+
//
// Sub-batch entry (many records, optionally compressed, stored exactly as
// the publisher sent it):
//
//	+----------+-----------+--------------+-----------+------------+
//	| 1ccc0000 | count u16 | uncompr. u32 | len u32   | data (len) |
//	+----------+-----------+--------------+-----------+------------+
//
// ccc is the compression: 0 none, 1 gzip, 2 snappy (framed), 3 lz4 (frame),
// 4 zstd. After decompression the data is count records, each a u32 size
// followed by that many bytes.
//
// # Index file (format version 1)
//
//	+--------+--------+----------+----------+-----+
//	| "WRNI" | ver u32| record 0 | record 1 | ... |
//	+--------+--------+----------+----------+-----+
//
//	record (29 bytes):
//	+--------------+--------------+-----------+-------------+---------+
//	| chunk id u64 | timestamp i64| epoch u64 | file pos u32| type u8 |
//	+--------------+--------------+-----------+-------------+---------+
//
// A record is appended after its chunk has been written to the segment
// file. The segment file is the source of truth: an index that is missing,
// short, zero-filled or that disagrees with its segment is repaired from
// the segment on open.
//
// # Recovery
//
// Open validates only the tail: the last index record must point at a
// chunk whose header, check and data CRC are valid and which ends inside
// the file; invalid records are dropped from the end. Chunks after the last
// valid indexed chunk are then validated one by one and indexed; the file
// is truncated at the first invalid one. Nothing before the damage is lost
// and the cost does not depend on the number of chunks before the tail.
package segment
