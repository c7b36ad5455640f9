package wire

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/warren-mq/warren/internal/testutil"
)

// Every method of the 0-9-1 XML plus the access class is generated, with
// the Go names the AMQP front end uses.
func TestMethodSet(t *testing.T) {
	want := []string{
		"ConnectionStart", "ConnectionStartOk", "ConnectionSecure", "ConnectionSecureOk",
		"ConnectionTune", "ConnectionTuneOk", "ConnectionOpen", "ConnectionOpenOk",
		"ConnectionClose", "ConnectionCloseOk", "ConnectionBlocked", "ConnectionUnblocked",
		"ConnectionUpdateSecret", "ConnectionUpdateSecretOk",
		"ChannelOpen", "ChannelOpenOk", "ChannelFlow", "ChannelFlowOk", "ChannelClose", "ChannelCloseOk",
		"AccessRequest", "AccessRequestOk",
		"ExchangeDeclare", "ExchangeDeclareOk", "ExchangeDelete", "ExchangeDeleteOk",
		"ExchangeBind", "ExchangeBindOk", "ExchangeUnbind", "ExchangeUnbindOk",
		"QueueDeclare", "QueueDeclareOk", "QueueBind", "QueueBindOk", "QueuePurge", "QueuePurgeOk",
		"QueueDelete", "QueueDeleteOk", "QueueUnbind", "QueueUnbindOk",
		"BasicQos", "BasicQosOk", "BasicConsume", "BasicConsumeOk", "BasicCancel", "BasicCancelOk",
		"BasicPublish", "BasicReturn", "BasicDeliver", "BasicGet", "BasicGetOk", "BasicGetEmpty",
		"BasicAck", "BasicReject", "BasicRecoverAsync", "BasicRecover", "BasicRecoverOk", "BasicNack",
		"ConfirmSelect", "ConfirmSelectOk",
		"TxSelect", "TxSelectOk", "TxCommit", "TxCommitOk", "TxRollback", "TxRollbackOk",
	}
	var got []string
	content := map[string]bool{}
	for _, m := range allMethods() {
		name := reflect.TypeOf(m).Elem().Name()
		got = append(got, name)
		if m.HasContent() {
			content[m.MethodName()] = true
		}
		// The name, the ids and the constants agree.
		if again := NewMethod(m.ClassID(), m.MethodID()); reflect.TypeOf(again) != reflect.TypeOf(m) {
			t.Errorf("%s: NewMethod(%d, %d) = %T", name, m.ClassID(), m.MethodID(), again)
		}
		if !strings.Contains(m.MethodName(), ".") {
			t.Errorf("%s: MethodName %q", name, m.MethodName())
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("methods:\ngot  %v\nwant %v", got, want)
	}
	wantContent := map[string]bool{"basic.publish": true, "basic.return": true, "basic.deliver": true, "basic.get-ok": true}
	if !reflect.DeepEqual(content, wantContent) {
		t.Errorf("content methods = %v, want %v", content, wantContent)
	}
}

func TestMethodIDs(t *testing.T) {
	for _, tc := range []struct {
		m             Method
		class, method uint16
		name          string
	}{
		{&ConnectionStart{}, 10, 10, "connection.start"},
		{&ConnectionUpdateSecretOk{}, 10, 71, "connection.update-secret-ok"},
		{&ChannelClose{}, 20, 40, "channel.close"},
		{&AccessRequest{}, 30, 10, "access.request"},
		{&AccessRequestOk{}, 30, 11, "access.request-ok"},
		{&ExchangeUnbindOk{}, 40, 51, "exchange.unbind-ok"}, // not 41
		{&QueueUnbind{}, 50, 50, "queue.unbind"},
		{&BasicPublish{}, ClassBasic, MethodBasicPublish, "basic.publish"},
		{&BasicNack{}, 60, 120, "basic.nack"},
		{&ConfirmSelect{}, 85, 10, "confirm.select"},
		{&TxRollbackOk{}, 90, 31, "tx.rollback-ok"},
	} {
		if tc.m.ClassID() != tc.class || tc.m.MethodID() != tc.method || tc.m.MethodName() != tc.name {
			t.Errorf("%T: got %d/%d %q, want %d/%d %q", tc.m, tc.m.ClassID(), tc.m.MethodID(), tc.m.MethodName(), tc.class, tc.method, tc.name)
		}
	}
}

// Every method survives encode → frame → decode with all fields set, for
// three bit patterns, and its decoder rejects every truncation and a
// trailing byte.
func TestMethodRoundTrip(t *testing.T) {
	for _, proto := range allMethods() {
		for pattern := range 3 {
			m := NewMethod(proto.ClassID(), proto.MethodID())
			fillMethod(m, pattern)
			frame := AppendMethodFrame(nil, 7, m)

			fr := NewFrameReader(bytes.NewReader(frame), 4096)
			f, err := fr.ReadFrame(FrameMinSize)
			if err != nil {
				t.Fatalf("%s: ReadFrame: %v", m.MethodName(), err)
			}
			if f.Type != FrameMethod || f.Channel != 7 {
				t.Fatalf("%s: frame type %d channel %d", m.MethodName(), f.Type, f.Channel)
			}
			got, err := DecodeMethod(f.Payload)
			if err != nil {
				t.Fatalf("%s pattern %d: DecodeMethod: %v", m.MethodName(), pattern, err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("%s pattern %d:\ngot  %+v\nwant %+v", m.MethodName(), pattern, got, m)
			}

			args := m.AppendArgs(nil)
			for i := range len(args) {
				if err := NewMethod(m.ClassID(), m.MethodID()).ReadArgs(args[:i]); !errors.Is(err, ErrMalformed) {
					t.Fatalf("%s: ReadArgs of %d/%d bytes: err = %v, want ErrMalformed", m.MethodName(), i, len(args), err)
				}
			}
			err = NewMethod(m.ClassID(), m.MethodID()).ReadArgs(append(args, 0))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "trailing") {
				t.Fatalf("%s: ReadArgs with a trailing byte: err = %v", m.MethodName(), err)
			}
		}
	}
}

func TestGoldenConnectionStart(t *testing.T) {
	m := &ConnectionStart{
		VersionMajor:     0,
		VersionMinor:     9,
		ServerProperties: Table{"product": "Warren"},
		Mechanisms:       "PLAIN",
		Locales:          "en_US",
	}
	want := testutil.HexBytes(t, `
		01 0000 0000002f                     # method frame, channel 0, payload 47
		000a 000a                            # connection.start (10/10)
		00 09                                # version-major 0, version-minor 9
		00000013                             # server-properties: table of 19 bytes
		   07 'product' 53 00000006 'Warren' #   product: S "Warren"
		00000005 'PLAIN'                     # mechanisms longstr
		00000005 'en_US'                     # locales longstr
		ce                                   # frame end
	`)
	testutil.AssertBytes(t, AppendMethodFrame(nil, 0, m), want)
	got, err := DecodeMethod(want[7 : len(want)-1])
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("DecodeMethod = %+v, %v", got, err)
	}
}

