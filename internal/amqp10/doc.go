// Package amqp10 encodes and decodes AMQP 1.0 values and messages (OASIS
// AMQP 1.0 core, part 1 "Types" and §3.2 "Message Format"), the format in
// which streams store messages, as RabbitMQ does: stream protocol clients
// publish AMQP 1.0 encoded messages, and the AMQP 0-9-1 front end converts
// to and from it. It sits below both front ends.
//
// A value is a constructor byte and its data, big-endian:
//
//	0x40 null  0x41 true  0x42 false  0x43 uint 0  0x44 ulong 0  0x45 list0
//	0x50 ubyte u8         0x51 byte i8          0x52 smalluint u8
//	0x53 smallulong u8    0x54 smallint i8      0x55 smalllong i8
//	0x56 boolean u8(0|1)  0x60 ushort u16       0x61 short i16
//	0x70 uint u32         0x71 int i32          0x72 float  0x73 char u32
//	0x74 decimal32 [4]    0x80 ulong u64        0x81 long i64
//	0x82 double           0x83 timestamp i64 ms 0x84 decimal64 [8]
//	0x94 decimal128 [16]  0x98 uuid [16]
//	0xa0 vbin8  | u8 size | bytes |    0xb0 vbin32 | u32 size | bytes |
//	0xa1 str8   (UTF-8)                0xb1 str32
//	0xa3 sym8   (ASCII)                0xb3 sym32
//	0xc0 list8  | u8 size | u8 count | items |   0xd0 list32 (u32 size, count)
//	0xc1 map8   | u8 size | u8 count | k v k v ...| 0xd1 map32
//	0xe0 array8 | u8 size | u8 count | constructor | values |  0xf0 array32
//	0x00 described | descriptor value | value |
//
// A compound's size counts the bytes after the size field (the count
// included). Array elements share one constructor and carry only their
// data.
//
// A message is a sequence of described sections, each with a ulong
// descriptor code (or the equivalent symbol):
//
//	0x70 header                  list: durable, priority, ttl, first-acquirer, delivery-count
//	0x71 delivery-annotations    map, symbol keys
//	0x72 message-annotations     map, symbol keys (RabbitMQ: x-exchange, x-routing-key, x-basic-*)
//	0x73 properties              list: message-id, user-id, to, subject, reply-to,
//	                             correlation-id, content-type, content-encoding,
//	                             absolute-expiry-time, creation-time, group-id,
//	                             group-sequence, reply-to-group-id
//	0x74 application-properties  map, string keys, simple values
//	0x75 data                    binary (one or more)
//	0x76 amqp-sequence           list (one or more)
//	0x77 amqp-value              any (one)
//	0x78 footer                  map
//
// For example a message with one data section holding "hi":
//
//	00 53 75 a0 02 68 69
//	|  |  |  |  |  └─ "hi"
//	|  |  |  |  └─ size 2
//	|  |  |  └─ vbin8
//	|  |  └─ code 0x75: data
//	|  └─ smallulong descriptor
//	└─ described
//
// The encoder makes RabbitMQ's choices (amqp10_binary_generator.erl), so
// that a message converted from AMQP 0-9-1 here has the bytes RabbitMQ
// would store. The decoder is bounded: see decode.go.
package amqp10
