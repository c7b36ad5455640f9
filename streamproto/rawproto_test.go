package streamproto

// Tests that speak the stream protocol byte by byte: a tiny hand-written
// client over net.Conn (rawConn) builds frames with its own big-endian
// encoder (rawBuf, independent of the server's appenders) and checks the
// exact bytes and codes the server answers with.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-mq/warren/osiris"
	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto/wire"
)

// rawTimeout bounds every read and write of the raw client.
const rawTimeout = 5 * time.Second

// rawQuiet is how long the raw client waits to conclude that the server
// sends nothing more.
const rawQuiet = 300 * time.Millisecond

// rawBuf builds frame fields, big-endian.
type rawBuf []byte

func (b rawBuf) u8(v uint8) rawBuf   { return append(b, v) }
func (b rawBuf) u16(v uint16) rawBuf { return binary.BigEndian.AppendUint16(b, v) }
func (b rawBuf) u32(v uint32) rawBuf { return binary.BigEndian.AppendUint32(b, v) }
func (b rawBuf) u64(v uint64) rawBuf { return binary.BigEndian.AppendUint64(b, v) }
func (b rawBuf) raw(p ...byte) rawBuf {
	return append(b, p...)
}

// str appends a protocol string: i16 length and bytes.
func (b rawBuf) str(s string) rawBuf { return append(b.u16(uint16(len(s))), s...) }

// bin appends protocol bytes: i32 length and bytes.
func (b rawBuf) bin(p []byte) rawBuf { return append(b.u32(uint32(len(p))), p...) }

// strMap appends a map of the key, value pairs in kv, in order.
func (b rawBuf) strMap(kv ...string) rawBuf {
	b = b.u32(uint32(len(kv) / 2))
	for i := 0; i+1 < len(kv); i += 2 {
		b = b.str(kv[i]).str(kv[i+1])
	}
	return b
}

// simpleEntry appends a simple publish entry: u32 size (top bit 0), data.
func (b rawBuf) simpleEntry(data string) rawBuf { return append(b.u32(uint32(len(data))), data...) }

// rawFrame returns a whole frame: u32 size, u16 key, u16 version, body.
func rawFrame(key wire.Key, version uint16, body rawBuf) []byte {
	return rawBuf(nil).u32(uint32(4 + len(body))).u16(uint16(key)).u16(version).raw(body...)
}

// rawIn is a frame read from the server.
type rawIn struct {
	key     wire.Key
	version uint16
	body    []byte // after key and version
	raw     []byte // the whole frame, size included
}

// fields returns a reader over the frame's fields.
func (f rawIn) fields() *reader { return &reader{b: f.body} }

// rawConn is a hand-written stream protocol client.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	corr uint32
}

func rawDial(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, rawTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// rawOpen dials tb and runs the whole handshake; frameMax is the client's
// Tune reply (0 takes the server's).
func rawOpen(t testing.TB, tb *testBroker, frameMax uint32) *rawConn {
	t.Helper()
	c := rawDial(t, tb.addr)
	c.handshake(frameMax)
	return c
}

// write sends bytes, failing the test on an error.
func (c *rawConn) write(frames ...[]byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(rawTimeout))
	for _, f := range frames {
		if _, err := c.nc.Write(f); err != nil {
			c.t.Fatalf("write: %v", err)
		}
	}
}

// request sends a version 1 request with a new correlation id in front of
// body and returns the id.
func (c *rawConn) request(key wire.Key, body rawBuf) uint32 {
	c.t.Helper()
	c.corr++
	c.write(rawFrame(key, 1, rawBuf(nil).u32(c.corr).raw(body...)))
	return c.corr
}

// readFrame reads the next frame other than a heartbeat within d.
func (c *rawConn) readFrame(d time.Duration) (rawIn, error) {
	for {
		f, err := c.readAnyFrame(d)
		if err != nil || f.key != wire.KeyHeartbeat {
			return f, err
		}
	}
}

// readAnyFrame reads the next frame within d.
func (c *rawConn) readAnyFrame(d time.Duration) (rawIn, error) {
	c.nc.SetReadDeadline(time.Now().Add(d))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return rawIn{}, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return rawIn{}, fmt.Errorf("frame size %d from the server", n)
	}
	raw := make([]byte, 4+n)
	copy(raw, size[:])
	if _, err := io.ReadFull(c.nc, raw[4:]); err != nil {
		return rawIn{}, fmt.Errorf("frame of %d bytes: %w", n, err)
	}
	return rawIn{
		key:     wire.Key(binary.BigEndian.Uint16(raw[4:])),
		version: binary.BigEndian.Uint16(raw[6:]),
		body:    raw[8:],
		raw:     raw,
	}, nil
}

// next reads the next frame, failing the test if none arrives in time.
func (c *rawConn) next() rawIn {
	c.t.Helper()
	f, err := c.readFrame(rawTimeout)
	if err != nil {
		c.t.Fatalf("read frame: %v", err)
	}
	return f
}

// expect reads the next frame and checks its key and version.
func (c *rawConn) expect(key wire.Key, version uint16) rawIn {
	c.t.Helper()
	f := c.next()
	if f.key != key || f.version != version {
		c.t.Fatalf("got frame key 0x%04x version %d (% x), want key 0x%04x version %d",
			uint16(f.key), f.version, head(f.raw), uint16(key), version)
	}
	return f
}

// response reads the response to request corr of key and returns its code
// and a reader over the fields after the code.
func (c *rawConn) response(key wire.Key, corr uint32) (wire.Code, *reader) {
	c.t.Helper()
	f := c.expect(key|wire.ResponseBit, 1)
	r := f.fields()
	if got := r.u32(); got != corr {
		c.t.Fatalf("response 0x%04x: correlation id %d, want %d", uint16(f.key), got, corr)
	}
	code := wire.Code(r.u16())
	if r.err != nil {
		c.t.Fatalf("response 0x%04x: %v", uint16(f.key), r.err)
	}
	return code, r
}

// call sends a request and returns the response code and fields.
func (c *rawConn) call(key wire.Key, body rawBuf) (wire.Code, *reader) {
	c.t.Helper()
	return c.response(key, c.request(key, body))
}

// expectCode sends a request and checks the response code.
func (c *rawConn) expectCode(key wire.Key, body rawBuf, want wire.Code) *reader {
	c.t.Helper()
	code, r := c.call(key, body)
	if code != want {
		c.t.Fatalf("0x%04x: code 0x%02x, want 0x%02x", uint16(key), uint16(code), uint16(want))
	}
	return r
}

// quiet checks that no frame arrives for rawQuiet.
func (c *rawConn) quiet() {
	c.t.Helper()
	f, err := c.readFrame(rawQuiet)
	if err == nil {
		c.t.Fatalf("got frame key 0x%04x (% x), want none", uint16(f.key), head(f.raw))
	}
	if !isTimeout(err) {
		c.t.Fatalf("want no frame, got %v", err)
	}
}

// expectClosed checks that the server closes the connection without
// sending anything more.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	f, err := c.readFrame(rawTimeout)
	switch {
	case err == nil:
		c.t.Fatalf("got frame key 0x%04x (% x), want the connection closed", uint16(f.key), head(f.raw))
	case isTimeout(err):
		c.t.Fatalf("connection still open after %v, want it closed", rawTimeout)
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
	default:
		c.t.Fatalf("want the connection closed, got %v", err)
	}
}