func TestGoldenQueueDeclare(t *testing.T) {
	m := &QueueDeclare{
		Queue:      "q1",
		Durable:    true,
		AutoDelete: true,
		Arguments:  Table{"x-queue-type": "quorum"},
	}
	want := testutil.HexBytes(t, `
		01 0001 00000026          # method frame, channel 1, payload 38
		0032 000a                 # queue.declare (50/10)
		0000                      # reserved-1 (ticket)
		02 'q1'                   # queue
		0a                        # bits: durable 0x02 | auto-delete 0x08
		00000018                  # arguments: table of 24 bytes
		   0c 'x-queue-type' 53 00000006 'quorum'
		ce
	`)
	testutil.AssertBytes(t, AppendMethodFrame(nil, 1, m), want)

	// Each bit on its own: passive 0x01, durable 0x02, exclusive 0x04,
	// auto-delete 0x08, no-wait 0x10.
	for _, tc := range []struct {
		m    QueueDeclare
		bits byte
	}{
		{QueueDeclare{Passive: true}, 0x01},
		{QueueDeclare{Durable: true}, 0x02},
		{QueueDeclare{Exclusive: true}, 0x04},
		{QueueDeclare{AutoDelete: true}, 0x08},
		{QueueDeclare{NoWait: true}, 0x10},
		{QueueDeclare{Passive: true, Durable: true, Exclusive: true, AutoDelete: true, NoWait: true}, 0x1f},
	} {
		args := tc.m.AppendArgs(nil)
		want := testutil.HexBytes(t, `0000 00 `+hexOf(tc.bits)+` 00000000`) // ticket, queue "", bits, empty table
		testutil.AssertBytes(t, args, want)
		var got QueueDeclare
		if err := got.ReadArgs(args); err != nil || !reflect.DeepEqual(got, tc.m) {
			t.Errorf("bits %#x: ReadArgs = %+v, %v", tc.bits, got, err)
		}
	}
}

func hexOf(b byte) string { return string("0123456789abcdef"[b>>4]) + string("0123456789abcdef"[b&15]) }

