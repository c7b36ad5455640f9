// Package amqptab is the part of the AMQP 0-9-1 content codec that the
// broker model needs below the front end: scanning and rewriting the
// basic class's content properties, and reading and writing field tables
// (the headers property), as RabbitMQ 4.x encodes them. The AMQP front end
// has the full codec (amqp/wire); the queue code uses this package to read
// a stored message's expiration, priority and headers and to rewrite the
// headers when it dead-letters a message (x-death), without importing the
// front end.
//
// Properties are the content header's property flags (u16) followed by the
// values of the present properties in flag order:
//
//	+-----------+--------------------------------------------------+
//	| flags u16 | values of the properties whose flag bit is set   |
//	+-----------+--------------------------------------------------+
//	  0x8000 content-type shortstr    0x0100 expiration shortstr
//	  0x4000 content-encoding shortstr 0x0080 message-id shortstr
//	  0x2000 headers table            0x0040 timestamp u64
//	  0x1000 delivery-mode octet      0x0020 type shortstr
//	  0x0800 priority octet           0x0010 user-id shortstr
//	  0x0400 correlation-id shortstr  0x0008 app-id shortstr
//	  0x0200 reply-to shortstr        0x0004 cluster-id shortstr
//	  bits 1-0 (continuation and a reserved bit) are ignored
//
// A table is a u32 byte length and entries (shortstr key, tag octet,
// value); an array ('A') a u32 byte length and elements (tag, value).
// The tags are RabbitMQ's (the 0-9-1 errata): t bool, b int8, B uint8,
// s int16, u uint16, I int32, i uint32, l and L int64, f float32,
// d float64, D decimal (scale u8, value u32), S longstr, x byte array,
// A array, F table, T timestamp (u64 seconds), V void. Integers are
// big-endian.
//
// Decoded values have the Go types amqp/wire gives them, except that a
// nested table is a map[string]any: bool, int8, uint8, int16, uint16,
// int32, uint32, int64, float32, float64, Decimal, string, []byte, []any,
// map[string]any, time.Time (UTC, whole seconds) and nil. DecodedInt
// reads any of the integer ones as an int64, DecodedString a string or a
// byte array as a string.
package amqptab