// expectServerClose checks for a server Close with code, then that the
// connection is closed.
func (c *rawConn) expectServerClose(code wire.Code) {
	c.t.Helper()
	f := c.expect(wire.KeyClose, 1)
	r := f.fields()
	r.u32() // the server's correlation id
	got := wire.Code(r.u16())
	reason := r.string()
	if r.err != nil || !r.empty() {
		c.t.Fatalf("Close frame % x: err %v, %d bytes left", f.raw, r.err, len(r.b))
	}
	if got != code {
		c.t.Fatalf("Close code 0x%02x (%q), want 0x%02x", uint16(got), reason, uint16(code))
	}
	c.expectClosed()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// head returns at most the first 64 bytes of b, for messages.
func head(b []byte) []byte { return b[:min(len(b), 64)] }

// peerProperties exchanges peer properties and returns the server's.
func (c *rawConn) peerProperties() map[string]string {
	c.t.Helper()
	code, r := c.call(wire.KeyPeerProperties, rawBuf(nil).strMap("product", "warren-rawproto-test", "version", "0.0.1"))
	if code != wire.CodeOK {
		c.t.Fatalf("PeerProperties: code 0x%02x", uint16(code))
	}
	props := r.stringMap()
	if r.err != nil || !r.empty() {
		c.t.Fatalf("PeerProperties response: err %v, %d bytes left", r.err, len(r.b))
	}
	return props
}

// authenticate runs SaslAuthenticate and returns the code.
func (c *rawConn) authenticate(mechanism string, data []byte) wire.Code {
	c.t.Helper()
	code, r := c.call(wire.KeySaslAuthenticate, rawBuf(nil).str(mechanism).bin(data))
	if !r.empty() {
		c.t.Fatalf("SaslAuthenticate response has %d bytes after the code", len(r.b))
	}
	return code
}

func plain(user, pass string) []byte { return []byte("\x00" + user + "\x00" + pass) }

// tune reads the server's Tune and replies with frameMax and no heartbeat.
func (c *rawConn) tune(frameMax uint32) (serverFrameMax, serverHeartbeat uint32) {
	c.t.Helper()
	f := c.expect(wire.KeyTune, 1)
	r := f.fields()
	serverFrameMax, serverHeartbeat = r.u32(), r.u32()
	if r.err != nil || !r.empty() {
		c.t.Fatalf("Tune % x: err %v, %d bytes left", f.raw, r.err, len(r.b))
	}
	c.write(rawFrame(wire.KeyTune|wire.ResponseBit, 1, rawBuf(nil).u32(frameMax).u32(0)))
	return serverFrameMax, serverHeartbeat
}

// handshake runs PeerProperties, SaslHandshake, PLAIN guest/guest, Tune
// and Open "/".
func (c *rawConn) handshake(frameMax uint32) {
	c.t.Helper()
	c.peerProperties()
	c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
	if code := c.authenticate("PLAIN", plain("guest", "guest")); code != wire.CodeOK {
		c.t.Fatalf("SaslAuthenticate: code 0x%02x", uint16(code))
	}
	c.tune(frameMax)
	r := c.expectCode(wire.KeyOpen, rawBuf(nil).str("/"), wire.CodeOK)
	r.stringMap()
	if r.err != nil || !r.empty() {
		c.t.Fatalf("Open response: err %v, %d bytes left", r.err, len(r.b))
	}
}

// create creates stream name with args and checks the code.
func (c *rawConn) create(name string, want wire.Code, args ...string) {
	c.t.Helper()
	c.expectCode(wire.KeyCreate, rawBuf(nil).str(name).strMap(args...), want)
}

// declarePublisher declares publisher id on stream.
func (c *rawConn) declarePublisher(id uint8, ref, stream string, want wire.Code) {
	c.t.Helper()
	c.expectCode(wire.KeyDeclarePublisher, rawBuf(nil).u8(id).str(ref).str(stream), want)
}

// publish sends one Publish v1 frame with simple entries for bodies,
// publishing ids firstID, firstID+1, ...
func (c *rawConn) publish(pubID uint8, firstID uint64, bodies ...string) {
	c.t.Helper()
	b := rawBuf(nil).u8(pubID).u32(uint32(len(bodies)))
	for i, s := range bodies {
		b = b.u64(firstID + uint64(i)).simpleEntry(s)
	}
	c.write(rawFrame(wire.KeyPublish, 1, b))
}

// expectConfirm reads a PublishConfirm and checks its exact bytes.
func (c *rawConn) expectConfirm(pubID uint8, ids ...uint64) {
	c.t.Helper()
	f := c.expect(wire.KeyPublishConfirm, 1)
	body := rawBuf(nil).u8(pubID).u32(uint32(len(ids)))
	for _, id := range ids {
		body = body.u64(id)
	}
	if want := rawFrame(wire.KeyPublishConfirm, 1, body); !bytes.Equal(f.raw, want) {
		c.t.Fatalf("PublishConfirm\n got % x\nwant % x", f.raw, want)
	}
}

// subscribe subscribes id to stream from offset type first with credit.
func (c *rawConn) subscribe(id uint8, stream string, credit uint16, want wire.Code) {
	c.t.Helper()
	c.expectCode(wire.KeySubscribe, rawBuf(nil).u8(id).str(stream).u16(wire.OffsetTypeFirst).u16(credit), want)
}

// streamStats returns the StreamStats map of stream.
func (c *rawConn) streamStats(stream string) map[string]int64 {
	c.t.Helper()
	r := c.expectCode(wire.KeyStreamStats, rawBuf(nil).str(stream), wire.CodeOK)
	n := r.count(10)
	stats := map[string]int64{}
	for range n {
		k := r.string()
		stats[k] = int64(r.u64())
	}
	if r.err != nil || !r.empty() {
		c.t.Fatalf("StreamStats response: err %v, %d bytes left", r.err, len(r.b))
	}
	return stats
}

// Ensure PeerProperties answers with Warren's product and a 4.x version,
// which clients use to enable features.
func TestRawPeerProperties(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	props := c.peerProperties()
	if props["product"] != "Warren" {
		t.Errorf("product = %q, want Warren", props["product"])
	}
	if !strings.HasPrefix(props["version"], "4.") {
		t.Errorf("version = %q, want 4.x", props["version"])
	}
	for _, k := range []string{"cluster_name", "copyright", "information", "platform"} {
		if props[k] == "" {
			t.Errorf("property %q missing; got %v", k, props)
		}
	}
}

// Ensure SaslHandshake lists exactly RabbitMQ 4.x's default mechanisms.
func TestRawSaslHandshakeMechanisms(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.peerProperties()
	r := c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
	mechs := r.stringArray()
	if r.err != nil || !r.empty() {
		t.Fatalf("SaslHandshake response: err %v, %d bytes left", r.err, len(r.b))
	}
	if !slices.Equal(mechs, []string{"PLAIN", "AMQPLAIN", "ANONYMOUS"}) {
		t.Fatalf("mechanisms %q, want [PLAIN AMQPLAIN ANONYMOUS]", mechs)
	}
}

// Ensure a wrong password gets 0x08 and the connection is closed, and no
// Tune is sent.
func TestRawSaslWrongPassword(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.peerProperties()
	c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
	if code := c.authenticate("PLAIN", plain("guest", "wrong")); code != wire.CodeAuthenticationFailure {
		t.Fatalf("code 0x%02x, want 0x08", uint16(code))
	}
	c.expectClosed()
}

// Ensure an unknown mechanism gets 0x07 (and the connection is closed).
func TestRawSaslUnknownMechanism(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.peerProperties()
	if code := c.authenticate("SCRAM-SHA-256", []byte("n,,n=guest,r=abc")); code != wire.CodeSASLMechanismNotSupported {
		t.Fatalf("code 0x%02x, want 0x07", uint16(code))
	}
	c.expectClosed()
}

// amqplain builds AMQPLAIN data: an AMQP 0-9-1 field table without its
// length prefix, each field a short-string name, 'S' and a long string.
func amqplain(user, pass string) []byte {
	var b rawBuf
	for _, kv := range [][2]string{{"LOGIN", user}, {"PASSWORD", pass}} {
		b = b.u8(uint8(len(kv[0]))).raw([]byte(kv[0])...).u8('S').u32(uint32(len(kv[1]))).raw([]byte(kv[1])...)
	}
	return b
}

// Ensure AMQPLAIN authenticates guest/guest and refuses a wrong password
// or a malformed table.
func TestRawSaslAMQPLAIN(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	t.Run("ok", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		c.peerProperties()
		if code := c.authenticate("AMQPLAIN", amqplain("guest", "guest")); code != wire.CodeOK {
			t.Fatalf("code 0x%02x, want 0x01", uint16(code))
		}
		c.tune(0)
		c.expectCode(wire.KeyOpen, rawBuf(nil).str("/"), wire.CodeOK)
	})
	t.Run("wrong password", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		if code := c.authenticate("AMQPLAIN", amqplain("guest", "nope")); code != wire.CodeAuthenticationFailure {
			t.Fatalf("code 0x%02x, want 0x08", uint16(code))
		}
		c.expectClosed()
	})
	t.Run("truncated table", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		data := amqplain("guest", "guest")
		if code := c.authenticate("AMQPLAIN", data[:len(data)-2]); code != wire.CodeSASLError {
			t.Fatalf("code 0x%02x, want 0x09", uint16(code))
		}
		c.expectClosed()
	})
}

