package wire

import (
	"errors"
	"fmt"

	"github.com/warren-mq/warren/internal/amqptab"
)

// Sentinel errors. Decoding errors wrap them with the operation, the
// method or property and the field; callers classify with errors.Is.
var (
	// ErrMalformed marks bytes that do not decode: truncated or trailing
	// data, a length past its container, an unknown field-table tag,
	// tables nested deeper than amqptab.MaxDepth, or a non-UTF-8
	// shortstr where RabbitMQ requires UTF-8. RabbitMQ answers these
	// with 501 FRAME_ERROR. It is amqptab.ErrMalformed, so that a bad
	// table inside a method or content header classifies as the rest.
	ErrMalformed = amqptab.ErrMalformed

	// ErrUnknownMethod marks a method payload whose class and method ids
	// name no method; the error is an *UnknownMethodError carrying them.
	ErrUnknownMethod = errors.New("amqp/wire: unknown method")

	// ErrFieldType marks a value that cannot be encoded: a Go type with no
	// field-table tag, a uint64 above math.MaxInt64, a table key or
	// property shortstr longer than 255 bytes, or nesting deeper than
	// amqptab.MaxDepth. It is amqptab.ErrFieldType.
	ErrFieldType = amqptab.ErrFieldType
)

// UnknownMethodError is returned by DecodeMethod for ids that name no
// method. errors.Is(err, ErrUnknownMethod) reports true for it.
type UnknownMethodError struct {
	ClassID  uint16 // class id as received
	MethodID uint16 // method id as received
}

// Error names the ids.
func (e *UnknownMethodError) Error() string {
	return fmt.Sprintf("amqp/wire: unknown method %d/%d", e.ClassID, e.MethodID)
}

// Unwrap returns ErrUnknownMethod.
func (e *UnknownMethodError) Unwrap() error { return ErrUnknownMethod }

// FramingError is a framing violation found by FrameReader: a payload
// larger than the limit, a bad frame-end octet or an unknown frame type.
// Code is the reply code the server should close the connection with
// (FrameError, 501, for all of them); Text explains, without the
// "FRAME_ERROR - " prefix, which the server adds when it formats the
// connection.close reply text.
//
// (The type is not called FrameError because that name is the generated
// reply-code constant for 501.)
type FramingError struct {
	Code uint16 // reply code, FrameError
	Text string // explanation, e.g. "frame payload of 9000 bytes exceeds the limit of 8192"
	// Type, Payload (its first 17 bytes at most; none when it was not
	// read) and Term, RabbitMQ's reason as Erlang prints it
	// ("{frame_too_large,9000,8184}"), make rabbit_reader's text.
	Type    uint8
	Payload []byte
	Term    string
}

// Error gives the code, its name and the text.
func (e *FramingError) Error() string {
	return fmt.Sprintf("amqp/wire: %s (%d): %s", ReplyName(e.Code), e.Code, e.Text)
}
