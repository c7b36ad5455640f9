// Package wire holds the RabbitMQ stream protocol's wire constants and
// the encoding helpers that the server (streamproto) and the lean
// benchmark client (bench/leanstream) share: command keys, response
// codes, offset types, the command versions Warren's server reads, and
// appenders for the protocol's types and frames. It imports nothing from
// the repository and keeps no state.
//
// # Frames
//
// Integers are big-endian. A frame is a length and a body:
//
//	+----------+---------+-------------+----------------------------+
//	| size u32 | key u16 | version u16 | fields ...                 |
//	+----------+---------+-------------+----------------------------+
//	  size counts the bytes after itself
//
// Requests carry a correlation id as their first field; responses set the
// top bit of the key (ResponseBit), echo the correlation id and carry a
// response code:
//
//	+----------+----------------+-----+---------+-----------+--------+
//	| size u32 | key|0x8000 u16 | 1   | corr u32| code u16  | ...    |
//	+----------+----------------+-----+---------+-----------+--------+
//
// Types: string = i16 length + UTF-8 (-1 null); bytes = i32 length + data
// (-1 null); array = i32 count + elements; map = i32 count + (string,
// string) pairs.
//
// Each Key's comment gives its fields. Encoders append to a slice
// (BeginFrame reserves the size, EndFrame fills it in); decoding stays
// with each side, whose readers differ in what they report.
package wire