// Ensure the server sends Tune (frame max 1048576, heartbeat 60) right
// after a successful SaslAuthenticate, and not before.
func TestRawTuneAfterAuth(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.peerProperties()
	c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
	c.quiet() // nothing unasked for before authentication
	if code := c.authenticate("PLAIN", plain("guest", "guest")); code != wire.CodeOK {
		t.Fatalf("code 0x%02x", uint16(code))
	}
	f := c.expect(wire.KeyTune, 1)
	want := []byte{
		0x00, 0x00, 0x00, 0x0c, // size 12
		0x00, 0x14, // key Tune
		0x00, 0x01, // version 1
		0x00, 0x10, 0x00, 0x00, // frame max 1048576
		0x00, 0x00, 0x00, 0x3c, // heartbeat 60 s
	}
	if !bytes.Equal(f.raw, want) {
		t.Fatalf("Tune\n got % x\nwant % x", f.raw, want)
	}
	c.write(rawFrame(wire.KeyTune|wire.ResponseBit, 1, rawBuf(nil).u32(DefaultFrameMax).u32(0)))
	r := c.expectCode(wire.KeyOpen, rawBuf(nil).str("/"), wire.CodeOK)
	props := r.stringMap()
	if props["advertised_host"] != tb.host || props["advertised_port"] != fmt.Sprint(tb.port) {
		t.Errorf("Open properties %v, want advertised_host %s and advertised_port %d", props, tb.host, tb.port)
	}
}

// Ensure Open on a virtual host that does not exist gets 0x0c and the
// connection is closed.
func TestRawOpenMissingVHost(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.peerProperties()
	if code := c.authenticate("PLAIN", plain("guest", "guest")); code != wire.CodeOK {
		t.Fatalf("code 0x%02x", uint16(code))
	}
	c.tune(0)
	c.expectCode(wire.KeyOpen, rawBuf(nil).str("no-such-vhost"), wire.CodeVirtualHostAccessFailure)
	c.expectClosed()
}

// paddedPeerProperties returns a PeerProperties frame of exactly size
// bytes after the size field.
func paddedPeerProperties(corr uint32, size int) []byte {
	// key 2 + version 2 + corr 4 + count 4 + key "pad" 5 + value 2+n
	n := size - (2 + 2 + 4 + 4 + 5 + 2)
	return rawFrame(wire.KeyPeerProperties, 1, rawBuf(nil).u32(corr).strMap("pad", strings.Repeat("p", n)))
}

// Ensure a frame of 8192 bytes is accepted before authentication and one
// of 8193 drops the connection without a reply.
func TestRawPreAuthFrameLimit(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	f := paddedPeerProperties(1, initialFrameMax)
	if len(f) != 4+8192 {
		t.Fatalf("frame is %d bytes", len(f))
	}
	c.write(f)
	if code, _ := c.response(wire.KeyPeerProperties, 1); code != wire.CodeOK {
		t.Fatalf("code 0x%02x", uint16(code))
	}
	c.write(paddedPeerProperties(2, initialFrameMax+1))
	c.expectClosed()
}

// Ensure an oversize frame is refused from its header alone: the server
// does not wait for a body it will not accept.
func TestRawPreAuthOversizeHeaderOnly(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.write(rawBuf(nil).u32(1 << 30).u16(uint16(wire.KeyPeerProperties)).u16(1))
	c.expectClosed()
}

// Ensure a command other than the handshake's before authentication drops
// the connection without a reply.
func TestRawPreAuthUnexpectedFrame(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	for _, key := range []wire.Key{wire.KeyCreate, wire.KeyMetadata, 0x0042} {
		t.Run(fmt.Sprintf("0x%04x", uint16(key)), func(t *testing.T) {
			c := rawDial(t, tb.addr)
			c.request(key, rawBuf(nil).str("s").strMap())
			c.expectClosed()
		})
	}
}

// Ensure that once authenticated but before Open a frame over 8192
// bytes drops the connection, as RabbitMQ's pre-auth limit does.
func TestRawFrameTooLargeBeforeOpen(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.peerProperties()
	if code := c.authenticate("PLAIN", plain("guest", "guest")); code != wire.CodeOK {
		t.Fatalf("code 0x%02x", uint16(code))
	}
	c.tune(0)
	// Until Open, RabbitMQ's pre-auth limit drops the connection
	// without a Close.
	c.write(paddedPeerProperties(99, initialFrameMax+1))
	c.expectClosed()
}

// metadataOfSize returns a Metadata request of exactly size bytes after
// the size field.
func metadataOfSize(corr uint32, size int) []byte {
	// key 2 + version 2 + corr 4 + count 4 + string 2+n
	n := size - (2 + 2 + 4 + 4 + 2)
	return rawFrame(wire.KeyMetadata, 1, rawBuf(nil).u32(corr).u32(1).str(strings.Repeat("m", n)))
}

// Ensure that after Open the client's smaller frame max applies: a frame
// of exactly 4096 bytes is served, one of 4097 gets Close 0x0e.
func TestRawFrameTooLargeAfterOpen(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 4096)
	c.write(metadataOfSize(1000, 4096))
	f := c.expect(wire.KeyMetadata|wire.ResponseBit, 1)
	if got := binary.BigEndian.Uint32(f.body); got != 1000 {
		t.Fatalf("Metadata correlation id %d", got)
	}
	c.write(metadataOfSize(1001, 4097))
	c.expectServerClose(wire.CodeFrameTooLarge)

	// A client asking for more than the server's 1 MiB, or for no limit
	// (0), gets the server's: the header of a larger frame is refused.
	for _, clientMax := range []uint32{0, 4 << 20} {
		c := rawOpen(t, tb, clientMax)
		c.write(rawBuf(nil).u32(DefaultFrameMax + 1).u16(uint16(wire.KeyPublish)).u16(1))
		c.expectServerClose(wire.CodeFrameTooLarge)
	}
}

// Ensure an unknown command key after Open gets Close 0x0d.
func TestRawUnknownKeyAfterOpen(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	for _, key := range []wire.Key{0x0042, 0x7fff, wire.KeyTune, wire.KeyPublishConfirm, wire.KeyDeliver, wire.KeyPeerProperties | wire.ResponseBit} {
		t.Run(fmt.Sprintf("0x%04x", uint16(key)), func(t *testing.T) {
			c := rawOpen(t, tb, 0)
			c.write(rawFrame(key, 1, rawBuf(nil).u32(1).u32(2)))
			c.expectServerClose(wire.CodeUnknownFrame)
		})
	}
}

