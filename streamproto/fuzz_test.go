package streamproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/warren-mq/warren/queues"
	"github.com/warren-mq/warren/streamproto/wire"
)

// startFuzzBroker starts the broker FuzzFrames talks to. FuzzFrames runs
// once per process (in the fuzz coordinator and in each worker), so this
// is one broker per process, shared by every input, and stopped by the
// fuzz target's cleanup.
func startFuzzBroker(f *testing.F) string {
	f.Helper()
	b, err := queues.Open(f.TempDir(), queues.Options{})
	if err != nil {
		f.Fatalf("queues.Open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		f.Fatal(err)
	}
	srv, err := NewServer(Config{Broker: b, Advertise: ln.Addr().String(), HandshakeTimeout: 5 * time.Second})
	if err != nil {
		b.Close()
		f.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	f.Cleanup(func() {
		srv.Close()
		<-done
		b.Close()
	})
	return ln.Addr().String()
}

// fuzzSeedFrames returns valid frames of every client command, for the
// stream "fz" (created by the first), ending with Delete and Close.
func fuzzSeedFrames() [][]byte {
	corr := func(c uint32) rawBuf { return rawBuf(nil).u32(c) }
	entry := rawBuf(nil).simpleEntry("hello")
	subBatch := rawBuf(nil).u8(0x80).u16(2).u32(10).u32(10).simpleEntry("a").simpleEntry("b")
	return [][]byte{
		rawFrame(wire.KeyCreate, 1, corr(1).str("fz").strMap("max-age", "1h", "stream-filter-size-bytes", "16")),
		// Before any Subscribe: see TestRawDeliverVersionSwitchWhileDelivering.
		rawFrame(wire.KeyExchangeCommandVersions, 1, corr(9).u32(1).u16(uint16(wire.KeyDeliver)).u16(1).u16(2)),
		rawFrame(wire.KeyDeclarePublisher, 1, corr(2).u8(1).str("ref").str("fz")),
		rawFrame(wire.KeyPublish, 1, rawBuf(nil).u8(1).u32(2).u64(1).raw(entry...).u64(2).raw(subBatch...)),
		rawFrame(wire.KeyPublish, 2, rawBuf(nil).u8(1).u32(2).u64(3).str("filter").raw(entry...).u64(4).u16(0xffff).raw(entry...)),
		rawFrame(wire.KeyQueryPublisherSequence, 1, corr(3).str("ref").str("fz")),
		rawFrame(wire.KeySubscribe, 1, corr(4).u8(1).str("fz").u16(wire.OffsetTypeFirst).u16(2)),
		rawFrame(wire.KeySubscribe, 1, corr(5).u8(2).str("fz").u16(wire.OffsetTypeOffset).u64(1).u16(1).strMap("filter.0", "filter", "match-unfiltered", "true")),
		rawFrame(wire.KeyCredit, 1, rawBuf(nil).u8(1).u16(3)),
		rawFrame(wire.KeyStoreOffset, 1, rawBuf(nil).str("app").str("fz").u64(2)),
		rawFrame(wire.KeyQueryOffset, 1, corr(6).str("app").str("fz")),
		rawFrame(wire.KeyUnsubscribe, 1, corr(7).u8(1)),
		rawFrame(wire.KeyMetadata, 1, corr(8).u32(2).str("fz").str("none")),
		rawFrame(wire.KeyStreamStats, 1, corr(10).str("fz")),
		rawFrame(wire.KeyResolveOffsetSpec, 1, corr(11).str("fz").u16(wire.OffsetTypeTimestamp).u64(0).strMap()),
		rawFrame(wire.KeyRoute, 1, corr(12).str("key").str("super")),
		rawFrame(wire.KeyPartitions, 1, corr(13).str("super")),
		rawFrame(wire.KeyCreateSuperStream, 1, corr(14).str("super").u32(1).str("super-0").u32(1).str("0").strMap()),
		rawFrame(wire.KeyDeleteSuperStream, 1, corr(15).str("super")),
		rawFrame(wire.KeyConsumerUpdate|wire.ResponseBit, 1, corr(16).u16(uint16(wire.CodeOK)).u16(wire.OffsetTypeNext)),
		rawFrame(wire.KeyHeartbeat, 1, nil),
		rawFrame(wire.KeyDeletePublisher, 1, corr(17).u8(1)),
		rawFrame(wire.KeyDelete, 1, corr(18).str("fz")),
		rawFrame(wire.KeyClose, 1, corr(19).u16(uint16(wire.CodeOK)).str("bye")),
	}
}

// FuzzFrames writes arbitrary bytes as frames to an open connection. The
// server must not panic (that would crash the test process), must finish
// the connection once the client stops sending, and must still accept a
// new connection and answer PeerProperties afterwards.
func FuzzFrames(f *testing.F) {
	frames := fuzzSeedFrames()
	for _, fr := range frames {
		f.Add(fr)
	}
	f.Add(bytes.Join(frames, nil))
	// Create, publish, subscribe, credit...: deliveries in flight at EOF.
	f.Add(bytes.Join(frames[:12], nil))
	// Create, publish, subscribe, then Delete: a stream deleted under a
	// subscription.
	f.Add(append(bytes.Join(frames[:7], nil), frames[len(frames)-2]...))
	f.Add([]byte(rawBuf(nil).u32(1 << 30).u16(uint16(wire.KeyPublish)).u16(1))) // oversize
	f.Add([]byte(rawBuf(nil).u32(4).u16(0x4242).u16(1)))                        // unknown key
	f.Add([]byte(rawBuf(nil).u32(0)))                                           // runt
	addr := startFuzzBroker(f)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzConn(t, addr, data) })
}

