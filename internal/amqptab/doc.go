// Package amqptab is the AMQP 0-9-1 field-table codec, as RabbitMQ 4.x
// encodes tables, and the scanning and rewriting of the basic class's
// content properties that the broker model needs. It is the one table
// codec: the AMQP front end (amqp/wire, whose method arguments,
// connection properties and headers property are tables) and the queues
// (which read a stored message's expiration, priority and headers, and
// rewrite the headers when they dead-letter it) both use it, so that a
// table decodes to the same Go values wherever it is read.
//
// # Field tables
//
// A table is a u32 byte length and entries; an array ('A') is a u32 byte
// length and values without keys:
//
//	table: +------------+------------------+-------+-----------+----
//	       | length u32 | key (shortstr)   | tag u8| value     | ...
//	       +------------+------------------+-------+-----------+----
//	array: +------------+-------+-----------+-------+-----------+----
//	       | length u32 | tag u8| value     | tag u8| value     | ...
//	       +------------+-------+-----------+-------+-----------+----
//
//	t bool (u8)   b int8   B uint8   s int16   u uint16   I int32
//	i uint32      l int64  L int64 (read only)  f float32  d float64
//	D decimal (scale u8, value u32)  S longstr  x bytes (u32 length)
//	A array       F table  T timestamp (u64 seconds)  V void (no value)
//
// These are RabbitMQ's tags (the 0-9-1 errata), not the 0-9-1 grammar's:
// 's' is a signed 16-bit integer, not a shortstr. Integers are
// big-endian. AppendTable writes keys in ascending order, which is also
// how RabbitMQ 4.x delivers headers. Table lists the Go types of decoded
// values.
//
// # Properties
//
// Properties are the content header's property flags (u16) followed by
// the values of the present properties in flag order:
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
// # Errors
//
// Decoders are strict and bounded: every length is checked against the
// bytes present before anything is allocated, and missing or trailing
// bytes are errors wrapping ErrMalformed. Values that cannot be encoded
// give errors wrapping ErrFieldType.
//
// DecodedInt reads a decoded value of any integer type as an int64, DecodedString a
// string or a byte array as a string.
package amqptab