// Ensure a truncated or malformed known command after Open gets Close
// 0x0d: no panic, no hang, no half-applied command.
func TestRawMalformedCommands(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	setup := rawOpen(t, tb, 0)
	setup.create("m", wire.CodeOK)
	corr := func() rawBuf { return rawBuf(nil).u32(7) } // a fresh buffer each time: appends must not alias
	tests := []struct {
		name string
		key  wire.Key
		body rawBuf
	}{
		{"DeclarePublisher corr only", wire.KeyDeclarePublisher, corr()},
		{"DeclarePublisher stream past end", wire.KeyDeclarePublisher, corr().u8(1).str("").u16(10).raw('m')},
		{"Publish count past end", wire.KeyPublish, rawBuf(nil).u8(1).u32(5)},
		{"Publish count negative", wire.KeyPublish, rawBuf(nil).u8(1).u32(0xffffffff)},
		{"Publish id cut", wire.KeyPublish, rawBuf(nil).u8(1).u32(1).raw(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"QueryPublisherSequence string past end", wire.KeyQueryPublisherSequence, corr().u16(10).raw('a', 'b', 'c')},
		{"DeletePublisher corr only", wire.KeyDeletePublisher, corr()},
		{"Subscribe no offset type", wire.KeySubscribe, corr().u8(1).str("m")},
		{"Subscribe offset cut", wire.KeySubscribe, corr().u8(1).str("m").u16(wire.OffsetTypeOffset).raw(0, 0, 0)},
		{"Subscribe no credit", wire.KeySubscribe, corr().u8(1).str("m").u16(wire.OffsetTypeFirst)},
		{"Subscribe properties past end", wire.KeySubscribe, corr().u8(1).str("m").u16(wire.OffsetTypeFirst).u16(1).u32(1000)},
		{"Credit no credit", wire.KeyCredit, rawBuf(nil).u8(1)},
		{"StoreOffset offset cut", wire.KeyStoreOffset, rawBuf(nil).str("ref").str("m").raw(0, 0, 0, 0)},
		{"QueryOffset no stream", wire.KeyQueryOffset, corr().str("ref")},
		{"Unsubscribe corr only", wire.KeyUnsubscribe, corr()},
		{"Create map past end", wire.KeyCreate, corr().str("m2").u32(1000)},
		{"Create map negative", wire.KeyCreate, corr().str("m2").u32(0xffffffff)},
		{"Create value past end", wire.KeyCreate, corr().str("m2").u32(1).str("max-age").u16(100)},
		{"Create empty body", wire.KeyCreate, nil},
		{"Delete string cut", wire.KeyDelete, corr().raw(0)},
		{"Metadata count negative", wire.KeyMetadata, corr().u32(0xffffffff)},
		{"Metadata count past end", wire.KeyMetadata, corr().u32(3).str("m")},
		{"ExchangeCommandVersions count past end", wire.KeyExchangeCommandVersions, corr().u32(2).u16(1).u16(1).u16(1)},
		{"StreamStats corr only", wire.KeyStreamStats, corr()},
		{"ResolveOffsetSpec no type", wire.KeyResolveOffsetSpec, corr().str("m")},
		{"Route no super stream", wire.KeyRoute, corr().str("key")},
		{"Partitions corr only", wire.KeyPartitions, corr()},
		{"CreateSuperStream partitions past end", wire.KeyCreateSuperStream, corr().str("ss").u32(5)},
		{"DeleteSuperStream corr only", wire.KeyDeleteSuperStream, corr()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rawOpen(t, tb, 0)
			c.write(rawFrame(tt.key, 1, tt.body))
			c.expectServerClose(wire.CodeUnknownFrame)
		})
	}
	// Nothing was applied: m2 was not created, and the server still serves.
	c := rawOpen(t, tb, 0)
	c.expectCode(wire.KeyStreamStats, rawBuf(nil).str("m2"), wire.CodeStreamDoesNotExist)
	c.expectCode(wire.KeyStreamStats, rawBuf(nil).str("m"), wire.CodeOK)
}

// Ensure a frame too short to hold a key and version closes the
// connection promptly after Open.
func TestRawRuntFrames(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	for size := range 4 {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			t.Parallel()
			c := rawOpen(t, tb, 0)
			c.write(rawBuf(nil).u32(uint32(size)).raw(make([]byte, size)...))
			// Either a Close 0x0d or dropping the connection is fine; hanging is not.
			f, err := c.readFrame(2 * time.Second)
			switch {
			case err == nil && f.key == wire.KeyClose:
				c.expectClosed()
			case err == nil:
				t.Fatalf("got frame key 0x%04x (% x), want Close or the connection closed", uint16(f.key), head(f.raw))
			case isTimeout(err):
				t.Fatal("connection still open after 2s")
			case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
			default:
				t.Fatalf("read: %v", err)
			}
		})
	}
}

// Ensure Credit for an unknown subscription gets the one-way error frame
// 0x8009 (no correlation id) with code 0x04 and the subscription id.
func TestRawCreditUnknownSubscription(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.write(rawFrame(wire.KeyCredit, 1, rawBuf(nil).u8(42).u16(5)))
	f := c.next()
	want := []byte{
		0x00, 0x00, 0x00, 0x07, // size 7
		0x80, 0x09, // key Credit | 0x8000
		0x00, 0x01, // version 1
		0x00, 0x04, // code subscription id does not exist
		42, // subscription id
	}
	if !bytes.Equal(f.raw, want) {
		t.Fatalf("Credit error\n got % x\nwant % x", f.raw, want)
	}
	// The connection stays usable.
	c.expectCode(wire.KeyStreamStats, rawBuf(nil).str("none"), wire.CodeStreamDoesNotExist)
}

// Ensure Publish with an undeclared publisher id gets PublishError 0x12
// for every publishing id in the frame.
func TestRawPublishUnknownPublisher(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.publish(9, 10, "a", "b", "c")
	f := c.expect(wire.KeyPublishError, 1)
	want := []byte{
		0x00, 0x00, 0x00, 0x27, // size 39
		0x00, 0x04, // key PublishError
		0x00, 0x01, // version 1
		9,                      // publisher id
		0x00, 0x00, 0x00, 0x03, // 3 errors
		0, 0, 0, 0, 0, 0, 0, 10, 0x00, 0x12, // id 10: publisher does not exist
		0, 0, 0, 0, 0, 0, 0, 11, 0x00, 0x12, // id 11
		0, 0, 0, 0, 0, 0, 0, 12, 0x00, 0x12, // id 12
	}
	if !bytes.Equal(f.raw, want) {
		t.Fatalf("PublishError\n got % x\nwant % x", f.raw, want)
	}
}

// Ensure an invalid sub-batch entry gets PublishError 0x11 for it and for
// every entry after it in the frame (as RabbitMQ's reject_remaining does,
// so the client sees no gap in its publishing ids), while the entries
// before it are stored and confirmed.
func TestRawPublishInvalidSubBatch(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("p", wire.CodeOK)
	c.declarePublisher(1, "", "p", wire.CodeOK)
	badSubBatch := rawBuf(nil).
		u8(0x80 | 5<<4). // sub-batch, compression 5: not a known codec
		u16(1).          // 1 record
		u32(4).          // 4 bytes uncompressed
		u32(4).          // 4 bytes of data
		u32(0)           // the data: one empty record
	b := rawBuf(nil).u8(1).u32(4).
		u64(1).simpleEntry("before").
		u64(2).raw(badSubBatch...).
		u64(3).simpleEntry("after-1").
		u64(4).simpleEntry("after-2")
	c.write(rawFrame(wire.KeyPublish, 1, b))
	var errFrame, confirm rawIn
	for errFrame.raw == nil || confirm.raw == nil {
		switch f := c.next(); f.key {
		case wire.KeyPublishError:
			errFrame = f
		case wire.KeyPublishConfirm:
			confirm = f
		default:
			t.Fatalf("got frame key 0x%04x (% x)", uint16(f.key), head(f.raw))
		}
	}
	wantConfirm := rawFrame(wire.KeyPublishConfirm, 1, rawBuf(nil).u8(1).u32(1).u64(1))
	if !bytes.Equal(confirm.raw, wantConfirm) {
		t.Errorf("PublishConfirm\n got % x\nwant % x", confirm.raw, wantConfirm)
	}
	if len(errFrame.body) == 1+4+10 {
		t.Fatal("only the invalid entry was refused; the entries after it must be refused too")
	}
	wantErr := rawFrame(wire.KeyPublishError, 1, rawBuf(nil).u8(1).u32(3).
		u64(2).u16(uint16(wire.CodePreconditionFailed)).
		u64(3).u16(uint16(wire.CodePreconditionFailed)).
		u64(4).u16(uint16(wire.CodePreconditionFailed)))
	if !bytes.Equal(errFrame.raw, wantErr) {
		t.Errorf("PublishError\n got % x\nwant % x", errFrame.raw, wantErr)
	}
}

