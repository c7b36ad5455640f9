package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/warren-mq/warren/internal/amqp10"
	"github.com/warren-mq/warren/internal/testutil"
)

// newOf returns a new zero performative of p's type.
func newOf(p Performative) Performative {
	return reflect.New(reflect.TypeOf(p).Elem()).Interface().(Performative)
}

// roundTrip checks that p encodes to want (when given), that the bytes
// decode to p with nothing left, and that they encode the same again.
func roundTrip(t *testing.T, p Performative, want []byte) {
	t.Helper()
	enc, err := p.AppendTo(nil)
	if err != nil {
		t.Fatalf("AppendTo: %v", err)
	}
	if want != nil && !bytes.Equal(enc, want) {
		t.Fatalf("encoded\n got % x\nwant % x", enc, want)
	}
	got := newOf(p)
	rest, err := got.Decode(enc)
	if err != nil {
		t.Fatalf("Decode(% x): %v", enc, err)
	}
	if len(rest) != 0 {
		t.Fatalf("Decode left % x", rest)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("decoded\n got %#v\nwant %#v", got, p)
	}
	again, err := got.AppendTo(nil)
	if err != nil || !bytes.Equal(again, enc) {
		t.Fatalf("re-encoded % x (%v), want % x", again, err, enc)
	}
}

func syms(s ...string) []amqp10.Symbol {
	out := make([]amqp10.Symbol, len(s))
	for i, v := range s {
		out[i] = amqp10.Symbol(v)
	}
	return out
}

// performativeCase is a performative and, when short, its compact
// encoding.
type performativeCase struct {
	name string
	p    Performative
	want []byte
}

