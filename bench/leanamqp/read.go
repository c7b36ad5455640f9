package leanamqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/warren-mq/warren/amqp/wire"
)

// errStop ends the read loop without an error of its own.
var errStop = errors.New("leanamqp: stop reading")

// Content assembly states.
const (
	stateMethod = iota // a method is due
	stateHeader        // a content header is due
	stateBody          // body frames are due
)

// reader is the state of the read loop, owned by its goroutine.
type reader struct {
	state   int
	discard bool   // assembling a basic.return: drop it
	tag     uint64 // delivery tag of the delivery being assembled
	redeliv bool
	size    uint64 // body size from the header
	asm     []byte // body being assembled from several frames
	deliver wire.BasicDeliver
	ack     wire.BasicAck
	nack    wire.BasicNack
	closing bool // the client answered a channel.close and awaits close-ok
}

// Method keys for the dispatch switch.
const (
	keyDeliver      = uint32(wire.ClassBasic)<<16 | uint32(wire.MethodBasicDeliver)
	keyAck          = uint32(wire.ClassBasic)<<16 | uint32(wire.MethodBasicAck)
	keyNack         = uint32(wire.ClassBasic)<<16 | uint32(wire.MethodBasicNack)
	keyReturn       = uint32(wire.ClassBasic)<<16 | uint32(wire.MethodBasicReturn)
	keyCancel       = uint32(wire.ClassBasic)<<16 | uint32(wire.MethodBasicCancel)
	keyChannelClose = uint32(wire.ClassChannel)<<16 | uint32(wire.MethodChannelClose)
	keyChannelFlow  = uint32(wire.ClassChannel)<<16 | uint32(wire.MethodChannelFlow)
)

// readLoop reads and dispatches frames until the connection ends.
func (c *Conn) readLoop() {
	defer close(c.readerDone)
	defer func() { _ = c.nc.Close() }()
	for {
		f, err := c.fr.ReadFrame(c.frameMax)
		if err != nil {
			c.fail(fmt.Errorf("leanamqp: read: %w", err))
			return
		}
		if err := c.handle(f); err != nil {
			if err != errStop {
				c.fail(err)
			}
			return
		}
	}
}

// protoErr formats a protocol violation.
func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// handle dispatches one frame. It returns errStop when the connection
// ended normally, another error when it failed.
func (c *Conn) handle(f wire.Frame) error {
	rd := &c.rd
	switch {
	case f.Type == wire.FrameHeartbeat:
		if f.Channel != 0 || len(f.Payload) != 0 {
			return protoErr("heartbeat on channel %d with %d bytes", f.Channel, len(f.Payload))
		}
		if c.echoBeats && !rd.closing {
			c.wmu.Lock()
			if !c.closing {
				c.wbuf = wire.AppendHeartbeat(c.wbuf)
				_ = c.flushLocked()
			}
			c.wmu.Unlock()
		}
		return nil
	case f.Channel == 0:
		if f.Type != wire.FrameMethod {
			return protoErr("frame type %d on channel 0", f.Type)
		}
		return c.handleConnection(f.Payload)
	case f.Channel != channelID:
		return protoErr("frame on channel %d, which is not open", f.Channel)
	case rd.closing:
		return nil // after channel.close, everything but close-ok is ignored
	}
	switch rd.state {
	case stateHeader:
		if f.Type != wire.FrameHeader {
			return protoErr("frame type %d where a content header is due", f.Type)
		}
		return c.handleHeader(f.Payload)
	case stateBody:
		if f.Type != wire.FrameBody {
			return protoErr("frame type %d where a content body is due", f.Type)
		}
		return c.handleBody(f.Payload)
	}
	if f.Type != wire.FrameMethod {
		return protoErr("frame type %d where a method is due", f.Type)
	}
	return c.handleMethod(f.Payload)
}

// handleConnection handles a method on channel 0.
func (c *Conn) handleConnection(payload []byte) error {
	m, err := wire.DecodeMethod(payload)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	switch m := m.(type) {
	case *wire.ConnectionClose:
		_ = c.writeMethods(0, &wire.ConnectionCloseOk{})
		c.fail(&ServerError{Code: m.ReplyCode, Text: m.ReplyText, ClassID: m.FailingClassID, MethodID: m.FailingMethodID})
		return errStop
	case *wire.ConnectionCloseOk:
		c.closeOkOnce.Do(func() { close(c.closeOk) })
		c.fail(ErrClosed)
		return errStop
	case *wire.ConnectionBlocked, *wire.ConnectionUnblocked:
		return nil
	}
	return protoErr("unexpected %s on channel 0", m.MethodName())
}

