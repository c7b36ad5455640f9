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
// # Segment file (format version 2)
//
//	+--------+--------+---------+---------+-----+
//	| "WRNS" | ver u32| chunk 0 | chunk 1 | ... |
//	+--------+--------+---------+---------+-----+
//	  0-3      4-7      8-
//
// The version says how the chunks' Bloom filters are built (see Chunk
// filter): version 2 segments hold FilterV2 filters. Version 1 segments,
// written before Warren took its filters from bits-and-blooms, hold
// FilterV1 filters; they are read, recovered and filtered as before but
// never appended to (Append returns ErrReadOnly), so a segment's chunks
// always share one filter format. The stream writer (package osiris)
// starts a new segment before its first write when the active segment is
// of version 1, or rewrites the header of an empty one (Segment.Upgrade).
// The chunk bytes are the same in both versions.
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
// The Bloom bytes are the chunk's filter (see Chunk filter), present when
// the stream has a filter size (16 to 255 bytes, 16 by default) and at
// least one entry of the chunk has a filter value. The protocol layer
// sends a client the header and the entries, not the Bloom bytes.
//
// Osiris leaves bytes 45-47 reserved (zero). Warren stores there the low 24
// bits of an xxhash64 over header bytes 0-44, the Bloom bytes and the
// trailer, so that recovery also detects damage outside the entry data,
// which the data CRC does not cover. The protocol layer zeroes these bytes
// before it sends a header to a client (see Header.AppendWire).
//
// # Chunk filter
//
// FilterV2 (version 2 segments) is a bits-and-blooms/bloom/v3 Bloom filter
// of m = 8*size bits and k = 3 hash functions (FilterHashes). Bit i is bit
// i%8 of byte i/8, least significant bit first: the filter's 64-bit words
// in little-endian order, cut to size bytes.
//
//	byte 0                  byte 1                  ...  byte size-1
//	+--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+     +-----------+
//	|b7|b6|b5|b4|b3|b2|b1|b0|15|14|13|12|11|10|b9|b8| ... | bits m-1.. |
//	+--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+--+     +-----------+
//
// An entry with filter value V sets k bits. V is hashed twice with 128-bit
// murmur3 (x64 variant, seed 0): V itself gives h0, h1 and V followed by a
// 0x01 byte gives h2, h3 (each a u64). Bit number j (0 <= j < k) is
//
//	(h[j%2] + j*h[2+((j+j%2)%4)/2]) mod m
//
// that is h0, h1+h3 and h0+2*h3 for k = 3. An entry without a filter value
// sets the bits of the empty value (a filter value is never empty). A
// chunk may hold a wanted value when all its k bits are set; it may hold
// unfiltered entries when all the empty value's bits are. The library's
// own serialization (lengths and words) is not used: the filter is only
// its bits. A library release that hashed otherwise would change the
// format; TestBloomGolden pins it.
//
// FilterV1 (version 1 segments, read only) has 8*size bits numbered most
// significant bit first across the bytes. An entry with filter value V sets
// two bits, the low and the high 32 bits of xxhash64(V), each modulo
// 8*size-1, plus one; an entry without a filter value sets bit 0.
//
// Neither hash is Osiris's (Erlang's phash2), so filters written by
// RabbitMQ cannot be read here, nor ours by RabbitMQ.
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
// the segment on open. Index files of all segment versions are the same.
//
// # Recovery
//
// Open validates only the tail: the last index record must point at a
// chunk whose header, check and data CRC are valid and which ends inside
// the file; invalid records are dropped from the end. Chunks after the
// last valid indexed chunk are then validated one by one and indexed; the
// file is truncated at the first invalid one. Nothing before the damage
// is lost and the cost does not depend on the number of chunks before the
// tail. That is all a killed process can leave: the page cache still
// holds everything it wrote.
//
// Recover validates every chunk from the first (header, check, data CRC,
// whole inside the file, id following on from the chunk before),
// truncates the file at the first that fails and keeps the index records
// that agree with the valid chunks. A power cut can leave more than a
// torn tail of what was written after the last sync: pages written back
// out of order (a zeroed chunk in the middle behind a valid last chunk,
// with an index describing them all), an index ahead of its segment or a
// segment ahead of its index, a tail of zeros where the size reached the
// disk and the data did not. Both empty a file whose header is a prefix
// of the expected one followed by zeros (created and never synced:
// nothing in it was synced either). Segment.Synced is the extent the last
// Sync made durable; a power cut keeps at least that. A stream (package
// osiris) uses Recover for its last segment unless the machine has not
// restarted since it was written (osiris.Options.TrustTail); its other
// segments were synced whole when it rolled past them. A chunk damaged in
// the middle by anything else (a bad disk block) also ends the segment
// there under Recover.
package segment