func TestGoldenBasicPublish(t *testing.T) {
	m := &BasicPublish{Exchange: "ex", RoutingKey: "rk", Mandatory: true}
	want := testutil.HexBytes(t, `
		01 0001 0000000d          # method frame, channel 1, payload 13
		003c 0028                 # basic.publish (60/40)
		0000                      # reserved-1 (ticket)
		02 'ex'                   # exchange
		02 'rk'                   # routing-key
		01                        # bits: mandatory 0x01 (immediate 0x02 clear)
		ce
	`)
	testutil.AssertBytes(t, AppendMethodFrame(nil, 1, m), want)
	var got BasicPublish
	if err := got.ReadArgs(want[11 : len(want)-1]); err != nil || got != *m {
		t.Fatalf("ReadArgs = %+v, %v", got, err)
	}
}

func TestGoldenBasicDeliver(t *testing.T) {
	m := &BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 0x0102030405060708, Redelivered: true, RoutingKey: "rk"}
	want := testutil.HexBytes(t, `
		01 0002 00000016          # method frame, channel 2, payload 22
		003c 003c                 # basic.deliver (60/60)
		04 'ctag'                 # consumer-tag
		0102030405060708          # delivery-tag
		01                        # bits: redelivered
		00                        # exchange ""
		02 'rk'                   # routing-key
		ce
	`)
	testutil.AssertBytes(t, AppendMethodFrame(nil, 2, m), want)
}

func TestGoldenSmallMethods(t *testing.T) {
	for _, tc := range []struct {
		m    Method
		want string
	}{
		{&ConnectionClose{ReplyCode: NotFound, ReplyText: "NOT_FOUND", FailingClassID: 50, FailingMethodID: 10}, `
			000a 0032            # connection.close (10/50)
			0194                 # reply-code 404
			09 'NOT_FOUND'       # reply-text
			0032 000a            # class-id 50, method-id 10
		`},
		{&AccessRequest{Realm: "/data", Passive: true, Active: true, Write: true, Read: true}, `
			001e 000a            # access.request (30/10)
			05 '/data'           # realm
			1e                   # exclusive 0x01 clear, passive 0x02, active 0x04, write 0x08, read 0x10
		`},
		{&AccessRequestOk{Ticket: 1}, `001e 000b 0001`},
		{&ConfirmSelect{NoWait: true}, `0055 000a 01`},
		{&ExchangeUnbindOk{}, `0028 0033`},
		{&BasicNack{DeliveryTag: 5, Multiple: true, Requeue: true}, `
			003c 0078 0000000000000005
			03                   # multiple 0x01, requeue 0x02
		`},
		{&ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60}, `000a 001e 07ff 00020000 003c`},
		{&ConnectionOpen{VirtualHost: "/"}, `000a 0028 01 '/' 00 00  # vhost, reserved-1 "", reserved-2 bit`},
	} {
		want := testutil.HexBytes(t, tc.want)
		testutil.AssertBytes(t, AppendMethodPayload(nil, tc.m), want)
		got, err := DecodeMethod(want)
		if err != nil || !reflect.DeepEqual(got, tc.m) {
			t.Errorf("%s: DecodeMethod = %+v, %v", tc.m.MethodName(), got, err)
		}
	}
}

// RabbitMQ checks UTF-8 in the shortstr fields of methods without
// content ("Malformed UTF-8 in shortstr") and not in content methods.
func TestShortstrUTF8(t *testing.T) {
	bad := testutil.HexBytes(t, `000a 0028 02 ff fe 00 00`) // connection.open, vhost "\xff\xfe"
	_, err := DecodeMethod(bad)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "malformed UTF-8 in shortstr") || !strings.Contains(err.Error(), "virtual-host") {
		t.Fatalf("connection.open with a non-UTF-8 vhost: err = %v", err)
	}
	pub := testutil.HexBytes(t, `003c 0028 0000 02 ff fe 00 00`) // basic.publish, exchange "\xff\xfe"
	m, err := DecodeMethod(pub)
	if err != nil || m.(*BasicPublish).Exchange != "\xff\xfe" {
		t.Fatalf("basic.publish with a non-UTF-8 exchange: %+v, %v", m, err)
	}
}