// Ensure declaring a publisher id twice gets 0x11, and on a missing stream
// 0x02; deleting an unknown publisher gets 0x12.
func TestRawDeclarePublisherErrors(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("dp", wire.CodeOK)
	c.declarePublisher(3, "", "dp", wire.CodeOK)
	c.declarePublisher(3, "", "dp", wire.CodePreconditionFailed)
	c.declarePublisher(4, "", "missing", wire.CodeStreamDoesNotExist)
	c.declarePublisher(5, "ref", "dp", wire.CodeOK)
	c.declarePublisher(6, "ref", "dp", wire.CodePreconditionFailed) // same reference and stream
	c.expectCode(wire.KeyDeletePublisher, rawBuf(nil).u8(3), wire.CodeOK)
	c.expectCode(wire.KeyDeletePublisher, rawBuf(nil).u8(3), wire.CodePublisherDoesNotExist)
	c.declarePublisher(3, "", "dp", wire.CodeOK) // the id is free again
}

// Ensure subscribing twice with one id gets 0x03, unsubscribing an unknown
// id gets 0x04, and a missing stream gets 0x02.
func TestRawSubscribeErrors(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("sub", wire.CodeOK)
	c.subscribe(1, "sub", 1, wire.CodeOK)
	c.subscribe(1, "sub", 1, wire.CodeSubscriptionIDExists)
	c.subscribe(2, "missing", 1, wire.CodeStreamDoesNotExist)
	c.expectCode(wire.KeyUnsubscribe, rawBuf(nil).u8(9), wire.CodeSubscriptionIDDoesNotExist)
	c.expectCode(wire.KeyUnsubscribe, rawBuf(nil).u8(1), wire.CodeOK)
	c.expectCode(wire.KeyUnsubscribe, rawBuf(nil).u8(1), wire.CodeSubscriptionIDDoesNotExist)
	c.subscribe(1, "sub", 1, wire.CodeOK) // the id is free again
	// An unknown offset type, and a single active consumer without a
	// name, get 0x11.
	c.expectCode(wire.KeySubscribe, rawBuf(nil).u8(5).str("sub").u16(9).u16(1), wire.CodePreconditionFailed)
	c.expectCode(wire.KeySubscribe, rawBuf(nil).u8(5).str("sub").u16(wire.OffsetTypeFirst).u16(1).
		strMap("single-active-consumer", "true"), wire.CodePreconditionFailed)
}

// Ensure ResolveOffsetSpec answers with offset type 4 and the offset a
// subscription with the spec would start at.
func TestRawResolveOffsetSpec(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("ro", wire.CodeOK)
	c.declarePublisher(1, "", "ro", wire.CodeOK)
	for i := range 3 {
		c.publish(1, uint64(2*i+1), "a", "b") // chunks 0, 2 and 4
		c.expectConfirm(1, uint64(2*i+1), uint64(2*i+2))
	}
	for _, tt := range []struct {
		name string
		spec rawBuf
		want uint64
	}{
		{"first", rawBuf(nil).u16(wire.OffsetTypeFirst), 0},
		{"last", rawBuf(nil).u16(wire.OffsetTypeLast), 4},
		{"next", rawBuf(nil).u16(wire.OffsetTypeNext), 6},
	} {
		r := c.expectCode(wire.KeyResolveOffsetSpec, rawBuf(nil).str("ro").raw(tt.spec...), wire.CodeOK)
		typ, off := r.u16(), r.u64()
		if r.err != nil || !r.empty() || typ != wire.OffsetTypeOffset || off != tt.want {
			t.Errorf("%s: type %d offset %d (err %v, %d bytes left), want type 4 offset %d",
				tt.name, typ, off, r.err, len(r.b), tt.want)
		}
	}
	c.expectCode(wire.KeyResolveOffsetSpec, rawBuf(nil).str("missing").u16(wire.OffsetTypeFirst), wire.CodeStreamDoesNotExist)
	c.expectCode(wire.KeyResolveOffsetSpec, rawBuf(nil).str("ro").u16(9), wire.CodePreconditionFailed)
}

// Ensure QueryOffset with nothing stored gets 0x13 and offset 0, and
// returns what StoreOffset stored.
func TestRawQueryOffset(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("qo", wire.CodeOK)
	r := c.expectCode(wire.KeyQueryOffset, rawBuf(nil).str("app").str("qo"), wire.CodeNoOffset)
	if off := r.u64(); off != 0 || r.err != nil || !r.empty() {
		t.Fatalf("offset %d, err %v, %d bytes left; want 0", off, r.err, len(r.b))
	}
	c.expectCode(wire.KeyQueryOffset, rawBuf(nil).str("app").str("missing"), wire.CodeStreamDoesNotExist)
	c.write(rawFrame(wire.KeyStoreOffset, 1, rawBuf(nil).str("app").str("qo").u64(77)))
	r = c.expectCode(wire.KeyQueryOffset, rawBuf(nil).str("app").str("qo"), wire.CodeOK)
	if off := r.u64(); off != 77 {
		t.Fatalf("offset %d, want 77", off)
	}
}

// Ensure Create refuses invalid arguments and names with 0x11, an
// existing stream with 0x05 when its arguments are equivalent and 0x11
// when they are not, a queue's name with 0x11 (RabbitMQ's
// validation_failed for an inequivalent existing queue), and Delete of a
// missing stream gets 0x02.
func TestRawCreateDeleteErrors(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("c1", wire.CodePreconditionFailed, "stream-filter-size-bytes", "5")
	c.create("c1", wire.CodePreconditionFailed, "max-age", "abc")
	c.create("c1", wire.CodePreconditionFailed, "max-length-bytes", "-1")
	c.create("amq.x", wire.CodePreconditionFailed)
	c.create("", wire.CodePreconditionFailed)
	c.create("c1", wire.CodeOK, "max-age", "1h", "stream-filter-size-bytes", "32")
	c.create("c1", wire.CodeStreamAlreadyExists, "stream-filter-size-bytes", "32", "max-age", "1h")
	c.create("c1", wire.CodePreconditionFailed)
	c.create("c1", wire.CodePreconditionFailed, "max-age", "2h", "stream-filter-size-bytes", "32")
	c.create("c1", wire.CodePreconditionFailed, "max-age", "1h", "stream-filter-size-bytes", "32", "max-length-bytes", "1000")
	if _, _, _, err := tb.broker.DeclareQueue(queues.DeclareOptions{Def: queues.QueueDef{VHost: "/", Name: "classic", Durable: true}}); err != nil {
		t.Fatal(err)
	}
	c.create("classic", wire.CodePreconditionFailed)
	c.expectCode(wire.KeyDelete, rawBuf(nil).str("missing"), wire.CodeStreamDoesNotExist)
	c.expectCode(wire.KeyDelete, rawBuf(nil).str("c1"), wire.CodeOK)
	c.expectCode(wire.KeyDelete, rawBuf(nil).str("c1"), wire.CodeStreamDoesNotExist)
	c.create("c1", wire.CodeOK)
	// CR and LF are stripped from names, as RabbitMQ does.
	c.create("cr\r\nlf", wire.CodeOK)
	c.expectCode(wire.KeyStreamStats, rawBuf(nil).str("crlf"), wire.CodeOK)
}

// Ensure Metadata (which has no top-level code) lists this broker and,
// for a missing stream, code 0x02 and leader 0xffff.
func TestRawMetadata(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("md", wire.CodeOK)
	corr := c.request(wire.KeyMetadata, rawBuf(nil).u32(2).str("nope").str("md"))
	f := c.expect(wire.KeyMetadata|wire.ResponseBit, 1)
	want := rawFrame(wire.KeyMetadata|wire.ResponseBit, 1, rawBuf(nil).
		u32(corr).
		u32(1).               // 1 broker
		u16(0).               //   reference 0
		str(tb.host).         //   host
		u32(uint32(tb.port)). //   port
		u32(2).               // 2 streams
		str("nope").          //   name
		u16(0x02).            //   stream does not exist
		u16(0xffff).          //   no leader
		u32(0).               //   no replicas
		str("md").            //   name
		u16(0x01).            //   ok
		u16(0).               //   leader: broker 0
		u32(0))               //   no replicas
	if !bytes.Equal(f.raw, want) {
		t.Fatalf("Metadata\n got % x\nwant % x", f.raw, want)
	}
}

