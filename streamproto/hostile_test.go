package streamproto

import (
	"bytes"
	"testing"

	"github.com/warren-mq/warren/streamproto/wire"
)

// Hostile input over raw sockets (issue 18): each case brings a
// connection to a stage, sends bytes no client library would, and checks
// RabbitMQ's answer: before Open the connection is dropped without a
// word (rabbit_stream_reader's pre-auth failure), except for the SASL
// responses it sends; after Open a malformed or unknown frame gets Close
// UNKNOWN_FRAME (0x0d), an oversize one Close FRAME_TOO_LARGE (0x0e), a
// well-formed request on something missing its response code. After
// each case a fresh connection publishes and consumes.

type streamStage int

const (
	sNone   streamStage = iota // nothing sent
	sPeer                      // PeerProperties and SaslHandshake exchanged
	sTuned                     // authenticated and tuned, not open
	sOpened                    // open on "/", stream "hs" exists
)

// streamWant is the answer expected.
type streamWant struct {
	dropped bool      // closed without a frame
	close   wire.Code // the server's Close code, then the socket closed
	// A response to the request (key, code); the connection goes on.
	key  wire.Key
	code wire.Code
	// A one-way frame key (PublishError, Credit's error), connection on.
	oneWay wire.Key
}

func dropped() streamWant                          { return streamWant{dropped: true} }
func closed(code wire.Code) streamWant             { return streamWant{close: code} }
func resp(key wire.Key, code wire.Code) streamWant { return streamWant{key: key, code: code} }

// frameRaw is a frame with any size field and bytes after it.
func frameRaw(size uint32, rest ...byte) []byte { return append(rawBuf(nil).u32(size), rest...) }

// req is a v1 request frame with correlation id 77.
func req(key wire.Key, body rawBuf) []byte {
	return rawFrame(key, 1, rawBuf(nil).u32(77).raw(body...))
}