// FuzzCommands is FuzzFrames with the framing kept valid, so the fuzzer
// spends its time on the command fields: the input is a series of
// records, each u16 key, u8 version, u16 body length and the body (cut
// short at the end of the input), and each record is sent as one frame
// of the right size.
func FuzzCommands(f *testing.F) {
	frames := fuzzSeedFrames()
	records := make([][]byte, len(frames))
	for i, fr := range frames {
		records[i] = fuzzRecord(fr)
		f.Add(records[i])
	}
	f.Add(bytes.Join(records, nil))
	f.Add(bytes.Join(records[:12], nil))
	addr := startFuzzBroker(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var framed []byte
		for len(data) >= 5 {
			key, version, n := binary.BigEndian.Uint16(data), data[2], int(binary.BigEndian.Uint16(data[3:]))
			body := data[5:min(len(data), 5+n)]
			data = data[len(body)+5:]
			framed = append(framed, rawFrame(wire.Key(key), uint16(version), body)...)
		}
		fuzzConn(t, addr, framed)
	})
}

// fuzzRecord turns a frame into a FuzzCommands record.
func fuzzRecord(frame []byte) []byte {
	body := frame[8:]
	return rawBuf(nil).raw(frame[4:6]...).u8(frame[7]).u16(uint16(len(body))).raw(body...)
}

// fuzzConn opens a connection to addr, writes data after the handshake,
// and checks the server finishes the connection once the client stops
// sending and still serves a new connection afterwards.
func fuzzConn(t *testing.T, addr string, data []byte) {
	c := rawDial(t, addr)
	c.handshake(0)
	// The server may close the connection before it has read all of
	// data; write errors are expected then.
	c.nc.SetWriteDeadline(time.Now().Add(rawTimeout))
	c.nc.Write(data)
	c.nc.(*net.TCPConn).CloseWrite()
	// Once the client stops sending, the server finishes what it was
	// given and closes the connection.
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	switch _, err := io.Copy(io.Discard, c.nc); {
	case err == nil, errors.Is(err, syscall.ECONNRESET):
	case isTimeout(err):
		t.Fatalf("the server did not close the connection within 10s of the client's EOF")
	default:
		t.Fatalf("read: %v", err)
	}
	// The server is not wedged: a new connection is served.
	c2 := rawDial(t, addr)
	if props := c2.peerProperties(); props["product"] != "Warren" {
		t.Fatalf("PeerProperties after the input: %v", props)
	}
}

