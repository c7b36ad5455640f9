// Package frame encodes and decodes the AMQP 1.0 transport (OASIS AMQP
// 1.0 core, part 2 "Transport") and its SASL layer (part 5 "Security"):
// protocol headers, frames and performatives, for an AMQP 1.0 front end.
// Values inside performatives are the AMQP 1.0 types of package amqp10.
//
// A connection starts with protocol headers, each side sending one:
//
//	41 4d 51 50 03 01 00 00   "AMQP" 3 1 0 0: SASL frames follow
//	41 4d 51 50 00 01 00 00   "AMQP" 0 1 0 0: AMQP frames follow
//	41 4d 51 50 00 00 09 01   "AMQP" 0 0 9 1: AMQP 0-9-1, not this package's
//
// A client authenticating with SASL sends the SASL header, exchanges SASL
// frames up to sasl-outcome, then sends the AMQP header on the same
// stream. Then frames, big-endian:
//
//	+----------+------+------+---------+-----------------+------------------------+
//	| size u32 | doff | type | channel | extended header | body                   |
//	|          |  u8  |  u8  |   u16   | (doff-2)*4 bytes| performative [payload] |
//	+----------+------+------+---------+-----------------+------------------------+
//	0          4      5      6         8                 doff*4                   size
//
// size counts the whole frame, header included; doff (>= 2) is where the
// body starts in 4-byte words, the extended header (unused by AMQP 1.0)
// is skipped. type 0 is an AMQP frame, type 1 a SASL frame (channel
// ignored). A frame without a body (size 8) is an empty frame: a
// heartbeat. A frame may not be larger than the max-frame-size its
// receiver announced in open (MinMaxFrameSize, 512, before open); the
// Reader checks the size before it reads the body.
//
// A body is a performative, a described list whose fields are in the
// order below, and only for transfer a payload: the message's bytes (or
// the next part of them). Absent trailing fields may be left out, and a
// null field takes its default; the encoder leaves out what it can.
//
//	0x10 open        container-id*, hostname, max-frame-size (4294967295),
//	                 channel-max (65535), idle-time-out, outgoing-locales,
//	                 incoming-locales, offered-capabilities,
//	                 desired-capabilities, properties
//	0x11 begin       remote-channel, next-outgoing-id*, incoming-window*,
//	                 outgoing-window*, handle-max (4294967295),
//	                 offered-capabilities, desired-capabilities, properties
//	0x12 attach      name*, handle*, role* (false sender, true receiver),
//	                 snd-settle-mode (2 mixed), rcv-settle-mode (0 first),
//	                 source, target, unsettled, incomplete-unsettled,
//	                 initial-delivery-count, max-message-size,
//	                 offered-capabilities, desired-capabilities, properties
//	0x13 flow        next-incoming-id, incoming-window*, next-outgoing-id*,
//	                 outgoing-window*, handle, delivery-count, link-credit,
//	                 available, drain, echo, properties
//	0x14 transfer    handle*, delivery-id, delivery-tag, message-format,
//	                 settled, more, rcv-settle-mode, state, resume,
//	                 aborted, batchable                     + payload
//	0x15 disposition role*, first*, last (= first), settled, state, batchable
//	0x16 detach      handle*, closed, error
//	0x17 end         error
//	0x18 close       error
//
//	0x1d error       condition*, description, info
//	0x23 received    section-number*, section-offset*      delivery states
//	0x24 accepted    -                                     and outcomes
//	0x25 rejected    error
//	0x26 released    -
//	0x27 modified    delivery-failed, undeliverable-here, message-annotations
//	0x28 source      address, durable, expiry-policy (session-end), timeout,
//	                 dynamic, dynamic-node-properties, distribution-mode,
//	                 filter, default-outcome, outcomes, capabilities
//	0x29 target      address, durable, expiry-policy (session-end), timeout,
//	                 dynamic, dynamic-node-properties, capabilities
//	0x2b-0x2e        lifetime policies: delete-on-close, delete-on-no-links,
//	                 delete-on-no-messages, delete-on-no-links-or-messages
//	0x30 coordinator capabilities (a transaction coordinator target)
//
//	0x40 sasl-mechanisms  sasl-server-mechanisms*          SASL frames
//	0x41 sasl-init        mechanism*, initial-response, hostname
//	0x42 sasl-challenge   challenge*
//	0x43 sasl-response    response*
//	0x44 sasl-outcome     code* (0 ok, 1 auth, 2 sys, 3 sys-perm, 4 sys-temp),
//	                      additional-data
//
// (* mandatory; defaults in parentheses.) A descriptor may also be given
// as its symbol ("amqp:open:list"). Multiple fields (capabilities,
// locales, outcomes, mechanisms) are one symbol or an array of symbols;
// properties and info are maps with symbol keys (amqp10.Map); a filter
// set maps symbols to described values. For example an open from a
// client with container-id "c" and hostname "h":
//
//	00 53 10 c0 07 02 a1 01 63 a1 01 68
//	|  |  |  |  |  |  |  |  |  └─ str8 "h": hostname
//	|  |  |  |  |  |  └─ str8 "c": container-id
//	|  |  |  |  |  └─ 2 fields, the rest left out
//	|  |  |  |  └─ size 7
//	|  |  |  └─ list8
//	|  |  └─ code 0x10: open
//	|  └─ smallulong descriptor
//	└─ described
//
// A front end reads with a Reader over a bufio.Reader on the socket
// (ReadProtocolHeader, then ReadFrame; SetMaxFrameSize once open is
// exchanged), decodes a frame body with Decode, or on hot paths with
// PeekCode and the Decode method of a struct it reuses, and writes with
// AppendProtocolHeader, AppendFrame, AppendTransferFrame (or
// AppendTransferFrames to split a message by the peer's max-frame-size)
// and AppendEmptyFrame:
//
//	r := frame.NewReader(bufio.NewReader(conn), frame.MinMaxFrameSize)
//	f, err := r.ReadFrame()
//	p, payload, err := frame.Decode(f.Type, f.Body)
//	switch p := p.(type) {
//	case *frame.Open: ...
//	}
//	out, err = frame.AppendFrame(out, 0, &frame.Open{ContainerID: "warren", ...})
//
// Decoding is bounded as amqp10's is: scalar and binary fields
// are read in place (a transfer's delivery tag and payload alias the
// frame body, and a transfer without a state decodes without
// allocating), every count is checked against the bytes that must hold
// its items, maps go through amqp10.DecodeBudget with one budget of
// zero-width array elements per performative. A decode error wraps
// ErrDecode (amqp:decode-error), a framing error ErrFraming
// (amqp:connection:framing-error); ConditionOf says which.
package frame
