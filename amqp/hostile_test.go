package amqp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/warren-mq/warren/amqp/wire"
)

// Hostile input over raw sockets (issue 18): each case brings a
// connection to a stage, sends bytes no client library would, and
// checks the answer: RabbitMQ 4.x's code, text and failing method ids
// (rabbit_reader, rabbit_command_assembler, rabbit_channel), or its
// silence (a handshake failing before tune-ok closes the socket without
// a word), or its protocol header. After each case a fresh connection
// publishes and consumes. Where RabbitMQ's reader crashes and resets
// the socket (an unknown method id, a field table it cannot parse, a
// truncated connection.close) Warren closes with a code instead; those
// cases say so.

// hostileStage is how far the connection gets before the case's bytes.
type hostileStage int

const (
	stageNone    hostileStage = iota // nothing sent
	stageStarted                     // protocol header sent, connection.start read
	stageTuning                      // start-ok sent, connection.tune read
	stageOpening                     // tune-ok sent
	stageOpen                        // connection.open-ok read
	stageChannel                     // channel 1 open
)

// hostileWant is the answer expected.
type hostileWant struct {
	header bool   // the server's protocol header, then the socket closed
	silent bool   // the socket closed without a frame
	ch     uint16 // the close's channel: 0 connection.close, else channel.close
	code   uint16
	text   string
	class  uint16 // failing method ids
	method uint16
}

func silent() hostileWant { return hostileWant{silent: true} }

func connClose(code uint16, text string, ids ...uint16) hostileWant {
	w := hostileWant{code: code, text: text}
	if len(ids) == 2 {
		w.class, w.method = ids[0], ids[1]
	}
	return w
}

func chanClose(code uint16, text string, class, method uint16) hostileWant {
	return hostileWant{ch: 1, code: code, text: text, class: class, method: method}
}

// rawF builds a frame with any type, channel, payload and end octet.
func rawF(typ uint8, ch uint16, payload []byte) []byte {
	b := []byte{typ, byte(ch >> 8), byte(ch)}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(append(b, payload...), wire.FrameEnd)
}

// meth is a method frame from raw class and method ids and fields.
func meth(ch, class, method uint16, fields ...byte) []byte {
	p := binary.BigEndian.AppendUint16(nil, class)
	p = binary.BigEndian.AppendUint16(p, method)
	return rawF(wire.FrameMethod, ch, append(p, fields...))
}

func mf(ch uint16, m wire.Method) []byte { return wire.AppendMethodFrame(nil, ch, m) }

// hdrF is a content header frame: class, weight, body size, raw props.
func hdrF(ch, class, weight uint16, size uint64, props ...byte) []byte {
	p := binary.BigEndian.AppendUint16(nil, class)
	p = binary.BigEndian.AppendUint16(p, weight)
	p = binary.BigEndian.AppendUint64(p, size)
	return rawF(wire.FrameHeader, ch, append(p, props...))
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// declareWithArgs is queue.declare "q" (ticket 0, no flags) whose
// argument table is the raw bytes given (with their length prefix).
func declareWithArgs(table []byte) []byte {
	f := []byte{0, 0, 1, 'q', 0}
	return meth(1, 50, 10, append(f, table...)...)
}

// table wraps raw field bytes with a u32 length.
func table(fields ...byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(fields))), fields...)
}