// performativeCases covers every performative and every field, the
// delivery states, sources, targets and errors inside them.
func performativeCases(tb testing.TB) []performativeCase {
	hex := func(s string) []byte { return testutil.HexBytes(tb, s) }
	openDefaults := &Open{ContainerID: "c", MaxFrameSize: DefaultMaxFrameSize, ChannelMax: DefaultChannelMax}
	return []performativeCase{
		{"open minimal", openDefaults, hex(`00 53 10 c0 04 01 a1 01 'c'`)},
		{"open hostname (the doc example)", &Open{ContainerID: "c", Hostname: "h", MaxFrameSize: DefaultMaxFrameSize, ChannelMax: DefaultChannelMax},
			hex(`00 53 10 c0 07 02 a1 01 63 a1 01 68`)},
		{"open empty container-id", &Open{MaxFrameSize: DefaultMaxFrameSize, ChannelMax: DefaultChannelMax}, hex(`00 53 10 c0 03 01 a1 00`)},
		{"open limits", &Open{ContainerID: "warren", MaxFrameSize: 131072, ChannelMax: 2047, IdleTimeout: 60000},
			hex(`00 53 10 c0 17 05 a1 06 'warren' 40 70 00020000 60 07ff 70 0000ea60`)},
		{"open full", &Open{
			ContainerID: "c", Hostname: "vhost:/", MaxFrameSize: 65536, ChannelMax: 0, IdleTimeout: 1,
			OutgoingLocales: syms("en-US"), IncomingLocales: syms("en-US", "de"),
			OfferedCapabilities: syms("ANONYMOUS-RELAY"), DesiredCapabilities: syms("a", "b", "c"),
			Properties: amqp10.Map{{Key: amqp10.Symbol("product"), Value: "warren"}, {Key: amqp10.Symbol("n"), Value: int64(1)}},
		}, nil},
		{"begin", &Begin{NextOutgoingID: 0, IncomingWindow: 5000, OutgoingWindow: 100, HandleMax: DefaultHandleMax},
			hex(`00 53 11 c0 0a 04 40 43 70 00001388 52 64`)},
		{"begin reply", &Begin{RemoteChannel: 0, HasRemoteChannel: true, NextOutgoingID: 1, IncomingWindow: 1, OutgoingWindow: 1, HandleMax: 255},
			hex(`00 53 11 c0 0c 05 60 0000 52 01 52 01 52 01 52 ff`)},
		{"begin full", &Begin{RemoteChannel: 7, HasRemoteChannel: true, NextOutgoingID: 1 << 31, IncomingWindow: 0, OutgoingWindow: 0, HandleMax: 0,
			OfferedCapabilities: syms("x"), DesiredCapabilities: syms("y", "z"), Properties: amqp10.Map{}}, nil},
		{"attach receiver with filters", &Attach{
			Name: "link", Handle: 0, Role: RoleReceiver, SndSettleMode: SndMixed, RcvSettleMode: RcvFirst,
			Source: &Source{Address: "/queues/q", ExpiryPolicy: ExpirySessionEnd, Filter: amqp10.Map{
				{Key: amqp10.Symbol("rabbitmq:stream-offset-spec"), Value: amqp10.Described{Descriptor: amqp10.Symbol("rabbitmq:stream-offset-spec"), Value: amqp10.Symbol("first")}},
				{Key: amqp10.Symbol("sel"), Value: amqp10.Described{Descriptor: uint64(0x0000468C00000004), Value: "a = 1"}},
			}, Outcomes: syms("amqp:accepted:list", "amqp:released:list"), DefaultOutcome: Modified{DeliveryFailed: true}},
			Target: &Target{ExpiryPolicy: ExpirySessionEnd},
		}, nil},
		{"attach sender", &Attach{
			Name: "s", Handle: 3, Role: RoleSender, SndSettleMode: SndSettled, RcvSettleMode: RcvSecond,
			Source: &Source{ExpiryPolicy: ExpirySessionEnd}, Target: &Target{Address: "/exchanges/amq.topic/k", Durable: DurableUnsettled, ExpiryPolicy: ExpiryNever, Timeout: 30, Capabilities: syms("queue")},
			InitialDeliveryCount: 0, HasInitialDeliveryCount: true, MaxMessageSize: 1 << 20,
		}, nil},
		{"attach minimal", &Attach{Name: "n", Handle: 1, Role: RoleSender, SndSettleMode: SndMixed},
			hex(`00 53 12 c0 07 03 a1 01 'n' 52 01 42`)},
		{"attach full", &Attach{
			Name: "full", Handle: 1 << 20, Role: RoleReceiver, SndSettleMode: SndUnsettled, RcvSettleMode: RcvFirst,
			Source: &Source{Address: "a", Durable: DurableConfiguration, ExpiryPolicy: ExpiryLinkDetach, Timeout: 9, Dynamic: true,
				DynamicNodeProperties: amqp10.Map{{Key: amqp10.Symbol("lifetime-policy"), Value: amqp10.Described{Descriptor: uint64(CodeDeleteOnClose), Value: []any{}}}},
				DistributionMode:      "copy", DefaultOutcome: Released{}, Capabilities: syms("temporary-queue")},
			Target:              &Target{Address: "t", Dynamic: true, ExpiryPolicy: ExpirySessionEnd, DynamicNodeProperties: amqp10.Map{}},
			Unsettled:           amqp10.Map{{Key: []byte("tag"), Value: amqp10.Described{Descriptor: uint64(CodeAccepted), Value: []any{}}}},
			IncompleteUnsettled: true, InitialDeliveryCount: 4, HasInitialDeliveryCount: true, MaxMessageSize: 1,
			OfferedCapabilities: syms("o"), DesiredCapabilities: syms("d1", "d2"), Properties: amqp10.Map{{Key: amqp10.Symbol("k"), Value: true}},
		}, nil},
		{"attach coordinator", &Attach{Name: "txn", Handle: 0, Role: RoleSender, SndSettleMode: SndMixed,
			Source: &Source{ExpiryPolicy: ExpirySessionEnd}, Target: &Target{Coordinator: true, ExpiryPolicy: ExpirySessionEnd, Capabilities: syms("amqp:local-transactions")}}, nil},
		{"flow session", &Flow{NextIncomingID: 1, HasNextIncomingID: true, IncomingWindow: 5000, NextOutgoingID: 0, OutgoingWindow: 5000},
			hex(`00 53 13 c0 0e 04 52 01 70 00001388 43 70 00001388`)},
		{"flow link", &Flow{IncomingWindow: 1, NextOutgoingID: 2, OutgoingWindow: 3, Handle: 0, HasHandle: true, DeliveryCount: 0, HasDeliveryCount: true,
			LinkCredit: 100, HasLinkCredit: true, Drain: true}, hex(`00 53 13 c0 0e 09 40 52 01 52 02 52 03 43 43 52 64 40 41`)},
		{"flow full", &Flow{NextIncomingID: 9, HasNextIncomingID: true, IncomingWindow: 1, NextOutgoingID: 2, OutgoingWindow: 3, Handle: 4, HasHandle: true,
			DeliveryCount: 5, HasDeliveryCount: true, LinkCredit: 6, HasLinkCredit: true, Available: 7, HasAvailable: true, Drain: true, Echo: true,
			Properties: amqp10.Map{{Key: amqp10.Symbol("p"), Value: uint32(1)}}}, nil},
		{"transfer", &Transfer{Handle: 0, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{0, 0, 0, 0}, MessageFormat: 0, HasMessageFormat: true},
			hex(`00 53 14 c0 0a 04 43 43 a0 04 00000000 43`)},
		{"transfer settled", &Transfer{Handle: 1, DeliveryID: 300, HasDeliveryID: true, DeliveryTag: []byte("t"), MessageFormat: 0, HasMessageFormat: true, Settled: true},
			hex(`00 53 14 c0 0d 05 52 01 70 0000012c a0 01 't' 43 41`)},
		{"transfer continuation", &Transfer{Handle: 2, More: true}, hex(`00 53 14 c0 08 06 52 02 40 40 40 40 41`)},
		{"transfer full", &Transfer{Handle: 2, DeliveryID: 1, HasDeliveryID: true, DeliveryTag: []byte{}, MessageFormat: 0x80013700, HasMessageFormat: true,
			Settled: true, More: true, RcvSettleMode: RcvSecond, HasRcvSettleMode: true, State: Received{SectionNumber: 3, SectionOffset: 1 << 33},
			Resume: true, Aborted: true, Batchable: true}, nil},
		{"disposition accepted", &Disposition{Role: RoleReceiver, First: 0, Last: 0, Settled: true, State: Accepted{}},
			hex(`00 53 15 c0 09 05 41 43 40 41 00 53 24 45`)},
		{"disposition range", &Disposition{Role: RoleSender, First: 1, Last: 10, State: Rejected{Error: &Error{Condition: CondDecodeError, Description: "bad"}}}, nil},
		{"disposition released batchable", &Disposition{Role: RoleReceiver, First: 7, Last: 7, State: Released{}, Batchable: true}, nil},
		{"disposition modified", &Disposition{Role: RoleReceiver, First: 7, Last: 8, State: Modified{UndeliverableHere: true,
			MessageAnnotations: amqp10.Map{{Key: amqp10.Symbol("x-opt-a"), Value: "b"}}}}, nil},
		{"disposition other state", &Disposition{Role: RoleReceiver, First: 1, Last: 1,
			State: OtherState{Descriptor: uint64(0x34), Value: []any{[]byte("txn"), amqp10.Described{Descriptor: uint64(CodeAccepted), Value: []any{}}}}}, nil},
		{"detach", &Detach{Handle: 0}, hex(`00 53 16 c0 02 01 43`)},
		{"detach closed", &Detach{Handle: 1, Closed: true}, hex(`00 53 16 c0 04 02 52 01 41`)},
		{"detach error", &Detach{Handle: 1, Closed: true, Error: &Error{Condition: CondNotFound, Description: "no queue 'q' in vhost '/'",
			Info: amqp10.Map{{Key: amqp10.Symbol("k"), Value: "v"}}}}, nil},
		{"end", &End{}, hex(`00 53 17 45`)},
		{"end error", &End{Error: &Error{Condition: CondWindowViolation}}, hex(`00 53 17 c0 26 01 00 53 1d c0 20 01 a3 1d 'amqp:session:window-violation'`)},
		{"close", &Close{}, hex(`00 53 18 45`)},
		{"close error", &Close{Error: &Error{Condition: CondFramingError, Description: "frame of 9000 bytes"}}, nil},
		{"sasl-mechanisms one", &SASLMechanisms{Mechanisms: syms("PLAIN")}, hex(`00 53 40 c0 08 01 a3 05 'PLAIN'`)},
		{"sasl-mechanisms", &SASLMechanisms{Mechanisms: syms("PLAIN", "ANONYMOUS")}, hex(`00 53 40 c0 15 01 e0 12 02 a3 05 'PLAIN' 09 'ANONYMOUS'`)},
		{"sasl-mechanisms none", &SASLMechanisms{Mechanisms: []amqp10.Symbol{}}, hex(`00 53 40 c0 05 01 e0 02 00 a3`)},
		{"sasl-init plain", &SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00guest\x00guest"), Hostname: "localhost"}, nil},
		{"sasl-init anonymous", &SASLInit{Mechanism: "ANONYMOUS"}, hex(`00 53 41 c0 0c 01 a3 09 'ANONYMOUS'`)},
		{"sasl-challenge", &SASLChallenge{Challenge: []byte{}}, hex(`00 53 42 c0 03 01 a0 00`)},
		{"sasl-response", &SASLResponse{Response: []byte("r")}, hex(`00 53 43 c0 04 01 a0 01 'r'`)},
		{"sasl-outcome ok", &SASLOutcome{Code: SASLOK}, hex(`00 53 44 c0 03 01 50 00`)},
		{"sasl-outcome auth", &SASLOutcome{Code: SASLAuth, AdditionalData: []byte("x")}, hex(`00 53 44 c0 06 02 50 01 a0 01 'x'`)},
	}
}

// Ensure every performative, state and terminus round-trips, in its
// compact form where the bytes are given.
func TestPerformativeRoundTrip(t *testing.T) {
	for _, tt := range performativeCases(t) {
		t.Run(tt.name, func(t *testing.T) { roundTrip(t, tt.p, tt.want) })
	}
}

// Ensure large values take the 32-bit forms and come back.
func TestPerformativeLarge(t *testing.T) {
	long := strings.Repeat("x", 300)
	many := make([]amqp10.Symbol, 300)
	for i := range many {
		many[i] = "cap"
	}
	roundTrip(t, &Open{ContainerID: long, Hostname: long, MaxFrameSize: 512, ChannelMax: 1, OfferedCapabilities: many,
		DesiredCapabilities: []amqp10.Symbol{amqp10.Symbol(long), "b"}}, nil)
	roundTrip(t, &Transfer{Handle: 1, DeliveryTag: []byte(long)}, nil)
	roundTrip(t, &SASLInit{Mechanism: amqp10.Symbol(long), InitialResponse: []byte(long), Hostname: long}, nil)
}

// Ensure the forms an encoder may choose besides the compact ones decode:
// list32, symbolic and wide descriptors, explicit nulls, defaults given
// explicitly, bool as 0x56, fields beyond those defined.
func TestDecodeLenientForms(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Performative
	}{
		{"list32 and explicit trailing nulls", `00 53 10 d0 0000000a 00000004 a1 01 'c' 40 40 40`,
			&Open{ContainerID: "c", MaxFrameSize: DefaultMaxFrameSize, ChannelMax: DefaultChannelMax}},
		{"symbolic descriptor", `00 a3 0e 'amqp:open:list' c0 04 01 a1 01 'c'`,
			&Open{ContainerID: "c", MaxFrameSize: DefaultMaxFrameSize, ChannelMax: DefaultChannelMax}},
		{"sym32 descriptor", `00 b3 0000000e 'amqp:open:list' c0 04 01 a1 01 'c'`,
			&Open{ContainerID: "c", MaxFrameSize: DefaultMaxFrameSize, ChannelMax: DefaultChannelMax}},
		{"ulong descriptor", `00 80 0000000000000010 c0 04 01 a1 01 'c'`,
			&Open{ContainerID: "c", MaxFrameSize: DefaultMaxFrameSize, ChannelMax: DefaultChannelMax}},
		{"str32, uint, defaults explicit", `00 53 10 c0 10 04 b1 00000001 'c' 40 70 ffffffff 60 ffff`,
			&Open{ContainerID: "c", MaxFrameSize: DefaultMaxFrameSize, ChannelMax: DefaultChannelMax}},
		{"symbols as sym32 array", `00 53 10 c0 18 08 a1 01 'c' 40 40 40 40 40 40 f0 00000009 00000001 b3 00000000`,
			&Open{ContainerID: "c", MaxFrameSize: DefaultMaxFrameSize, ChannelMax: DefaultChannelMax, OfferedCapabilities: []amqp10.Symbol{""}}},
		{"extra fields are skipped", `00 53 16 c0 08 04 43 40 40 a1 02 'zz'`, &Detach{}},
		{"bool 0x56 and vbin32", `00 53 14 c0 0c 05 43 43 b0 00000001 'x' 43 56 01`,
			&Transfer{HasDeliveryID: true, DeliveryTag: []byte("x"), HasMessageFormat: true, Settled: true}},
		{"last omitted is first", `00 53 15 c0 04 02 41 52 05`, &Disposition{Role: RoleReceiver, First: 5, Last: 5}},
		{"state with symbolic descriptor", `00 53 15 c0 1b 05 41 43 40 41 00 a3 12 'amqp:accepted:list' 45`,
			&Disposition{Role: RoleReceiver, Settled: true, State: Accepted{}}},
		{"outcome as list8 of 0", `00 53 15 c0 0b 05 41 43 40 40 00 53 26 c0 01 00`,
			&Disposition{Role: RoleReceiver, State: Released{}}},
		{"address as symbol", `00 53 12 c0 11 06 a1 01 'n' 43 41 40 40 00 53 28 c0 04 01 a3 01 'q'`,
			&Attach{Name: "n", Role: RoleReceiver, SndSettleMode: SndMixed, Source: &Source{Address: "q", ExpiryPolicy: ExpirySessionEnd}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testutil.HexBytes(t, tt.in)
			got, rest, err := Decode(typeOf(tt.want), in)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if len(rest) != 0 {
				t.Fatalf("rest % x", rest)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

// Ensure bodies that break the rules are decode errors, with a text that
// says what is wrong, and never anything else.
func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		typ  Type
		in   string
		want string
	}{
		{"empty", TypeAMQP, ``, "bytes needed"},
		{"not described", TypeAMQP, `c0 01 00`, "not a described value"},
		{"unknown code", TypeAMQP, `00 53 19 45`, "descriptor 0x19 in a frame of type 0"},
		{"unknown symbol", TypeAMQP, `00 a3 03 'foo' 45`, `unknown descriptor "foo"`},
		{"sasl in amqp frame", TypeAMQP, `00 53 44 c0 03 01 50 00`, "descriptor 0x44 in a frame of type 0"},
		{"amqp in sasl frame", TypeSASL, `00 53 17 45`, "descriptor 0x17 in a frame of type 1"},
		{"container-id missing", TypeAMQP, `00 53 10 45`, "mandatory field container-id is missing"},
		{"container-id null", TypeAMQP, `00 53 10 c0 02 01 40`, "mandatory field container-id is missing"},
		{"container-id a symbol", TypeAMQP, `00 53 10 c0 04 01 a3 01 'c'`, "field container-id: constructor 0xa3 where a string is due"},
		{"string not UTF-8", TypeAMQP, `00 53 10 c0 04 01 a1 01 ff`, "not UTF-8"},
		{"begin windows missing", TypeAMQP, `00 53 11 c0 03 02 40 43`, "mandatory field incoming-window is missing"},
		{"handle missing", TypeAMQP, `00 53 14 45`, "mandatory field handle is missing"},
		{"handle a ulong", TypeAMQP, `00 53 14 c0 02 01 44`, "constructor 0x44 where a uint is due"},
		{"role missing", TypeAMQP, `00 53 12 c0 05 02 a1 01 'n' 43`, "mandatory field role is missing"},
		{"snd-settle-mode 3", TypeAMQP, `00 53 12 c0 08 04 a1 01 'n' 43 41 50 03`, "snd-settle-mode: 3 is out of range"},
		{"rcv-settle-mode 2", TypeAMQP, `00 53 14 c0 09 07 43 40 40 40 40 40 50 02`, "rcv-settle-mode: 2 is out of range"},
		{"sasl code 5", TypeSASL, `00 53 44 c0 03 01 50 05`, "code: 5 is out of range"},
		{"bool byte 2", TypeAMQP, `00 53 16 c0 04 02 43 56 02`, "boolean byte is neither 0 nor 1"},
		{"payload after detach", TypeAMQP, `00 53 16 c0 02 01 43 ff`, "1 bytes after"},
		{"list count beyond size", TypeAMQP, `00 53 16 c0 02 05 43`, "list of 5 items in 1 bytes"},
		{"list size beyond body", TypeAMQP, `00 53 16 c0 09 01 43`, "size 9, 2 bytes left"},
		{"list32 huge count", TypeAMQP, `00 53 16 d0 00000005 ffffffff 43`, "list of 4294967295 items in 1 bytes"},
		{"list bytes after items", TypeAMQP, `00 53 16 c0 03 01 43 43`, "1 bytes after the last of 1 items"},
		{"list not a list", TypeAMQP, `00 53 16 a1 00`, "constructor 0xa1 where a list is due"},
		{"symbol array huge count", TypeAMQP, `00 53 10 c0 12 06 a1 01 'c' 40 40 40 40 f0 00000005 ffffffff a3`, "array of 4294967295 symbols"},
		{"array of strings", TypeAMQP, `00 53 10 c0 0e 06 a1 01 'c' 40 40 40 40 e0 04 01 a1 01 'x'`, "0xa1 where an array of symbols is due"},
		{"description not a string", TypeAMQP, `00 53 16 c0 0c 03 43 40 00 53 1d c0 04 02 a3 00 45`, "field description: constructor 0x45 where a string is due"},
		{"fields key not a symbol", TypeAMQP, `00 53 17 c0 10 01 00 53 1d c0 0a 03 a3 00 40 c1 04 02 a1 00 40`, "key of type string"},
		{"filter not described", TypeAMQP,
			`00 53 12 c0 1b 06 a1 01 'n' 43 41 40 40 00 53 28 c0 0e 08 40 40 40 40 40 40 40 c1 04 02 a3 00 43`, "filter of type uint32"},
		{"error condition missing", TypeAMQP, `00 53 18 c0 05 01 00 53 1d 45`, "mandatory field condition is missing"},
		{"error wrong descriptor", TypeAMQP, `00 53 18 c0 05 01 00 53 1e 45`, "descriptor 0x1e where an error is due"},
		{"received offset missing", TypeAMQP, `00 53 15 c0 0c 05 41 43 40 40 00 53 23 c0 02 01 43`, "mandatory field section-offset is missing"},
		{"source wrong descriptor", TypeAMQP, `00 53 12 c0 0c 06 a1 01 'n' 43 41 40 40 00 53 29 45`, "where a source is due"},
		{"target wrong descriptor", TypeAMQP, `00 53 12 c0 0d 07 a1 01 'n' 43 41 40 40 40 00 53 28 45`, "where a target is due"},
		{"malformed map", TypeAMQP, `00 53 13 c0 0c 0b 40 43 43 43 40 40 40 40 40 40 c1`, "field properties"},
		{"zero-width elements beyond the budget", TypeAMQP, `00 53 16 c0 0e 04 43 40 40 f0 00000005 000007d0 40`,
			"2000 zero-width array elements exceed the 1024 left"},
		{"mechanisms missing", TypeSASL, `00 53 40 45`, "mandatory field sasl-server-mechanisms is missing"},
		{"challenge missing", TypeSASL, `00 53 42 45`, "mandatory field challenge is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, err := Decode(tt.typ, testutil.HexBytes(t, tt.in))
			if err == nil {
				t.Fatalf("decoded %#v, want an error", p)
			}
			if !errors.Is(err, ErrDecode) || ConditionOf(err) != CondDecodeError {
				t.Fatalf("error %v is not a decode error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

// Ensure a transfer's payload is the rest of the body, not a copy.
func TestTransferPayloadAliases(t *testing.T) {
	body, err := (&Transfer{Handle: 1, DeliveryID: 2, HasDeliveryID: true, DeliveryTag: []byte("tag")}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	body = append(body, "payload"...)
	var tr Transfer
	payload, err := tr.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if string(payload) != "payload" || &payload[0] != &body[len(body)-7] {
		t.Fatalf("payload %q does not alias the body", payload)
	}
	if &tr.DeliveryTag[0] != &body[bytes.Index(body, []byte("tag"))] {
		t.Fatalf("delivery tag does not alias the body")
	}
	p, rest, err := Decode(TypeAMQP, body)
	if err != nil || string(rest) != "payload" || p.(*Transfer).Handle != 1 {
		t.Fatalf("Decode: %#v % x %v", p, rest, err)
	}
}

// Ensure values the encoder cannot write are errors, not bad bytes.
func TestEncodeErrors(t *testing.T) {
	for _, p := range []Performative{
		&Open{ContainerID: "\xff"},
		&Open{ContainerID: "c", Properties: amqp10.Map{{Key: amqp10.Symbol("k"), Value: struct{}{}}}},
		&Attach{Name: "n", Source: &Source{Address: "\xff"}},
		&Close{Error: &Error{Condition: "c", Description: "\xff"}},
	} {
		dst := []byte("keep")
		got, err := AppendFrame(dst, 0, p)
		if err == nil {
			t.Fatalf("%T encoded % x, want an error", p, got)
		}
		if string(got) != "keep" {
			t.Fatalf("%T: dst is % x after an error", p, got)
		}
	}
}

// Ensure the lifetime policies are recognised in both descriptor forms.
func TestLifetimePolicy(t *testing.T) {
	b := AppendLifetimePolicy(nil, CodeDeleteOnNoLinks)
	v, _, err := amqp10.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if code, ok := LifetimePolicy(v); !ok || code != CodeDeleteOnNoLinks {
		t.Fatalf("LifetimePolicy(% x) = %#x %v", b, code, ok)
	}
	sym := amqp10.Described{Descriptor: amqp10.Symbol("amqp:delete-on-close:list"), Value: []any{}}
	if code, ok := LifetimePolicy(sym); !ok || code != CodeDeleteOnClose {
		t.Fatalf("LifetimePolicy(symbol) = %#x %v", code, ok)
	}
	if _, ok := LifetimePolicy(amqp10.Described{Descriptor: uint64(CodeSource)}); ok {
		t.Fatal("a source is not a lifetime policy")
	}
}

// Ensure hostile counts cost memory in proportion to the input: a list,
// array or binary claiming 2^32 items or bytes, and extension fields of
// zero-width arrays (10 bytes claim 65536 nulls each) that amqp10.Decode
// alone would let cost a megabyte apiece.
func TestDecodeAllocationBound(t *testing.T) {
	fields := []byte{0x00, 0x53, 0x16, 0xd0, 0, 0, 0, 0, 0, 0, 0, 0, 0x43, 0x40, 0x40} // detach handle 0
	count := 3
	for range 100 {
		fields = append(fields, 0xf0, 0, 0, 0, 5, 0, 0, 0x03, 0xe8, 0x40) // array32 of 1000 nulls
		count++
	}
	binary.BigEndian.PutUint32(fields[4:], uint32(len(fields)-8)) // size: after the size field
	binary.BigEndian.PutUint32(fields[8:], uint32(count))
	for _, in := range [][]byte{
		fields,
		testutil.HexBytes(t, `00 53 16 d0 00000005 ffffffff 43`),
		testutil.HexBytes(t, `00 53 10 c0 12 06 a1 01 'c' 40 40 40 40 f0 00000005 ffffffff a3`),
		testutil.HexBytes(t, `00 53 14 c0 07 03 43 43 b0 ffffffff`),
	} {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, _, err := Decode(TypeAMQP, in)
		runtime.ReadMemStats(&m1)
		if !errors.Is(err, ErrDecode) {
			t.Fatalf("% x: %v, want a decode error", in[:min(len(in), 16)], err)
		}
		if got := m1.TotalAlloc - m0.TotalAlloc; got > 64*uint64(len(in))+64<<10 {
			t.Fatalf("% x...: %d bytes allocated %d", in[:16], len(in), got)
		}
	}
}
