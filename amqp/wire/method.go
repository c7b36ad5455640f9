package wire

import (
	"encoding/binary"
	"fmt"
)

// Method is an AMQP method: one generated struct per method of the 0-9-1
// specification (spec_gen.go), named <Class><Method> in Go case
// (BasicPublish, QueueDeclareOk).
type Method interface {
	// ClassID returns the class id (ClassBasic for basic.publish).
	ClassID() uint16
	// MethodID returns the method id within the class.
	MethodID() uint16
	// MethodName returns the dotted XML name, "basic.publish".
	MethodName() string
	// HasContent reports whether a content header and body follow the
	// method: basic.publish, basic.return, basic.deliver, basic.get-ok.
	HasContent() bool
	// AppendArgs appends the argument bytes, those after the class and
	// method ids. Consecutive bit fields share one octet, the first bit
	// in the least significant position.
	//
	// AppendArgs cannot fail. A shortstr longer than 255 bytes is
	// truncated to 255 bytes (at a UTF-8 boundary); a table is written
	// with its keys sorted, and a table value that amqptab.AppendTable
	// would reject (an unsupported Go type, a uint64 above
	// math.MaxInt64, nesting deeper than amqptab.MaxDepth) is written as
	// void ('V'), a key longer than 255 bytes is truncated. Callers that
	// need to detect such values check tables with amqptab.AppendTable
	// first.
	AppendArgs(dst []byte) []byte
	// ReadArgs decodes argument bytes into the method, which may be
	// reused: strings equal to the current value are kept rather than
	// reallocated, so decoding into a reused *BasicPublish or *BasicAck
	// allocates nothing for repeated values. Decoding is strict: missing
	// or trailing bytes, malformed tables and, for the shortstr fields
	// of methods without content, non-UTF-8 bytes (as RabbitMQ's
	// "Malformed UTF-8 in shortstr") give an error wrapping
	// ErrMalformed, naming the method and field. After an error the
	// fields hold unspecified values. Strings and tables never alias b.
	ReadArgs(b []byte) error
}

// SplitMethod splits a method frame payload into its class id, method id
// and argument bytes (aliasing payload). Servers that reuse method
// structs on hot paths call it and then ReadArgs on their own struct.
func SplitMethod(payload []byte) (classID, methodID uint16, args []byte, err error) {
	if len(payload) < 4 {
		return 0, 0, nil, fmt.Errorf("amqp/wire: decode method: payload of %d bytes is shorter than the class and method ids: %w", len(payload), ErrMalformed)
	}
	return binary.BigEndian.Uint16(payload), binary.BigEndian.Uint16(payload[2:]), payload[4:], nil
}

// DecodeMethod decodes a method frame payload (class id u16, method id
// u16, arguments) into a new method. Unknown ids give an
// *UnknownMethodError (wrapping ErrUnknownMethod); bad arguments give an
// error wrapping ErrMalformed.
func DecodeMethod(payload []byte) (Method, error) {
	classID, methodID, args, err := SplitMethod(payload)
	if err != nil {
		return nil, err
	}
	m := NewMethod(classID, methodID)
	if m == nil {
		return nil, &UnknownMethodError{ClassID: classID, MethodID: methodID}
	}
	if err := m.ReadArgs(args); err != nil {
		return nil, err
	}
	return m, nil
}

// AppendMethodPayload appends a method frame's payload: class id, method
// id and arguments.
func AppendMethodPayload(dst []byte, m Method) []byte {
	dst = binary.BigEndian.AppendUint16(dst, m.ClassID())
	dst = binary.BigEndian.AppendUint16(dst, m.MethodID())
	return m.AppendArgs(dst)
}

// AppendMethodFrame appends a complete method frame for the channel. It
// does not check the frame against the negotiated frame_max.
func AppendMethodFrame(dst []byte, channel uint16, m Method) []byte {
	start := len(dst)
	dst = appendFrameHeader(dst, FrameMethod, channel, 0)
	dst = AppendMethodPayload(dst, m)
	binary.BigEndian.PutUint32(dst[start+3:], uint32(len(dst)-start-7))
	return append(dst, FrameEnd)
}