// Ensure StreamStats on an empty stream reports -1 for the first,
// committed and last chunk ids, and 0x02 for a missing stream.
func TestRawStreamStatsEmpty(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("st", wire.CodeOK)
	stats := c.streamStats("st")
	want := map[string]int64{"first_chunk_id": -1, "committed_chunk_id": -1, "last_chunk_id": -1}
	if len(stats) != len(want) {
		t.Fatalf("stats %v, want %v", stats, want)
	}
	for k, v := range want {
		if got, ok := stats[k]; !ok || got != v {
			t.Errorf("%s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	r := c.expectCode(wire.KeyStreamStats, rawBuf(nil).str("missing"), wire.CodeStreamDoesNotExist)
	if n := r.u32(); n != 0 || !r.empty() {
		t.Errorf("error response carries %d stats and %d more bytes, want an empty map", n, len(r.b))
	}
}

// Ensure a client Close gets a Close response and the connection ends.
func TestRawClientClose(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	corr := c.request(wire.KeyClose, rawBuf(nil).u16(uint16(wire.CodeOK)).str("bye"))
	f := c.next()
	want := rawFrame(wire.KeyClose|wire.ResponseBit, 1, rawBuf(nil).u32(corr).u16(uint16(wire.CodeOK)))
	if !bytes.Equal(f.raw, want) {
		t.Fatalf("Close response\n got % x\nwant % x", f.raw, want)
	}
	c.expectClosed()
}

// deliverChunk is a Deliver frame split into its parts.
type deliverChunk struct {
	sub       uint8
	committed uint64 // version 2 only
	header    []byte // 48 bytes
	data      []byte
}

// checkDeliver checks a Deliver frame's layout: size, key, version, sub
// id, [committed], 48-byte header with bytes 45-47 zero, DataLen bytes of
// entries whose CRC32 (IEEE) matches the header.
func checkDeliver(t testing.TB, f rawIn, version uint16) deliverChunk {
	t.Helper()
	if f.key != wire.KeyDeliver || f.version != version {
		t.Fatalf("got frame key 0x%04x version %d, want Deliver version %d", uint16(f.key), f.version, version)
	}
	var d deliverChunk
	body := f.body
	d.sub, body = body[0], body[1:]
	if version == 2 {
		d.committed, body = binary.BigEndian.Uint64(body), body[8:]
	}
	if len(body) < 48 {
		t.Fatalf("Deliver of %d bytes has no chunk header", len(f.raw))
	}
	d.header, d.data = body[:48], body[48:]
	dataLen := binary.BigEndian.Uint32(d.header[36:])
	if int(dataLen) != len(d.data) {
		t.Fatalf("header DataLen %d, frame carries %d data bytes", dataLen, len(d.data))
	}
	wantSize := 2 + 2 + 1 + 48 + int(dataLen)
	if version == 2 {
		wantSize += 8
	}
	if size := binary.BigEndian.Uint32(f.raw); int(size) != wantSize {
		t.Fatalf("frame size %d, want 2+2+1(+8)+48+DataLen = %d", size, wantSize)
	}
	if d.header[0] != 0x50 {
		t.Errorf("magic/version byte 0x%02x, want 0x50", d.header[0])
	}
	if d.header[1] != 0 {
		t.Errorf("chunk type %d, want 0 (user)", d.header[1])
	}
	if !bytes.Equal(d.header[45:48], []byte{0, 0, 0}) {
		t.Errorf("header bytes 45-47 = % x, want 00 00 00", d.header[45:48])
	}
	if got, want := crc32.ChecksumIEEE(d.data), binary.BigEndian.Uint32(d.header[32:]); got != want {
		t.Errorf("CRC32 of the data %08x, header says %08x", got, want)
	}
	return d
}

// chunkID returns a Deliver chunk's id (header bytes 24-31).
func (d deliverChunk) chunkID() uint64 { return binary.BigEndian.Uint64(d.header[24:]) }

// simpleEntries splits data into simple entries.
func simpleEntries(t testing.TB, data []byte) []string {
	t.Helper()
	var out []string
	for len(data) > 0 {
		if len(data) < 4 || data[0]&0x80 != 0 {
			t.Fatalf("not a simple entry: % x", head(data))
		}
		n := binary.BigEndian.Uint32(data)
		if int(n) > len(data)-4 {
			t.Fatalf("entry of %d bytes, %d left", n, len(data)-4)
		}
		out = append(out, string(data[4:4+n]))
		data = data[4+n:]
	}
	return out
}

// Ensure a Deliver v1 frame after Subscribe carries sub id, the 48-byte
// chunk header (bytes 45-47 zero) and exactly DataLen bytes of entries
// whose CRC32 matches, and the entries are what was published.
func TestRawDeliverLayout(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("d", wire.CodeOK)
	c.declarePublisher(1, "", "d", wire.CodeOK)
	bodies := []string{"alpha", "beta", "", "gamma-gamma"}
	before := time.Now()
	c.publish(1, 1, bodies...)
	c.expectConfirm(1, 1, 2, 3, 4)
	c.subscribe(7, "d", 10, wire.CodeOK)
	d := checkDeliver(t, c.next(), 1)
	if d.sub != 7 {
		t.Errorf("subscription id %d, want 7", d.sub)
	}
	h := d.header
	if n := binary.BigEndian.Uint16(h[2:]); n != 4 {
		t.Errorf("NumEntries %d, want 4", n)
	}
	if n := binary.BigEndian.Uint32(h[4:]); n != 4 {
		t.Errorf("NumRecords %d, want 4", n)
	}
	if ts := time.UnixMilli(int64(binary.BigEndian.Uint64(h[8:]))); ts.Before(before.Add(-time.Second)) || ts.After(time.Now().Add(time.Second)) {
		t.Errorf("Timestamp %v, want about %v", ts, before)
	}
	if id := d.chunkID(); id != 0 {
		t.Errorf("ChunkId %d, want 0", id)
	}
	if got := simpleEntries(t, d.data); !slices.Equal(got, bodies) {
		t.Errorf("entries %q, want %q", got, bodies)
	}
	c.quiet()
}

// Ensure a client that announces Deliver v2 gets Deliver v2 frames with
// the committed chunk id after the subscription id.
func TestRawDeliverV2Layout(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	r := c.expectCode(wire.KeyExchangeCommandVersions, rawBuf(nil).u32(2).
		u16(uint16(wire.KeyPublish)).u16(1).u16(2).
		u16(uint16(wire.KeyDeliver)).u16(1).u16(2), wire.CodeOK)
	versions := map[wire.Key][2]uint16{}
	for range r.count(6) {
		k, lo, hi := wire.Key(r.u16()), r.u16(), r.u16()
		versions[k] = [2]uint16{lo, hi}
	}
	if r.err != nil || !r.empty() {
		t.Fatalf("ExchangeCommandVersions response: err %v, %d bytes left", r.err, len(r.b))
	}
	if versions[wire.KeyDeliver] != [2]uint16{1, 2} || versions[wire.KeyPublish] != [2]uint16{1, 2} {
		t.Errorf("server versions %v, want deliver and publish 1-2", versions)
	}
	c.create("d2", wire.CodeOK)
	c.declarePublisher(1, "", "d2", wire.CodeOK)
	c.publish(1, 1, "one")
	c.expectConfirm(1, 1)
	c.publish(1, 2, "two")
	c.expectConfirm(1, 2)
	c.subscribe(3, "d2", 10, wire.CodeOK)
	for i, want := range []string{"one", "two"} {
		d := checkDeliver(t, c.next(), 2)
		if d.sub != 3 || d.chunkID() != uint64(i) || d.committed != 1 {
			t.Errorf("chunk %d: sub %d, chunk id %d, committed %d; want 3, %d, 1", i, d.sub, d.chunkID(), d.committed, i)
		}
		if got := simpleEntries(t, d.data); !slices.Equal(got, []string{want}) {
			t.Errorf("chunk %d entries %q, want [%s]", i, got, want)
		}
	}
}

// Ensure credit counts chunks: a subscription with credit 1 to a stream of
// 3 chunks gets exactly one Deliver until it sends Credit.
func TestRawCreditCountsChunks(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("cr", wire.CodeOK)
	c.declarePublisher(1, "", "cr", wire.CodeOK)
	for i := range 3 {
		// Two entries per chunk: credit is per chunk, not per message.
		c.publish(1, uint64(2*i+1), fmt.Sprintf("m%d", 2*i), fmt.Sprintf("m%d", 2*i+1))
		c.expectConfirm(1, uint64(2*i+1), uint64(2*i+2))
	}
	if stats := c.streamStats("cr"); stats["last_chunk_id"] != 4 || stats["committed_chunk_id"] != 4 {
		t.Fatalf("stats %v, want 3 chunks (last and committed chunk id 4)", stats)
	}
	c.subscribe(1, "cr", 1, wire.CodeOK)
	if d := checkDeliver(t, c.next(), 1); d.chunkID() != 0 {
		t.Fatalf("first chunk id %d, want 0", d.chunkID())
	}
	c.quiet()
	c.write(rawFrame(wire.KeyCredit, 1, rawBuf(nil).u8(1).u16(1)))
	if d := checkDeliver(t, c.next(), 1); d.chunkID() != 2 {
		t.Fatalf("second chunk id %d, want 2", d.chunkID())
	}
	c.quiet()
	c.write(rawFrame(wire.KeyCredit, 1, rawBuf(nil).u8(1).u16(5)))
	d := checkDeliver(t, c.next(), 1)
	if d.chunkID() != 4 {
		t.Fatalf("third chunk id %d, want 4", d.chunkID())
	}
	if got := simpleEntries(t, d.data); !slices.Equal(got, []string{"m4", "m5"}) {
		t.Errorf("third chunk entries %q", got)
	}
	c.quiet()
	// With credit left, a new chunk is delivered as soon as it is committed.
	c.publish(1, 7, "m6")
	c.expectConfirmOrDeliver(1, 7, 6)
}

// expectConfirmOrDeliver reads the confirm of publishing id id (publisher
// pubID) and the Deliver v1 of chunk chunkID, in either order.
func (c *rawConn) expectConfirmOrDeliver(pubID uint8, id, chunkID uint64) {
	t := c.t
	t.Helper()
	var confirmed, delivered bool
	for !confirmed || !delivered {
		f := c.next()
		switch f.key {
		case wire.KeyPublishConfirm:
			want := rawFrame(wire.KeyPublishConfirm, 1, rawBuf(nil).u8(pubID).u32(1).u64(id))
			if !bytes.Equal(f.raw, want) {
				t.Fatalf("PublishConfirm\n got % x\nwant % x", f.raw, want)
			}
			confirmed = true
		case wire.KeyDeliver:
			if d := checkDeliver(t, f, 1); d.chunkID() != chunkID {
				t.Fatalf("chunk id %d, want %d", d.chunkID(), chunkID)
			}
			delivered = true
		default:
			t.Fatalf("got frame key 0x%04x", uint16(f.key))
		}
	}
}

// Ensure deleting a stream tells a connection that publishes to and
// consumes from it with MetadataUpdate 0x06, and drops its publisher and
// subscription.
func TestRawDeleteSendsMetadataUpdate(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("gone", wire.CodeOK)
	c.declarePublisher(1, "", "gone", wire.CodeOK)
	c.subscribe(2, "gone", 1, wire.CodeOK)
	other := rawOpen(t, tb, 0)
	other.expectCode(wire.KeyDelete, rawBuf(nil).str("gone"), wire.CodeOK)
	f := c.next()
	want := []byte{
		0x00, 0x00, 0x00, 0x0c, // size 12
		0x00, 0x10, // key MetadataUpdate
		0x00, 0x01, // version 1
		0x00, 0x06, // code stream not available
		0x00, 0x04, 'g', 'o', 'n', 'e', // stream
	}
	if !bytes.Equal(f.raw, want) {
		t.Fatalf("MetadataUpdate\n got % x\nwant % x", f.raw, want)
	}
	other.quiet() // the deleting connection had nothing on the stream
	c.expectCode(wire.KeyUnsubscribe, rawBuf(nil).u8(2), wire.CodeSubscriptionIDDoesNotExist)
	c.expectCode(wire.KeyDeletePublisher, rawBuf(nil).u8(1), wire.CodePublisherDoesNotExist)
}

// Ensure a publisher with a reference has its publishing ids deduplicated:
// a repeated id is confirmed but not stored, and QueryPublisherSequence
// returns the last id.
func TestRawPublisherDeduplication(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("dd", wire.CodeOK)
	r := c.expectCode(wire.KeyQueryPublisherSequence, rawBuf(nil).str("app").str("dd"), wire.CodeOK)
	if seq := r.u64(); seq != 0 {
		t.Fatalf("sequence %d before publishing, want 0", seq)
	}
	c.expectCode(wire.KeyQueryPublisherSequence, rawBuf(nil).str("app").str("missing"), wire.CodeStreamDoesNotExist)
	c.declarePublisher(1, strings.Repeat("r", 256), "dd", wire.CodePreconditionFailed) // reference over 255 bytes
	c.declarePublisher(1, "app", "dd", wire.CodeOK)
	c.publish(1, 5, "five")
	c.expectConfirm(1, 5)
	c.publish(1, 5, "five again")
	c.expectConfirm(1, 5)
	c.publish(1, 6, "six")
	c.expectConfirm(1, 6)
	r = c.expectCode(wire.KeyQueryPublisherSequence, rawBuf(nil).str("app").str("dd"), wire.CodeOK)
	if seq := r.u64(); seq != 6 {
		t.Fatalf("sequence %d, want 6", seq)
	}
	c.subscribe(1, "dd", 10, wire.CodeOK)
	var got []string
	for len(got) < 2 {
		got = append(got, simpleEntries(t, checkDeliver(t, c.next(), 1).data)...)
	}
	if !slices.Equal(got, []string{"five", "six"}) {
		t.Fatalf("stored %q, want [five six]", got)
	}
	c.quiet()
}

// Ensure ExchangeCommandVersions sent while a subscription is delivering
// is safe (run with -race).
func TestRawDeliverVersionSwitchWhileDelivering(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("sw", wire.CodeOK)
	c.declarePublisher(1, "", "sw", wire.CodeOK)
	const chunks = 40
	for i := range chunks {
		c.publish(1, uint64(i+1), "x")
		c.expectConfirm(1, uint64(i+1))
	}
	c.subscribe(1, "sw", 1000, wire.CodeOK)
	for range 20 {
		c.write(rawFrame(wire.KeyExchangeCommandVersions, 1, rawBuf(nil).u32(100).u32(1).u16(uint16(wire.KeyDeliver)).u16(1).u16(2)))
	}
	for n := 0; n < chunks; {
		f := c.next()
		switch f.key {
		case wire.KeyDeliver:
			d := checkDeliver(t, f, f.version)
			if d.chunkID() != uint64(n) {
				t.Fatalf("chunk id %d, want %d", d.chunkID(), n)
			}
			n++
		case wire.KeyExchangeCommandVersions | wire.ResponseBit:
		default:
			t.Fatalf("got frame key 0x%04x", uint16(f.key))
		}
	}
}

// Ensure that after Unsubscribe's response no Deliver for the subscription
// follows, even with deliveries in flight.
func TestRawUnsubscribeStopsDeliveries(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("un", wire.CodeOK)
	c.declarePublisher(1, "", "un", wire.CodeOK)
	for i := range 20 {
		c.publish(1, uint64(i+1), "x")
		c.expectConfirm(1, uint64(i+1))
	}
	c.write(rawFrame(wire.KeySubscribe, 1, rawBuf(nil).u32(50).u8(4).str("un").u16(wire.OffsetTypeFirst).u16(1000)))
	corr := c.request(wire.KeyUnsubscribe, rawBuf(nil).u8(4))
	var subscribed bool
	for {
		f := c.next()
		switch {
		case f.key == wire.KeySubscribe|wire.ResponseBit:
			subscribed = true
		case f.key == wire.KeyDeliver:
			if !subscribed {
				t.Fatal("Deliver before the Subscribe response")
			}
			checkDeliver(t, f, 1)
		case f.key == wire.KeyUnsubscribe|wire.ResponseBit:
			r := f.fields()
			if got, code := r.u32(), wire.Code(r.u16()); got != corr || code != wire.CodeOK {
				t.Fatalf("Unsubscribe response corr %d code 0x%02x", got, uint16(code))
			}
			c.quiet()
			return
		default:
			t.Fatalf("got frame key 0x%04x", uint16(f.key))
		}
	}
}

// Ensure the server sends heartbeats at the interval the client tuned and
// closes a connection whose client stays silent.
func TestRawHeartbeat(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawDial(t, tb.addr)
	c.peerProperties()
	if code := c.authenticate("PLAIN", plain("guest", "guest")); code != wire.CodeOK {
		t.Fatalf("code 0x%02x", uint16(code))
	}
	c.expect(wire.KeyTune, 1)
	c.write(rawFrame(wire.KeyTune|wire.ResponseBit, 1, rawBuf(nil).u32(0).u32(1))) // heartbeat 1 s
	c.expectCode(wire.KeyOpen, rawBuf(nil).str("/"), wire.CodeOK)
	f, err := c.readAnyFrame(3 * time.Second)
	if err != nil {
		t.Fatalf("no heartbeat: %v", err)
	}
	if want := []byte{0x00, 0x00, 0x00, 0x04, 0x00, 0x17, 0x00, 0x01}; !bytes.Equal(f.raw, want) {
		t.Fatalf("heartbeat\n got % x\nwant % x", f.raw, want)
	}
	// Silent for more than two intervals: the server gives up.
	start := time.Now()
	c.expectClosed()
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("closed after %v of silence, want at least the heartbeat interval", waited)
	}
}

// Ensure a command in a version the server does not read is an unknown
// frame (Close 0x0d after Open; the connection dropped before), as
// RabbitMQ's parser knows each command in its versions only, rather than
// a future layout misread as version 1.
func TestRawUnsupportedVersions(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	for _, tc := range []struct {
		key     wire.Key
		version uint16
		body    rawBuf
	}{
		{wire.KeyCreate, 2, rawBuf(nil).u32(1).str("v2").u32(0)},
		{wire.KeySubscribe, 2, rawBuf(nil).u32(1).u8(1).str("v2").u16(wire.OffsetTypeFirst).u16(1)},
		{wire.KeyPublish, 3, rawBuf(nil).u8(1).u32(0)},
		{wire.KeyPublish, 0, rawBuf(nil).u8(1).u32(0)},
		{wire.KeyCredit, 2, rawBuf(nil).u8(1).u16(1)},
		{wire.KeyMetadata, 0, rawBuf(nil).u32(1).u32(0)},
		{wire.KeyHeartbeat, 2, nil},
		{wire.KeyClose, 2, rawBuf(nil).u32(1).u16(uint16(wire.CodeOK)).str("bye")},
	} {
		t.Run(fmt.Sprintf("0x%04x v%d", uint16(tc.key), tc.version), func(t *testing.T) {
			c := rawOpen(t, tb, 0)
			c.write(rawFrame(tc.key, tc.version, tc.body))
			c.expectServerClose(wire.CodeUnknownFrame)
		})
	}
	t.Run("PeerProperties v2 before open", func(t *testing.T) {
		c := rawDial(t, tb.addr)
		c.write(rawFrame(wire.KeyPeerProperties, 2, rawBuf(nil).u32(1).u32(0)))
		c.expectClosed()
	})
	// Version 2 of Publish is read (filter values), and the stream was
	// not created by the refused Create.
	c := rawOpen(t, tb, 0)
	c.expectCode(wire.KeyStreamStats, rawBuf(nil).str("v2"), wire.CodeStreamDoesNotExist)
}

// Ensure negative string and bytes lengths other than -1 are malformed:
// Close 0x0d after Open, the connection dropped before.
func TestRawNegativeLengths(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.write(rawFrame(wire.KeyCreate, 1, rawBuf(nil).u32(1).u16(0xfffe).raw('a', 'b')))
	c.expectServerClose(wire.CodeUnknownFrame)

	c = rawDial(t, tb.addr)
	c.peerProperties()
	c.expectCode(wire.KeySaslHandshake, nil, wire.CodeOK)
	c.write(rawFrame(wire.KeySaslAuthenticate, 1, rawBuf(nil).u32(9).str("PLAIN").u32(0xfffffffb)))
	c.expectClosed()
}

// Ensure that after a client's Close the server reads what the client
// still had in flight and ends with a clean EOF rather than a reset.
func TestRawCloseDrainsLateFrames(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.corr++
	b := rawFrame(wire.KeyClose, 1, rawBuf(nil).u32(c.corr).u16(uint16(wire.CodeOK)).str("bye"))
	pub := rawFrame(wire.KeyPublish, 1, rawBuf(nil).u8(1).u32(1).u64(1).simpleEntry(strings.Repeat("x", 16<<10)))
	for len(b) < 1<<20 {
		b = append(b, pub...)
	}
	c.write(b)
	if code, _ := c.response(wire.KeyClose, c.corr); code != wire.CodeOK {
		t.Fatalf("Close response code 0x%02x", uint16(code))
	}
	c.write(b[:64<<10]) // still writing: the server must not reset
	c.nc.SetReadDeadline(time.Now().Add(rawTimeout))
	n, err := c.nc.Read(make([]byte, 4096))
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after the Close response: %d bytes, %v; want a clean EOF", n, err)
	}
}

// Ensure a subscription whose reader fails (here a chunk header damaged
// on disk after it was written) is dropped and the client told the stream
// is not available, rather than left waiting for deliveries that never
// come; the connection and its other commands go on.
func TestRawReadFailureEndsSubscription(t *testing.T) {
	t.Parallel()
	tb := startBroker(t, brokerOpts{})
	c := rawOpen(t, tb, 0)
	c.create("dmg", wire.CodeOK)
	c.declarePublisher(1, "", "dmg", wire.CodeOK)
	c.publish(1, 1, "a", "b")
	c.expectConfirm(1, 1, 2)
	c.publish(1, 3, "c")
	c.expectConfirm(1, 3)

	s, err := tb.broker.Stream("/", "dmg")
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.NewReader(osiris.First(), osiris.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var second osiris.Chunk
	for i := range 2 {
		ch, ok, err := r.TryNext()
		if err != nil || !ok {
			t.Fatalf("chunk %d: %v %v", i, ok, err)
		}
		second = ch
	}
	if second.Header.ChunkID != 2 {
		t.Fatalf("second chunk id %d", second.Header.ChunkID)
	}
	f, err := os.OpenFile(second.File.Name(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, second.Pos); err != nil { // the magic byte
		t.Fatal(err)
	}
	f.Close()
	r.Close()

	c.subscribe(7, "dmg", 10, wire.CodeOK)
	c.expectDeliveries(map[uint8][]string{7: {"a", "b"}})
	f2 := c.expect(wire.KeyMetadataUpdate, 1)
	if want := rawFrame(wire.KeyMetadataUpdate, 1, rawBuf(nil).u16(uint16(wire.CodeStreamNotAvailable)).str("dmg")); !bytes.Equal(f2.raw, want) {
		t.Fatalf("MetadataUpdate\n got % x\nwant % x", f2.raw, want)
	}
	// The subscription is gone; the id may be used again.
	c.expectCode(wire.KeyUnsubscribe, rawBuf(nil).u8(7), wire.CodeSubscriptionIDDoesNotExist)
	c.publish(1, 4, "d")
	c.expectConfirm(1, 4)
}
