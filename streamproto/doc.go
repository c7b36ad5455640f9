// Package streamproto is Warren's front end for the RabbitMQ stream
// protocol (TCP port 5552): framing, the command codec, connection and
// authentication state, publishers with confirms, and subscriptions that
// deliver chunks straight from segment files with sendfile.
//
// # Frames
//
// Package streamproto/wire draws the frame layout and holds the command
// keys (each with its fields), the response codes and the encoders;
// this package decodes frames with its own bounded reader (reader.go)
// and answers ExchangeCommandVersions with wire.ServerCommandVersions.
//
// # Deliver
//
// A Deliver frame carries one chunk: the 48-byte stored chunk header (with
// Warren's check bytes zeroed) followed by the chunk's entry data, which the
// connection's writer sends from the segment file with sendfile(2), or,
// for chunks of at most 64 KiB, reads and writes together with the queued
// frame heads in one writev (out.go: at low rates every chunk is small,
// and one system call instead of two wakes the client once):
//
//	+----------+--------+-----+-------+----------------+------------------+
//	| size u32 | 0x0008 | 1|2 | sub u8| [committed u64]| chunk header 48  |  entry data ...
//	+----------+--------+-----+-------+----------------+------------------+
//	                                    version 2 only   from memory        from the file
//
// # Concurrency
//
// Each connection has a reader goroutine (owns the socket's read side and
// all connection, publisher and subscription state) and a writer goroutine
// (coalesces queued frames and small chunks into large writes and
// interleaves sendfile calls for large chunks). One goroutine at a time
// holds the socket's write side: the writer, or a goroutine flushing a
// delivery batch with a non-blocking write, which hands the socket and
// what it could not write to the writer (out.go); only the writer ever
// waits on the socket. Each subscription has a goroutine that waits for
// credit and chunks and queues deliveries; while it waits for credit, the
// reader goroutine delivers what a Credit frame allows itself, without
// waiting for anything, so a chunk per credit costs one wake-up rather
// than three (consume.go). A single-active-consumer subscription has a
// delivery goroutine only while it is the active member of its group
// (package superstream keeps the groups and the ConsumerUpdate
// hand-over).
package streamproto