func streamHostileCases() []struct {
	name  string
	stage streamStage
	send  []byte
	want  streamWant
} {
	type c = struct {
		name  string
		stage streamStage
		send  []byte
		want  streamWant
	}
	const uf, tl = wire.CodeUnknownFrame, wire.CodeFrameTooLarge
	sub := func(id uint8, stream string, offType uint16) rawBuf {
		return rawBuf(nil).u8(id).str(stream).u16(offType).u16(10)
	}
	return []c{
		// Before Open: dropped.
		{"AMQP 0-9-1 header", sNone, []byte("AMQP\x00\x00\x09\x01"), dropped()},
		{"HTTP request", sNone, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), dropped()},
		{"TLS ClientHello", sNone, []byte{0x16, 3, 1, 0, 0xa5, 1, 0, 0, 0xa1, 3, 3}, dropped()},
		{"size 0", sNone, frameRaw(0), dropped()},
		{"size 2", sNone, frameRaw(2, 0, 0x11), dropped()},
		{"size 0xffffffff", sNone, frameRaw(0xffffffff, 0, 0x11, 0, 1), dropped()},
		{"size 8193 before open", sNone, frameRaw(8193, 0, 0x11, 0, 1), dropped()},
		{"unknown key before open", sNone, req(0x0042, nil), dropped()},
		{"Publish before open", sNone, rawFrame(wire.KeyPublish, 1, rawBuf(nil).u8(1).u32(0)), dropped()},
		{"Subscribe before open", sNone, req(wire.KeySubscribe, sub(1, "hs", wire.OffsetTypeFirst)), dropped()},
		{"Deliver from the client", sNone, rawFrame(wire.KeyDeliver, 1, rawBuf(nil).u8(1)), dropped()},
		{"a response key from the client", sNone, req(wire.KeyPeerProperties|wire.ResponseBit, rawBuf(nil).u16(1)), dropped()},
		{"PeerProperties v2", sNone, rawFrame(wire.KeyPeerProperties, 2, rawBuf(nil).u32(1).u32(0)), dropped()},
		{"PeerProperties count past end", sNone, req(wire.KeyPeerProperties, rawBuf(nil).u32(5).str("a")), dropped()},
		{"PeerProperties count negative", sNone, req(wire.KeyPeerProperties, rawBuf(nil).u32(0xffffffff)), dropped()},
		{"PeerProperties string past end", sNone, req(wire.KeyPeerProperties, rawBuf(nil).u32(1).u16(300).raw('a')), dropped()},
		{"PeerProperties string length -2", sNone, req(wire.KeyPeerProperties, rawBuf(nil).u32(1).u16(0xfffe).raw('a')), dropped()},
		{"PeerProperties cut in its correlation id", sNone, rawFrame(wire.KeyPeerProperties, 1, rawBuf(nil).u16(1)), dropped()},
		{"Open before authentication", sPeer, req(wire.KeyOpen, rawBuf(nil).str("/")), dropped()},
		{"SaslAuthenticate data length -5", sPeer, req(wire.KeySaslAuthenticate, rawBuf(nil).str("PLAIN").u32(0xfffffffb)), dropped()},
		{"SaslAuthenticate data past end", sPeer, req(wire.KeySaslAuthenticate, rawBuf(nil).str("PLAIN").u32(100).raw(0, 'g')), dropped()},
		{"SaslAuthenticate mechanism past end", sPeer, req(wire.KeySaslAuthenticate, rawBuf(nil).u16(50).raw('P')), dropped()},
		{"SaslAuthenticate unknown mechanism", sPeer, req(wire.KeySaslAuthenticate, rawBuf(nil).str("EXTERNAL").bin(nil)),
			resp(wire.KeySaslAuthenticate, wire.CodeSASLMechanismNotSupported)},
		{"SaslAuthenticate PLAIN without NULs", sPeer, req(wire.KeySaslAuthenticate, rawBuf(nil).str("PLAIN").bin([]byte("guestguest"))),
			resp(wire.KeySaslAuthenticate, wire.CodeSASLError)},
		{"SaslAuthenticate AMQPLAIN malformed", sPeer, req(wire.KeySaslAuthenticate, rawBuf(nil).str("AMQPLAIN").bin([]byte{5, 'L', 'O', 'G', 'I', 'N', 'Z'})),
			resp(wire.KeySaslAuthenticate, wire.CodeSASLError)},
		{"SaslAuthenticate wrong password", sPeer, req(wire.KeySaslAuthenticate, rawBuf(nil).str("PLAIN").bin(plain("guest", "nope"))),
			resp(wire.KeySaslAuthenticate, wire.CodeAuthenticationFailure)},
		{"Open vhost past end", sTuned, req(wire.KeyOpen, rawBuf(nil).u16(9).raw('/')), dropped()},
		{"Open of a missing vhost", sTuned, req(wire.KeyOpen, rawBuf(nil).str("nope")), resp(wire.KeyOpen, wire.CodeVirtualHostAccessFailure)},
		{"frame over 8192 after Tune, before Open", sTuned, frameRaw(9000, 0, 0x0f, 0, 1), dropped()},
		{"Publish after Tune, before Open", sTuned, rawFrame(wire.KeyPublish, 1, rawBuf(nil).u8(1).u32(0)), dropped()},

		// Open: Close 0x0d or 0x0e, or a response code.
		{"unknown key", sOpened, req(0x0042, nil), closed(uf)},
		{"key 0x7fff", sOpened, req(0x7fff, nil), closed(uf)},
		{"Deliver from the client", sOpened, rawFrame(wire.KeyDeliver, 1, rawBuf(nil).u8(1)), closed(uf)},
		{"PublishConfirm from the client", sOpened, rawFrame(wire.KeyPublishConfirm, 1, rawBuf(nil).u8(1).u32(0)), closed(uf)},
		{"a response key from the client", sOpened, req(wire.KeyOpen|wire.ResponseBit, rawBuf(nil).u16(1)), closed(uf)},
		{"Tune after Open", sOpened, rawFrame(wire.KeyTune, 1, rawBuf(nil).u32(0).u32(0)), closed(uf)},
		{"frame over frame_max", sOpened, frameRaw(DefaultFrameMax+1, 0, 0x0f, 0, 1), closed(tl)},
		{"size 0xffffffff", sOpened, frameRaw(0xffffffff, 0, 0x0f, 0, 1), closed(tl)},
		{"size 0", sOpened, frameRaw(0), closed(uf)},
		{"size 3", sOpened, frameRaw(3, 0, 0x0f, 0), closed(uf)},
		{"Publish v3", sOpened, rawFrame(wire.KeyPublish, 3, rawBuf(nil).u8(1).u32(0)), closed(uf)},
		{"Heartbeat v2", sOpened, rawFrame(wire.KeyHeartbeat, 2, nil), closed(uf)},
		{"Publish count past end", sOpened, rawFrame(wire.KeyPublish, 1, rawBuf(nil).u8(1).u32(5)), closed(uf)},
		{"Publish count negative", sOpened, rawFrame(wire.KeyPublish, 1, rawBuf(nil).u8(1).u32(0xffffffff)), closed(uf)},
		{"Publish entry past end", sOpened, rawFrame(wire.KeyPublish, 1, rawBuf(nil).u8(1).u32(1).u64(1).u32(1000).raw('x')), closed(uf)},
		{"Publish to an undeclared publisher", sOpened, rawFrame(wire.KeyPublish, 1, rawBuf(nil).u8(9).u32(1).u64(1).simpleEntry("x")),
			streamWant{oneWay: wire.KeyPublishError}},
		{"DeclarePublisher stream past end", sOpened, req(wire.KeyDeclarePublisher, rawBuf(nil).u8(1).str("").u16(10).raw('h')), closed(uf)},
		{"DeclarePublisher on a missing stream", sOpened, req(wire.KeyDeclarePublisher, rawBuf(nil).u8(1).str("").str("nope")),
			resp(wire.KeyDeclarePublisher, wire.CodeStreamDoesNotExist)},
		{"DeletePublisher unknown", sOpened, req(wire.KeyDeletePublisher, rawBuf(nil).u8(200)), resp(wire.KeyDeletePublisher, wire.CodePublisherDoesNotExist)},
		{"Subscribe properties count negative", sOpened, req(wire.KeySubscribe, sub(1, "hs", wire.OffsetTypeFirst).u32(0xffffffff)), closed(uf)},
		{"Subscribe to a missing stream", sOpened, req(wire.KeySubscribe, sub(1, "nope", wire.OffsetTypeFirst)), resp(wire.KeySubscribe, wire.CodeStreamDoesNotExist)},
		{"Subscribe offset cut", sOpened, req(wire.KeySubscribe, rawBuf(nil).u8(1).str("hs").u16(wire.OffsetTypeOffset).raw(0, 0)), closed(uf)},
		{"Credit for an unknown subscription", sOpened, rawFrame(wire.KeyCredit, 1, rawBuf(nil).u8(42).u16(1)), streamWant{oneWay: wire.KeyCredit | wire.ResponseBit}},
		{"Unsubscribe unknown", sOpened, req(wire.KeyUnsubscribe, rawBuf(nil).u8(42)), resp(wire.KeyUnsubscribe, wire.CodeSubscriptionIDDoesNotExist)},
		{"Create map count negative", sOpened, req(wire.KeyCreate, rawBuf(nil).str("x1").u32(0xffffffff)), closed(uf)},
		{"Create with a bad max-age", sOpened, req(wire.KeyCreate, rawBuf(nil).str("x2").strMap("max-age", "forever")), resp(wire.KeyCreate, wire.CodePreconditionFailed)},
		{"Create with an empty name", sOpened, req(wire.KeyCreate, rawBuf(nil).str("").strMap()), resp(wire.KeyCreate, wire.CodePreconditionFailed)},
		{"Create of an existing stream", sOpened, req(wire.KeyCreate, rawBuf(nil).str("hs").strMap()), resp(wire.KeyCreate, wire.CodeStreamAlreadyExists)},
		{"Delete of a missing stream", sOpened, req(wire.KeyDelete, rawBuf(nil).str("nope")), resp(wire.KeyDelete, wire.CodeStreamDoesNotExist)},
		{"Metadata count negative", sOpened, req(wire.KeyMetadata, rawBuf(nil).u32(0xffffffff)), closed(uf)},
		{"Metadata count 2^31-1", sOpened, req(wire.KeyMetadata, rawBuf(nil).u32(0x7fffffff).str("hs")), closed(uf)},
		{"StoreOffset cut", sOpened, rawFrame(wire.KeyStoreOffset, 1, rawBuf(nil).str("r").str("hs").raw(0, 0)), closed(uf)},
		{"QueryOffset of a missing stream", sOpened, req(wire.KeyQueryOffset, rawBuf(nil).str("r").str("nope")), resp(wire.KeyQueryOffset, wire.CodeStreamDoesNotExist)},
		{"ExchangeCommandVersions count past end", sOpened, req(wire.KeyExchangeCommandVersions, rawBuf(nil).u32(9).u16(1)), closed(uf)},
		{"CreateSuperStream partitions past end", sOpened, req(wire.KeyCreateSuperStream, rawBuf(nil).str("ss").u32(5)), closed(uf)},
		{"Route on a missing super stream", sOpened, req(wire.KeyRoute, rawBuf(nil).str("k").str("nope")), resp(wire.KeyRoute, wire.CodeStreamDoesNotExist)},
		{"string length -2", sOpened, req(wire.KeyDelete, rawBuf(nil).u16(0xfffe).raw('a', 'b')), closed(uf)},
		{"Close with its reason past end", sOpened, req(wire.KeyClose, rawBuf(nil).u16(1).u16(40).raw('x')), closed(uf)},
	}
}