// FuzzReader runs a program of reader calls (ops) over data and checks the
// reader's contract: it never reads past the end or moves backwards,
// results alias data and are the bytes at the position read, counts never
// exceed the bytes left, and the first error sticks with zero results
// after it.
func FuzzReader(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []byte{
		0x7f, 0x12, 0x34, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8,
		0x00, 0x01, 'a', 0x00, 0x00, 0x00, 0x01, 'b',
		0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 'k', 0x00, 0x01, 'v',
		0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 'x',
	})
	f.Add([]byte{4, 4, 4}, []byte{0xff, 0xff, 0x00, 0x05, 'a'})
	f.Add([]byte{6, 8, 9}, []byte{0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{7, 7}, []byte{0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, ops, data []byte) {
		r := reader{b: data}
		var firstErr error
		for i, op := range ops {
			pos := len(data) - len(r.b)
			left := data[pos:]
			failedBefore := r.err != nil
			var zero bool // the call returned zero values
			switch op % 11 {
			case 0:
				v := r.u8()
				zero = v == 0
				if r.err == nil && v != left[0] {
					t.Fatalf("op %d: u8 = %#x, want %#x", i, v, left[0])
				}
			case 1:
				v := r.u16()
				zero = v == 0
				if r.err == nil && v != binary.BigEndian.Uint16(left) {
					t.Fatalf("op %d: u16 = %#x", i, v)
				}
			case 2:
				v := r.u32()
				zero = v == 0
				if r.err == nil && v != binary.BigEndian.Uint32(left) {
					t.Fatalf("op %d: u32 = %#x", i, v)
				}
			case 3:
				v := r.u64()
				zero = v == 0
				if r.err == nil && v != binary.BigEndian.Uint64(left) {
					t.Fatalf("op %d: u64 = %#x", i, v)
				}
			case 4:
				s, ok := r.stringBytes()
				zero = s == nil && !ok
				if r.err == nil && ok {
					n := int(binary.BigEndian.Uint16(left))
					if !bytes.Equal(s, left[2:2+n]) || cap(s) != len(s) {
						t.Fatalf("op %d: string %q (cap %d), want %q", i, s, cap(s), left[2:2+n])
					}
					if len(s) > 0 && &s[0] != &left[2] {
						t.Fatalf("op %d: string was copied", i)
					}
				}
			case 5:
				zero = r.string() == ""
			case 6:
				p := r.bytes()
				zero = p == nil
				if r.err == nil && p != nil {
					n := int(binary.BigEndian.Uint32(left))
					if !bytes.Equal(p, left[4:4+n]) || cap(p) != len(p) {
						t.Fatalf("op %d: bytes %q (cap %d)", i, p, cap(p))
					}
				}
			case 7:
				minSize := int(op/11%8) + 1
				n := r.count(minSize)
				zero = n == 0
				if n < 0 || n*minSize > len(r.b) {
					t.Fatalf("op %d: count %d of at least %d bytes with %d bytes left", i, n, minSize, len(r.b))
				}
			case 8:
				m := r.stringMap()
				zero = m == nil
				if len(m) > len(left)/4 {
					t.Fatalf("op %d: %d map entries from %d bytes", i, len(m), len(left))
				}
			case 9:
				a := r.stringArray()
				zero = len(a) == 0
				if len(a) > len(left)/2 {
					t.Fatalf("op %d: %d strings from %d bytes", i, len(a), len(left))
				}
			case 10:
				zero = true
				if r.empty() != (len(left) == 0) {
					t.Fatalf("op %d: empty() = %v with %d bytes left", i, r.empty(), len(left))
				}
			}
			if len(r.b) > len(left) {
				t.Fatalf("op %d: reader moved backwards: %d bytes left, was %d", i, len(r.b), len(left))
			}
			if len(r.b) > 0 && &r.b[len(r.b)-1] != &data[len(data)-1] {
				t.Fatalf("op %d: reader no longer ends at the end of data", i)
			}
			if r.err == nil {
				continue
			}
			if !errors.Is(r.err, errMalformed) {
				t.Fatalf("op %d: err = %v, want errMalformed", i, r.err)
			}
			if len(r.b) != 0 {
				t.Fatalf("op %d: %d bytes left after an error", i, len(r.b))
			}
			if firstErr == nil {
				firstErr = r.err
			}
			if r.err != firstErr {
				t.Fatalf("op %d: err changed from %v to %v", i, firstErr, r.err)
			}
			if failedBefore && !zero {
				t.Fatalf("op %d (%d): non-zero result after an error", i, op%11)
			}
		}
	})
}
