package leanamqp

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
)

// sinkConn is a net.Conn that discards writes and reads nothing.
type sinkConn struct{ net.Conn }

func (sinkConn) Write(b []byte) (int, error)      { return len(b), nil }
func (sinkConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (sinkConn) Close() error                     { return nil }
func (sinkConn) SetDeadline(time.Time) error      { return nil }
func (sinkConn) SetReadDeadline(time.Time) error  { return nil }
func (sinkConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzFrames feeds arbitrary bytes to the read path after the handshake:
// frame parsing, method dispatch and delivery assembly. Nothing may
// panic, and every delivered body must have the size its header
// announced.
func FuzzFrames(f *testing.F) {
	f.Add(deliveryFrames(1, []byte("hello")))
	f.Add(deliveryFrames(2, []byte("abcdefghij"), 3, 3))
	f.Add(deliveryFrames(3, nil))
	f.Add(wire.AppendMethodFrame(nil, 1, &wire.BasicAck{DeliveryTag: 7, Multiple: true}))
	f.Add(wire.AppendMethodFrame(nil, 1, &wire.ChannelClose{ReplyCode: 404, ReplyText: "NOT_FOUND"}))
	f.Add(wire.AppendMethodFrame(nil, 0, &wire.ConnectionClose{ReplyCode: 320}))
	f.Add(append(wire.AppendHeartbeat(nil), deliveryFrames(4, bytes.Repeat([]byte{1}, 100), 50)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want uint64
		c := newConn(sinkConn{}, Config{Timeout: time.Second, MaxBodySize: 1 << 16,
			OnDelivery: func(tag uint64, redelivered bool, body []byte) {
				if uint64(len(body)) != want {
					t.Fatalf("body of %d bytes, header said %d", len(body), want)
				}
			},
			OnConfirm: func(uint64, bool, bool) {}})
		c.fr = wire.NewFrameReader(bytes.NewReader(data), 4096)
		for {
			fr, err := c.fr.ReadFrame(c.frameMax)
			if err != nil {
				return
			}
			if fr.Type == wire.FrameHeader && len(fr.Payload) >= 12 && c.rd.state == stateHeader {
				want = uint64(fr.Payload[4])<<56 | uint64(fr.Payload[5])<<48 | uint64(fr.Payload[6])<<40 |
					uint64(fr.Payload[7])<<32 | uint64(fr.Payload[8])<<24 | uint64(fr.Payload[9])<<16 |
					uint64(fr.Payload[10])<<8 | uint64(fr.Payload[11])
			}
			if err := c.handle(fr); err != nil {
				return
			}
		}
	})
}