// Ensure each hostile input gets RabbitMQ's answer, no panic and no
// hang, and leaves the broker serving.
func TestHostileInputStream(t *testing.T) {
	tb := startBroker(t, brokerOpts{})
	setup := rawOpen(t, tb, 0)
	setup.create("hs", wire.CodeOK)
	cases := streamHostileCases()
	if len(cases) < 50 {
		t.Fatalf("%d cases, want at least 50", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, tb.addr)
			switch tc.stage {
			case sPeer:
				c.peerProperties()
				c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
			case sTuned:
				c.peerProperties()
				c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
				if code := c.authenticate("PLAIN", plain("guest", "guest")); code != wire.CodeOK {
					t.Fatalf("authenticate: 0x%02x", uint16(code))
				}
				c.tune(0)
			case sOpened:
				c.handshake(0)
			}
			c.write(tc.send)
			w := tc.want
			switch {
			case w.dropped:
				c.expectClosed()
			case w.close != 0:
				c.expectServerClose(w.close)
			case w.oneWay != 0:
				c.expect(w.oneWay, 1)
				c.expectCode(wire.KeyStreamStats, rawBuf(nil).str("hs"), wire.CodeOK) // still serving
			default:
				if code, _ := c.response(w.key, 77); code != w.code {
					t.Fatalf("response 0x%04x: code 0x%02x, want 0x%02x", uint16(w.key), uint16(code), uint16(w.code))
				}
				if tc.stage == sOpened {
					c.expectCode(wire.KeyStreamStats, rawBuf(nil).str("hs"), wire.CodeOK)
				} else {
					c.expectClosed() // a refusal before Open ends the connection
				}
			}
			streamHealthy(t, tb)
		})
	}
}

// streamHealthy checks that a fresh connection publishes and consumes.
func streamHealthy(t *testing.T, tb *testBroker) {
	t.Helper()
	c := rawOpen(t, tb, 0)
	c.declarePublisher(1, "", "hs", wire.CodeOK)
	c.publish(1, 1, "health")
	c.expect(wire.KeyPublishConfirm, 1)
	// From the last chunk: the one just published.
	c.expectCode(wire.KeySubscribe, rawBuf(nil).u8(1).str("hs").u16(wire.OffsetTypeLast).u16(1), wire.CodeOK)
	f := c.expect(wire.KeyDeliver, 1)
	if !bytes.Contains(f.body, []byte("health")) {
		t.Fatalf("delivered % x, want the health message", head(f.body))
	}
}