func u32b(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

var publishQ = mf(1, &wire.BasicPublish{RoutingKey: "q"})

func startOk(mechanism, response string, caps bool) *wire.ConnectionStartOk {
	props := wire.Table{}
	if caps {
		props["capabilities"] = wire.Table{"authentication_failure_close": true}
	}
	return &wire.ConnectionStartOk{ClientProperties: props, Mechanism: mechanism, Response: response, Locale: "en_US"}
}

// startOkRaw is a connection.start-ok whose client properties are the
// raw table bytes given.
func startOkRaw(props []byte) []byte {
	f := append([]byte(nil), props...)
	f = append(f, 5, 'P', 'L', 'A', 'I', 'N')
	f = append(f, u32b(12)...)
	f = append(f, "\x00guest\x00guest"...)
	f = append(f, 5, 'e', 'n', '_', 'U', 'S')
	return meth(0, 10, 11, f...)
}

func hostileCases() []struct {
	name  string
	stage hostileStage
	send  []byte
	want  hostileWant
} {
	type c = struct {
		name  string
		stage hostileStage
		send  []byte
		want  hostileWant
	}
	header := hostileWant{header: true}
	const ue = wire.UnexpectedFrame
	const fe = wire.FrameError
	return []c{
		// The protocol header: anything but AMQP 0-9-1's gets ours back.
		{"HTTP request", stageNone, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), header},
		{"AMQP 0-10 header", stageNone, []byte("AMQP\x01\x01\x00\x0a"), header},
		// RabbitMQ 4.x would speak AMQP 1.0 here; Warren has no 1.0 and
		// answers as RabbitMQ without it did.
		{"AMQP 1.0 header", stageNone, []byte("AMQP\x00\x01\x00\x00"), header},
		{"AMQP 0-9-2 header", stageNone, []byte("AMQP\x00\x00\x09\x02"), header},
		{"TLS ClientHello", stageNone, []byte{0x16, 3, 1, 0, 0xa5, 1, 0, 0, 0xa1, 3, 3}, header},
		{"zero bytes", stageNone, make([]byte, 8), header},
		{"half header then EOF", stageNone, []byte("AMQ"), silent()},

		// Before tune-ok RabbitMQ drops the socket without a word (after
		// its 3 s delay; none in these tests).
		{"start-ok bad frame end", stageStarted, func() []byte { b := mf(0, startOk("PLAIN", "\x00guest\x00guest", false)); b[len(b)-1] = 0; return b }(), silent()},
		{"frame over 8192 before tune", stageStarted, rawF(wire.FrameMethod, 0, make([]byte, 8193)), silent()},
		{"frame size 0xffffffff before tune", stageStarted, []byte{1, 0, 0, 0xff, 0xff, 0xff, 0xff}, silent()},
		{"unknown frame type before tune", stageStarted, rawF(9, 0, []byte("abc")), silent()},
		{"method on channel 1 before tune", stageStarted, mf(1, &wire.ChannelOpen{}), silent()},
		{"content header before tune", stageStarted, hdrF(0, 60, 0, 1, 0, 0), silent()},
		{"heartbeat with payload before tune", stageStarted, rawF(wire.FrameHeartbeat, 0, []byte("ab")), silent()},
		{"client properties past end", stageStarted, startOkRaw(u32b(1000)), silent()},
		{"client properties bad field type", stageStarted, startOkRaw(table(1, 'x', 'Z', 0)), silent()},
		{"client properties huge array", stageStarted, startOkRaw(table(1, 'x', 'A', 0x7f, 0xff, 0xff, 0xff, 'b', 1)), silent()},
		{"tune-ok instead of start-ok", stageStarted, mf(0, &wire.ConnectionTuneOk{ChannelMax: 1, FrameMax: 131072}), silent()},
		{"unknown mechanism", stageStarted, mf(0, startOk("EXTERNAL", "", true)), silent()},
		{"PLAIN without NULs", stageStarted, mf(0, startOk("PLAIN", "guestguest", true)), silent()},
		{"AMQPLAIN malformed", stageStarted, mf(0, startOk("AMQPLAIN", "\x05LOGINZ", true)), silent()},
		{"unknown method before tune", stageStarted, meth(0, 10, 99), silent()},
		{"empty method before tune", stageStarted, rawF(wire.FrameMethod, 0, nil), silent()},
		{"start-ok cut short", stageStarted, meth(0, 10, 11, 0, 0, 0), silent()},
		{"wrong password, capability", stageStarted, mf(0, startOk("PLAIN", "\x00guest\x00wrong", true)),
			connClose(403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile.")},
		{"wrong password, no capability", stageStarted, mf(0, startOk("PLAIN", "\x00guest\x00wrong", false)), silent()},

		// Tuning: a refused negotiation is answered (rabbit_reader's
		// not_allowed in its tuning state), anything else is silent.
		{"tune-ok frame_max below minimum", stageTuning, mf(0, &wire.ConnectionTuneOk{ChannelMax: 10, FrameMax: 4096}),
			connClose(530, "NOT_ALLOWED - negotiated frame_max = 4096 is lower than the minimum allowed value (8192)", 10, 31)},
		{"tune-ok frame_max 0", stageTuning, mf(0, &wire.ConnectionTuneOk{ChannelMax: 10, FrameMax: 0}),
			connClose(530, "NOT_ALLOWED - negotiated frame_max = 0 (no limit) is higher than the maximum allowed value (131072)", 10, 31)},
		{"tune-ok frame_max above", stageTuning, mf(0, &wire.ConnectionTuneOk{ChannelMax: 10, FrameMax: 1 << 20}),
			connClose(530, "NOT_ALLOWED - negotiated frame_max = 1048576 is higher than the maximum allowed value (131072)", 10, 31)},
		{"tune-ok channel_max 0", stageTuning, mf(0, &wire.ConnectionTuneOk{ChannelMax: 0, FrameMax: 131072}),
			connClose(530, "NOT_ALLOWED - negotiated channel_max = 0 (no limit) is higher than the maximum allowed value (2047)", 10, 31)},
		{"open instead of tune-ok", stageTuning, mf(0, &wire.ConnectionOpen{VirtualHost: "/"}), silent()},

		// Opening (tuned, before connection.open): answered.
		{"channel.open before connection.open", stageOpening, mf(1, &wire.ChannelOpen{}),
			connClose(ue, "UNEXPECTED_FRAME - type 1, all octets = <<0,20,0,10,0>>")},
		{"open of a missing vhost", stageOpening, mf(0, &wire.ConnectionOpen{VirtualHost: "nope"}),
			connClose(530, "NOT_ALLOWED - vhost nope not found", 10, 40)},
		{"bad frame end while opening", stageOpening, func() []byte { b := mf(0, &wire.ConnectionOpen{VirtualHost: "/"}); b[len(b)-1] = 1; return b }(),
			connClose(fe, "FRAME_ERROR - type 1, all octets = <<0,10,0,40,1,47,0,0>>: {invalid_frame_end_marker,1}")},

		// Open, on channel 0 and unopened channels.
		{"unknown method on channel 0 (RabbitMQ resets)", stageOpen, meth(0, 10, 99), connClose(503, "COMMAND_INVALID - unknown method id {10,99}")},
		{"unknown class on channel 0 (RabbitMQ resets)", stageOpen, meth(0, 99, 10), connClose(503, "COMMAND_INVALID - unknown method id {99,10}")},
		{"connection.start from the client", stageOpen, mf(0, &wire.ConnectionStart{VersionMinor: 9, Mechanisms: "PLAIN", Locales: "en_US"}),
			connClose(504, "CHANNEL_ERROR - unexpected method in connection state running", 10, 10)},
		{"tune-ok after open", stageOpen, mf(0, &wire.ConnectionTuneOk{ChannelMax: 10, FrameMax: 131072}),
			connClose(504, "CHANNEL_ERROR - unexpected method in connection state running", 10, 31)},
		{"content header on channel 0", stageOpen, hdrF(0, 60, 0, 5, 0, 0),
			connClose(ue, "UNEXPECTED_FRAME - type 2, all octets = <<0,60,0,0,0,0,0,0,0,0,0,5,0,0>>")},
		{"body on channel 0", stageOpen, rawF(wire.FrameBody, 0, []byte("abc")), connClose(ue, `UNEXPECTED_FRAME - type 3, all octets = <<"abc">>`)},
		{"heartbeat with payload", stageOpen, rawF(wire.FrameHeartbeat, 0, []byte("ab")), connClose(fe, `FRAME_ERROR - type 8, all octets = <<"ab">>: unknown_frame`)},
		{"heartbeat on channel 1", stageOpen, rawF(wire.FrameHeartbeat, 1, nil), connClose(ue, "UNEXPECTED_FRAME - type 8, all octets = <<>>")},
		{"unknown frame type", stageOpen, rawF(9, 0, []byte("abc")), connClose(fe, `FRAME_ERROR - type 9, all octets = <<"abc">>: unknown_frame`)},
		{"bad frame end", stageOpen, func() []byte { b := meth(0, 10, 50); b[len(b)-1] = 1; return b }(),
			connClose(fe, "FRAME_ERROR - type 1, all octets = <<0,10,0,50>>: {invalid_frame_end_marker,1}")},
		{"frame over frame_max", stageOpen, rawF(wire.FrameMethod, 0, make([]byte, 200000)),
			connClose(fe, "FRAME_ERROR - type 1, all octets = <<>>: {frame_too_large,200000,131064}")},
		{"frame size 0xffffffff", stageOpen, []byte{1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 10},
			connClose(fe, "FRAME_ERROR - type 1, all octets = <<>>: {frame_too_large,4294967295,131064}")},
		{"empty method payload", stageOpen, rawF(wire.FrameMethod, 0, nil), connClose(fe, "FRAME_ERROR - type 1, all octets = <<>>: unknown_frame")},
		{"method payload of 2 bytes", stageOpen, rawF(wire.FrameMethod, 0, []byte{0, 10}), connClose(fe, "FRAME_ERROR - type 1, all octets = <<0,10>>: unknown_frame")},
		{"connection.close cut short (RabbitMQ: 541)", stageOpen, meth(0, 10, 50, 0), connClose(fe, "FRAME_ERROR - cannot decode <<0>>", 10, 50)},
		{"content header on an unopened channel", stageOpen, hdrF(3, 60, 0, 5, 0, 0), connClose(ue, "UNEXPECTED_FRAME - expected method frame, got non method frame instead")},
		{"body on an unopened channel", stageOpen, rawF(wire.FrameBody, 3, []byte("x")), connClose(ue, "UNEXPECTED_FRAME - expected method frame, got non method frame instead")},
		{"method on an unopened channel", stageOpen, mf(5, &wire.ChannelFlow{Active: false}), connClose(504, "CHANNEL_ERROR - expected 'channel.open'", 20, 20)},
		{"unknown method on an unopened channel", stageOpen, meth(5, 60, 99), connClose(503, "COMMAND_INVALID - unknown method id {60,99}")},
		{"publish on an unopened channel", stageOpen, cat(mf(7, &wire.BasicPublish{RoutingKey: "q"}), hdrF(7, 60, 0, 1, 0, 0), rawF(wire.FrameBody, 7, []byte("x"))),
			connClose(504, "CHANNEL_ERROR - expected 'channel.open'", 60, 40)},

		// An open channel: undecodable arguments, content out of order.
		{"queue.declare cut short", stageChannel, meth(1, 50, 10, 0, 0, 5, 'a', 'b'), connClose(fe, "FRAME_ERROR - cannot decode <<0,0,5,97,98>>", 50, 10)},
		{"queue name past end", stageChannel, meth(1, 50, 10, 0, 0, 0xff, 'a', 'b', 0, 0, 0, 0, 0), connClose(fe, "FRAME_ERROR - cannot decode <<0,0,255,97,98,0,0,0,0,0>>", 50, 10)},
		{"table bad field type (RabbitMQ resets)", stageChannel, declareWithArgs(table(3, 'x', '-', 'a', 'Z', 0, 0)),
			connClose(fe, "FRAME_ERROR - cannot decode <<0,0,1,113,0,0,0,0,7,3,120,45,97,90,0,0>>", 50, 10)},
		{"table length past end", stageChannel, declareWithArgs(append(u32b(1000), 'a', 'b')),
			connClose(fe, "FRAME_ERROR - cannot decode <<0,0,1,113,0,0,0,3,232,97,98>>", 50, 10)},
		{"table length 0xffffffff", stageChannel, declareWithArgs(append(u32b(0xffffffff), 'a', 'b')),
			connClose(fe, "FRAME_ERROR - cannot decode <<0,0,1,113,0,255,255,255,255,97,98>>", 50, 10)},
		{"array of 2^31-1 items (RabbitMQ resets)", stageChannel, declareWithArgs(table(1, 'x', 'A', 0x7f, 0xff, 0xff, 0xff, 'I', 0, 0, 0, 1)),
			connClose(fe, "FRAME_ERROR - cannot decode <<0,0,1,113,0,0,0,0,12,1,120,65,127,255,255,255,73,0,0,0,1>>", 50, 10)},
		{"long string past end in a table (RabbitMQ resets)", stageChannel, declareWithArgs(table(1, 'k', 'S', 0, 0, 3, 0xe7, 'a', 'b')),
			connClose(fe, "FRAME_ERROR - cannot decode <<0,0,1,113,0,0,0,0,9,1,107,83,0,0,3,231,97,98>>", 50, 10)},
		{"negative long string length (RabbitMQ resets)", stageChannel, declareWithArgs(table(1, 'k', 'S', 0xff, 0xff, 0xff, 0xf0, 'a', 'b')),
			connClose(fe, "FRAME_ERROR - cannot decode <<0,0,1,113,0,0,0,0,9,1,107,83,255,255,255,240,97,98>>", 50, 10)},
		{"decimal cut short (RabbitMQ resets)", stageChannel, declareWithArgs(table(1, 'k', 'D', 1)),
			connClose(fe, "FRAME_ERROR - cannot decode <<0,0,1,113,0,0,0,0,4,1,107,68,1>>", 50, 10)},
		{"nested table past end (RabbitMQ resets)", stageChannel, declareWithArgs(table(1, 'k', 'F', 0, 0, 7, 0xd0, 0, 0)),
			connClose(fe, "FRAME_ERROR - cannot decode <<0,0,1,113,0,0,0,0,9,1,107,70,0,0,7,208,0,0>>", 50, 10)},
		{"header without publish", stageChannel, hdrF(1, 60, 0, 5, 0, 0), connClose(ue, "UNEXPECTED_FRAME - expected method frame, got non method frame instead")},
		{"body without header", stageChannel, cat(publishQ, rawF(wire.FrameBody, 1, []byte("abc"))),
			connClose(ue, "UNEXPECTED_FRAME - expected content header for class 60, got non content header frame instead", 60, 40)},
		{"method before the body is complete", stageChannel, cat(publishQ, hdrF(1, 60, 0, 10, 0, 0), rawF(wire.FrameBody, 1, []byte("abc")), publishQ),
			connClose(ue, "UNEXPECTED_FRAME - expected content body, got non content body frame instead", 60, 40)},
		{"second header", stageChannel, cat(publishQ, hdrF(1, 60, 0, 10, 0, 0), hdrF(1, 60, 0, 10, 0, 0)),
			connClose(ue, "UNEXPECTED_FRAME - expected content body, got non content body frame instead", 60, 40)},
		{"body larger than declared", stageChannel, cat(publishQ, hdrF(1, 60, 0, 2, 0, 0), rawF(wire.FrameBody, 1, []byte("abcd"))),
			connClose(fe, "FRAME_ERROR - content body frame exceeds remaining content size", 60, 40)},
		{"header of another class", stageChannel, cat(publishQ, hdrF(1, 50, 0, 2, 0, 0)),
			connClose(ue, "UNEXPECTED_FRAME - expected content header for class 60, got one for class 50 instead", 60, 40)},
		{"header weight 1", stageChannel, cat(publishQ, hdrF(1, 60, 1, 2, 0, 0)),
			connClose(ue, "UNEXPECTED_FRAME - expected content header for class 60, got non content header frame instead", 60, 40)},
		{"header of 3 bytes", stageChannel, cat(publishQ, rawF(wire.FrameHeader, 1, []byte{0, 60, 0})),
			connClose(fe, "FRAME_ERROR - type 2, all octets = <<0,60,0>>: unknown_frame")},
		{"property flags with no values (RabbitMQ: 541)", stageChannel, cat(publishQ, hdrF(1, 60, 0, 0, 0xff, 0xff)),
			connClose(fe, "FRAME_ERROR - cannot decode <<255,255>>", 60, 40)},
		{"body size over 512 MiB", stageChannel, cat(publishQ, hdrF(1, 60, 0, 1<<62, 0, 0)),
			connClose(fe, "FRAME_ERROR - content body size 4611686018427387904 exceeds maximum allowed size 536870912", 60, 40)},
		{"second channel.open", stageChannel, mf(1, &wire.ChannelOpen{}), connClose(504, "CHANNEL_ERROR - second 'channel.open' seen", 20, 10)},
		{"channel.open-ok from the client", stageChannel, mf(1, &wire.ChannelOpenOk{}), connClose(503, "COMMAND_INVALID - unimplemented method", 20, 11)},
		{"basic.deliver from the client", stageChannel, mf(1, &wire.BasicDeliver{ConsumerTag: "t", DeliveryTag: 1, RoutingKey: "q"}),
			connClose(503, "COMMAND_INVALID - unimplemented method", 60, 60)},
		{"channel.close-ok without a close", stageChannel, mf(1, &wire.ChannelCloseOk{}), connClose(503, "COMMAND_INVALID - unimplemented method", 20, 41)},
		{"unknown method on a channel (RabbitMQ resets)", stageChannel, meth(1, 60, 99), connClose(503, "COMMAND_INVALID - unknown method id {60,99}")},
		{"unknown class on a channel (RabbitMQ resets)", stageChannel, meth(1, 77, 10), connClose(503, "COMMAND_INVALID - unknown method id {77,10}")},
		{"frame over frame_max on a channel", stageChannel, rawF(wire.FrameBody, 1, make([]byte, 131073)),
			connClose(fe, "FRAME_ERROR - type 3, all octets = <<>>: {frame_too_large,131073,131064}")},
		{"tx.select after confirm.select", stageChannel, cat(mf(1, &wire.ConfirmSelect{}), mf(1, &wire.TxSelect{})),
			chanClose(406, "PRECONDITION_FAILED - cannot switch from confirm to tx mode", 90, 10)},
		{"ack of an unknown tag", stageChannel, mf(1, &wire.BasicAck{DeliveryTag: 99}), chanClose(406, "PRECONDITION_FAILED - unknown delivery tag 99", 60, 80)},
		{"publish to a missing exchange", stageChannel, cat(mf(1, &wire.BasicPublish{Exchange: "nope"}), hdrF(1, 60, 0, 1, 0, 0), rawF(wire.FrameBody, 1, []byte("x"))),
			chanClose(404, "NOT_FOUND - no exchange 'nope' in vhost '/'", 60, 40)},
	}
}

// Ensure each hostile input gets RabbitMQ's answer, no panic and no
// hang, and leaves the broker serving.
func TestHostileInputAMQP(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	cases := hostileCases()
	if len(cases) < 50 {
		t.Fatalf("%d cases, want at least 50", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, tb.addr)
			c.nc.SetDeadline(time.Now().Add(5 * time.Second))
			c.stage(tc.stage)
			c.write(tc.send)
			if tc.stage == stageNone && tc.want.silent {
				c.nc.(*net.TCPConn).CloseWrite()
			}
			c.check(tc.want)
			healthy(t, tb)
		})
	}
}

