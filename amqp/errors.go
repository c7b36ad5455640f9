package amqp

import (
	"fmt"

	"github.com/warren-mq/warren/amqp/wire"
	"github.com/warren-mq/warren/queues"
)

// amqpError is a protocol error: a channel error (channel.close) unless
// hard, then a connection error (connection.close). ClassID and MethodID
// name the method that failed, 0/0 when none did.
type amqpError struct {
	Code     uint16
	Text     string
	ClassID  uint16
	MethodID uint16
	Hard     bool
}

func (e *amqpError) Error() string {
	return fmt.Sprintf("amqp: %d %s (class %d method %d)", e.Code, e.Text, e.ClassID, e.MethodID)
}

// newError builds an error with RabbitMQ's "<NAME> - <explanation>" text.
// Whether it is hard follows the code (AMQP's hard-error class).
func newError(code uint16, format string, args ...any) *amqpError {
	text := wire.ReplyName(code) + " - " + fmt.Sprintf(format, args...)
	if len(text) > 255 {
		text = text[:255]
	}
	return &amqpError{Code: code, Text: text, Hard: wire.IsHardError(code)}
}

// fromModel converts an error from the queues package: a coded refusal
// keeps its code and text; anything else is an internal error.
func fromModel(err error) *amqpError {
	if err == nil {
		return nil
	}
	if e := queues.AsError(err); e != nil {
		text := e.Text
		if len(text) > 255 {
			text = text[:255]
		}
		return &amqpError{Code: uint16(e.Code), Text: text, Hard: wire.IsHardError(uint16(e.Code))}
	}
	return newError(wire.InternalError, "%v", err)
}

// withMethod stamps the failing method's ids on e.
func (e *amqpError) withMethod(m wire.Method) *amqpError {
	if m != nil && e.ClassID == 0 && e.MethodID == 0 {
		e.ClassID, e.MethodID = m.ClassID(), m.MethodID()
	}
	return e
}
