package amqp

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

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

// octets renders a frame payload as RabbitMQ's frame errors do: "all
// octets = <<...>>", or "first 16 octets = <<...>>" for a longer one, in
// Erlang's binary notation.
func octets(b []byte) string {
	which := "all"
	if len(b) > 16 {
		which, b = "first 16", b[:16]
	}
	return which + " octets = " + erlBinary(b)
}

// erlBinary renders b as Erlang's ~p prints a binary: <<"text">> when
// every byte is printable ASCII, <<1,2,3>> otherwise.
func erlBinary(b []byte) string {
	printable := len(b) > 0
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			printable = false
			break
		}
	}
	if printable {
		return `<<"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(string(b)) + `">>`
	}
	var sb strings.Builder
	sb.WriteString("<<")
	for i, c := range b {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(int(c)))
	}
	sb.WriteString(">>")
	return sb.String()
}

// connLimitError words a connection or channel refused by a vhost or
// user limit (queues.OpenConn, OpenChannel) as rabbit_reader does: 530
// NOT_ALLOWED, which closes the connection.
func connLimitError(err error, user, node string) *amqpError {
	var le *queues.LimitError
	if !errors.As(err, &le) {
		return fromModel(err)
	}
	switch {
	case le.Scope == "node":
		return newError(wire.NotAllowed, "number of channels opened on node '%s' has reached the maximum allowed limit of %d", node, le.Limit)
	case le.Scope == "vhost":
		return newError(wire.NotAllowed, "access to vhost '%s' refused for user '%s': connection limit (%d) is reached", le.Name, user, le.Limit)
	case le.Kind == queues.LimitMaxChannels:
		return newError(wire.NotAllowed, "number of channels opened for user '%s' has reached the maximum allowed user limit of %d", le.Name, le.Limit)
	}
	return newError(wire.NotAllowed, "connection refused for user '%s': user connection limit (%d) is reached", le.Name, le.Limit)
}

// framingError words a framing violation as rabbit_reader's frame_error:
// "type 1, all octets = <<>>: {frame_too_large,9000,8184}".
func framingError(fe *wire.FramingError) *amqpError {
	if fe.Term == "" {
		return newError(wire.FrameError, "%s", fe.Text)
	}
	return newError(wire.FrameError, "type %d, %s: %s", fe.Type, octets(fe.Payload), fe.Term)
}

// erlBinaryW renders b as Erlang's ~w prints a binary: <<1,2,3>>, every
// byte a number.
func erlBinaryW(b []byte) string {
	var sb strings.Builder
	sb.WriteString("<<")
	for i, c := range b {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(int(c)))
	}
	sb.WriteString(">>")
	return sb.String()
}