// AppendArgs cannot fail: long shortstrs are clamped to 255 bytes at a
// UTF-8 boundary, unencodable table values become void.
func TestAppendArgsClamps(t *testing.T) {
	long := strings.Repeat("a", 254) + "é" + "tail" // é straddles byte 255
	args := (&BasicCancelOk{ConsumerTag: long}).AppendArgs(nil)
	if args[0] != 254 || len(args) != 255 {
		t.Fatalf("clamped length %d, %d bytes", args[0], len(args))
	}
	var got BasicCancelOk
	if err := got.ReadArgs(args); err != nil || got.ConsumerTag != strings.Repeat("a", 254) {
		t.Fatalf("ReadArgs = %q, %v", got.ConsumerTag, err)
	}
	args = (&BasicCancelOk{ConsumerTag: strings.Repeat("b", 300)}).AppendArgs(nil)
	if args[0] != 255 || len(args) != 256 {
		t.Fatalf("clamped ASCII length %d", args[0])
	}

	args = (&QueueBind{Arguments: Table{"ok": int32(1), "bad": struct{}{}, "big": uint64(1 << 63)}}).AppendArgs(nil)
	var qb QueueBind
	if err := qb.ReadArgs(args); err != nil {
		t.Fatal(err)
	}
	want := Table{"ok": int32(1), "bad": nil, "big": nil}
	if !reflect.DeepEqual(qb.Arguments, want) {
		t.Fatalf("arguments = %v, want %v", qb.Arguments, want)
	}
}

func TestDecodeMethodErrors(t *testing.T) {
	_, err := DecodeMethod([]byte{0, 60, 0})
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("3-byte payload: %v", err)
	}
	_, err = DecodeMethod([]byte{0, 60, 0, 99, 1, 2})
	var ue *UnknownMethodError
	if !errors.Is(err, ErrUnknownMethod) || !errors.As(err, &ue) || ue.ClassID != 60 || ue.MethodID != 99 {
		t.Errorf("unknown method: %v", err)
	}
	// A bad table names the method and the field.
	_, err = DecodeMethod(testutil.HexBytes(t, `0032 000a 0000 00 00 00000003 01 'k' 'Z'`))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "queue.declare field arguments") {
		t.Errorf("bad table: %v", err)
	}
}

// A reused struct decodes without allocating when its strings repeat.
func TestReadArgsReuseAllocs(t *testing.T) {
	pub := (&BasicPublish{Exchange: "amq.topic", RoutingKey: "orders.eu.created", Mandatory: true}).AppendArgs(nil)
	ack := (&BasicAck{DeliveryTag: 42, Multiple: true}).AppendArgs(nil)
	var p BasicPublish
	var a BasicAck
	if err := p.ReadArgs(pub); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.ReadArgs(pub); err != nil {
			t.Fatal(err)
		}
		if err := a.ReadArgs(ack); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ReadArgs allocs = %v, want 0", allocs)
	}
	if p.RoutingKey != "orders.eu.created" || a.DeliveryTag != 42 || !a.Multiple {
		t.Fatalf("decoded %+v %+v", p, a)
	}
}

func TestReplyCodes(t *testing.T) {
	for _, tc := range []struct {
		code, value uint16
		name        string
		hard        bool
	}{
		{ReplySuccess, 200, "REPLY_SUCCESS", false},
		{ContentTooLarge, 311, "CONTENT_TOO_LARGE", false},
		{NoRoute, 312, "NO_ROUTE", false},
		{NoConsumers, 313, "NO_CONSUMERS", false},
		{ConnectionForced, 320, "CONNECTION_FORCED", true},
		{InvalidPath, 402, "INVALID_PATH", true},
		{AccessRefused, 403, "ACCESS_REFUSED", false},
		{NotFound, 404, "NOT_FOUND", false},
		{ResourceLocked, 405, "RESOURCE_LOCKED", false},
		{PreconditionFailed, 406, "PRECONDITION_FAILED", false},
		{FrameError, 501, "FRAME_ERROR", true},
		{SyntaxError, 502, "SYNTAX_ERROR", true},
		{CommandInvalid, 503, "COMMAND_INVALID", true},
		{ChannelError, 504, "CHANNEL_ERROR", true},
		{UnexpectedFrame, 505, "UNEXPECTED_FRAME", true},
		{ResourceError, 506, "RESOURCE_ERROR", true},
		{NotAllowed, 530, "NOT_ALLOWED", true},
		{NotImplemented, 540, "NOT_IMPLEMENTED", true},
		{InternalError, 541, "INTERNAL_ERROR", true},
		{999, 999, "", false},
	} {
		if tc.code != tc.value {
			t.Errorf("%s = %d, want %d", tc.name, tc.code, tc.value)
		}
		if got := ReplyName(tc.value); got != tc.name {
			t.Errorf("ReplyName(%d) = %q, want %q", tc.value, got, tc.name)
		}
		if got := IsHardError(tc.value); got != tc.hard {
			t.Errorf("IsHardError(%d) = %v, want %v", tc.value, got, tc.hard)
		}
	}
}
