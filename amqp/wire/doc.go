// Package wire is the AMQP 0-9-1 wire codec, as RabbitMQ 4.x speaks it:
// frames, methods and content properties, with field tables from
// internal/amqptab. It does no I/O beyond FrameReader and keeps no
// state; the connection logic is in the AMQP front end.
//
// Integers are big-endian. A shortstr is a u8 length and at most 255
// bytes; a longstr is a u32 length and bytes. The method structs and
// their codecs are generated from the 0-9-1 XML (spec/, see
// internal/gen); the rest is written by hand. spec/amqp0-9-1.extended.xml
// is rabbitmq/amqp091-go's spec/amqp0-9-1.stripped.extended.xml as of
// v1.14.0 (commit 28da80de), unmodified; spec/amqp0-9-1.access.xml adds
// the access class that RabbitMQ still implements.
//
// # Frames
//
// A client opens with the 8-byte protocol header "AMQP" 0 0 9 1. Then
// both sides exchange frames:
//
//	+---------+-------------+----------+------------------+----------+
//	| type u8 | channel u16 | size u32 | payload (size)   | end 0xCE |
//	+---------+-------------+----------+------------------+----------+
//	  type: 1 method, 2 content header, 3 content body, 8 heartbeat
//	  overhead 8 bytes; frame_max counts the whole frame
//
// A method payload is the class and method ids and the arguments in XML
// order; consecutive bit arguments share one octet, the first in the
// least significant bit:
//
//	+--------------+---------------+-----------------------------+
//	| class-id u16 | method-id u16 | arguments ...               |
//	+--------------+---------------+-----------------------------+
//	  queue.declare: 0x0032 0x000A ticket u16, queue shortstr,
//	  bits (passive 0x01 durable 0x02 exclusive 0x04 auto-delete 0x08
//	  no-wait 0x10), arguments table
//
// A content method (basic.publish, basic.return, basic.deliver,
// basic.get-ok) is followed on its channel by one content header frame
// and as many body frames as the body needs (none for an empty body),
// each payload at most frame_max-8 bytes.
//
// # Content header
//
//	+--------------+------------+---------------+-----------+----------------+
//	| class-id u16 | weight u16 | body-size u64 | flags u16 | values ...     |
//	+--------------+------------+---------------+-----------+----------------+
//	  60 (basic)     0                            one bit per property, from
//	                                              0x8000 down; values of the
//	                                              set bits in that order
//
//	0x8000 content-type shortstr    0x0100 expiration shortstr
//	0x4000 content-encoding short.  0x0080 message-id shortstr
//	0x2000 headers table            0x0040 timestamp u64 seconds
//	0x1000 delivery-mode octet      0x0020 type shortstr
//	0x0800 priority octet           0x0010 user-id shortstr
//	0x0400 correlation-id shortstr  0x0008 app-id shortstr
//	0x0200 reply-to shortstr        0x0004 cluster-id shortstr
//	bits 1-0 (continuation) are ignored, as RabbitMQ does
//
// # Field tables
//
// Tables (the Table type, and arguments, headers and connection
// properties of that type) are encoded and decoded by internal/amqptab,
// whose package doc draws their format; this package only calls it.
//
// # Errors
//
// Decoders are strict and bounded: every length is checked against the
// bytes present (or, for frames, against the limit) before anything is
// allocated, and missing or trailing bytes are errors. Decoding errors
// wrap ErrMalformed (the server answers 501 FRAME_ERROR), unknown method
// ids give an *UnknownMethodError wrapping ErrUnknownMethod, framing
// violations are a *FramingError carrying the reply code, and values
// that cannot be encoded wrap ErrFieldType.
package wire

//go:generate go run ./internal/gen