// handleMethod handles a method on channel 1.
func (c *Conn) handleMethod(payload []byte) error {
	rd := &c.rd
	class, method, args, err := wire.SplitMethod(payload)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	switch uint32(class)<<16 | uint32(method) {
	case keyDeliver:
		if err := rd.deliver.ReadArgs(args); err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		rd.state, rd.discard, rd.tag, rd.redeliv = stateHeader, false, rd.deliver.DeliveryTag, rd.deliver.Redelivered
		return nil
	case keyReturn:
		var r wire.BasicReturn
		if err := r.ReadArgs(args); err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		rd.state, rd.discard = stateHeader, true
		return nil
	case keyAck:
		if err := rd.ack.ReadArgs(args); err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		if c.onConfirm != nil {
			c.onConfirm(rd.ack.DeliveryTag, rd.ack.Multiple, true)
		}
		return nil
	case keyNack:
		if err := rd.nack.ReadArgs(args); err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		if c.onConfirm != nil {
			c.onConfirm(rd.nack.DeliveryTag, rd.nack.Multiple, false)
		}
		return nil
	case keyChannelClose:
		var cl wire.ChannelClose
		if err := cl.ReadArgs(args); err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		// Answer, then close the connection politely: the channel was
		// the connection's only one.
		rd.closing = true
		c.fail(&ServerError{Channel: true, Code: cl.ReplyCode, Text: cl.ReplyText, ClassID: cl.FailingClassID, MethodID: cl.FailingMethodID})
		c.wmu.Lock()
		if !c.closing {
			c.closing = true
			c.wbuf = wire.AppendMethodFrame(c.wbuf, channelID, &wire.ChannelCloseOk{})
			c.wbuf = wire.AppendMethodFrame(c.wbuf, 0, &wire.ConnectionClose{ReplyCode: wire.ReplySuccess, ReplyText: "channel closed"})
			_ = c.flushLocked()
		}
		c.wmu.Unlock()
		_ = c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		return nil
	case keyCancel:
		var cn wire.BasicCancel
		if err := cn.ReadArgs(args); err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		if !cn.NoWait {
			_ = c.writeMethods(channelID, &wire.BasicCancelOk{ConsumerTag: cn.ConsumerTag})
		}
		return fmt.Errorf("leanamqp: the server cancelled consumer %q", cn.ConsumerTag)
	case keyChannelFlow:
		var fl wire.ChannelFlow
		if err := fl.ReadArgs(args); err != nil {
			return fmt.Errorf("%w: %w", ErrProtocol, err)
		}
		return c.writeMethods(channelID, &wire.ChannelFlowOk{Active: fl.Active})
	}
	m, err := wire.DecodeMethod(payload)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if m.HasContent() {
		return protoErr("unexpected %s", m.MethodName())
	}
	select {
	case c.rpc <- m:
		return nil
	default:
		return protoErr("unexpected %s", m.MethodName())
	}
}

// handleHeader handles the content header of a delivery or return.
func (c *Conn) handleHeader(payload []byte) error {
	rd := &c.rd
	if len(payload) < 14 {
		return protoErr("content header of %d bytes", len(payload))
	}
	if class := binary.BigEndian.Uint16(payload); class != wire.ClassBasic {
		return protoErr("content header of class %d", class)
	}
	size := binary.BigEndian.Uint64(payload[4:])
	if size > c.maxBody {
		return protoErr("body of %d bytes exceeds the limit of %d", size, c.maxBody)
	}
	rd.size = size
	rd.asm = rd.asm[:0]
	if size == 0 {
		c.complete(nil)
		return nil
	}
	rd.state = stateBody
	return nil
}

// handleBody handles one body frame.
func (c *Conn) handleBody(payload []byte) error {
	rd := &c.rd
	got := uint64(len(rd.asm))
	if uint64(len(payload)) > rd.size-got {
		return protoErr("body frames exceed the body size %d", rd.size)
	}
	if got == 0 && uint64(len(payload)) == rd.size {
		c.complete(payload) // one frame: no copy
		return nil
	}
	// Grow as the bytes arrive, not by the header's claim.
	rd.asm = append(rd.asm, payload...)
	if uint64(len(rd.asm)) == rd.size {
		c.complete(rd.asm)
	}
	return nil
}

// complete hands an assembled body to the delivery callback.
func (c *Conn) complete(body []byte) {
	rd := &c.rd
	rd.state = stateMethod
	if !rd.discard && c.onDelivery != nil {
		c.onDelivery(rd.tag, rd.redeliv, body)
	}
	rd.asm = rd.asm[:0]
}