// stage brings the raw connection to s.
func (c *rawClient) stage(s hostileStage) {
	c.t.Helper()
	if s >= stageStarted {
		c.write(wire.ProtocolHeader[:])
		c.method()
	}
	if s >= stageTuning {
		c.send(0, startOk("PLAIN", "\x00guest\x00guest", true))
		c.method()
	}
	if s >= stageOpening {
		c.send(0, &wire.ConnectionTuneOk{ChannelMax: 2047, FrameMax: 131072})
	}
	if s >= stageOpen {
		c.send(0, &wire.ConnectionOpen{VirtualHost: "/"})
		c.method()
	}
	if s >= stageChannel {
		c.send(1, &wire.ChannelOpen{})
		c.method()
	}
}

// check reads the server's answer and compares it with w.
func (c *rawClient) check(w hostileWant) {
	c.t.Helper()
	switch {
	case w.header:
		var h [8]byte
		if _, err := io.ReadFull(c.nc, h[:]); err != nil || h != wire.ProtocolHeader {
			c.t.Fatalf("got % x (%v), want the protocol header", h, err)
		}
		c.expectSocketEnd()
		return
	case w.silent:
		c.expectSocketEnd()
		return
	}
	for {
		f, err := c.fr.ReadFrame(1 << 20)
		if err != nil {
			c.t.Fatalf("read: %v, want a close %d %q", err, w.code, w.text)
		}
		if f.Type != wire.FrameMethod {
			continue
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			c.t.Fatalf("decode: %v", err)
		}
		var code, class, method uint16
		var text string
		switch m := m.(type) {
		case *wire.ConnectionClose:
			code, text, class, method = m.ReplyCode, m.ReplyText, m.FailingClassID, m.FailingMethodID
		case *wire.ChannelClose:
			code, text, class, method = m.ReplyCode, m.ReplyText, m.FailingClassID, m.FailingMethodID
		default:
			continue // the replies to what came before (confirm.select-ok, ...)
		}
		if f.Channel != w.ch || code != w.code || text != w.text || class != w.class || method != w.method {
			c.t.Fatalf("got close on channel %d: %d %q (%d,%d),\nwant channel %d: %d %q (%d,%d)",
				f.Channel, code, text, class, method, w.ch, w.code, w.text, w.class, w.method)
		}
		break
	}
	if w.ch != 0 {
		// A channel error: the connection goes on.
		c.send(w.ch, &wire.ChannelCloseOk{})
		c.send(2, &wire.ChannelOpen{})
		if ch, m := c.method(); ch != 2 || m.MethodName() != "channel.open-ok" {
			c.t.Fatalf("after the channel error: %d %s", ch, m.MethodName())
		}
		return
	}
	c.send(0, &wire.ConnectionCloseOk{})
	c.expectSocketEnd()
}

// expectSocketEnd reads until the server closes the socket; a frame on
// the way fails the test.
func (c *rawClient) expectSocketEnd() {
	c.t.Helper()
	buf := make([]byte, 4096)
	for {
		n, err := c.nc.Read(buf)
		if n > 0 {
			c.t.Fatalf("got % x, want the socket closed", buf[:min(n, 32)])
		}
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			c.t.Fatal("socket still open")
		default:
			return
		}
	}
}

// healthy checks that a fresh connection publishes and consumes.
func healthy(t *testing.T, tb *testBroker) {
	t.Helper()
	conn, err := amqp091.Dial(tb.url())
	if err != nil {
		t.Fatalf("broker unhealthy: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("h", 100)
	if err := ch.Publish("", q.Name, false, false, amqp091.Publishing{Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	d, err := ch.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := recv(t, d); string(got.Body) != body {
		t.Fatalf("consumed %q", got.Body)
	}
}
