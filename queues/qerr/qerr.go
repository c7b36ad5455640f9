// Package qerr holds the errors of the broker's model that carry an AMQP
// reply code, and the sentinels they match, below every package of the
// model (queues and its sub-packages), so that each of them can refuse
// with a code without importing queues. Package queues re-exports them
// (queues.Error, queues.Errorf, queues.CodeNotFound, ...): front ends
// use those names.
package qerr

import (
	"errors"
	"fmt"
)

// Reply codes the model reports, as AMQP 0-9-1 defines them. They are the
// shared vocabulary of the front ends: the AMQP front end sends them as
// channel.close or connection.close, the stream front end maps them to
// its response codes.
const (
	CodeAccessRefused      = 403
	CodeNotFound           = 404
	CodeResourceLocked     = 405
	CodePreconditionFailed = 406
	CodeNotAllowed         = 530
	CodeNotImplemented     = 540
	CodeInternalError      = 541
)

// Sentinels an *Error matches by code (errors.Is), and that the model
// also returns wrapped.
var (
	// ErrNotFound is a missing entity.
	ErrNotFound = errors.New("queues: not found")
	// ErrAccessRefused is a missing permission or virtual host access.
	ErrAccessRefused = errors.New("queues: access refused")
	// ErrInvalidArgument is a declare argument RabbitMQ would refuse
	// (PRECONDITION_FAILED).
	ErrInvalidArgument = errors.New("queues: invalid argument")
	// ErrQueueLimit is a declare past the vhost's max-queues (a
	// PRECONDITION_FAILED that RabbitMQ's HTTP-over-AMQP answers 403).
	ErrQueueLimit = errors.New("queues: queue limit reached")
	// ErrTypeProperty is a declare property a queue type refuses
	// (auto-delete, exclusive, non-durable, a server-named quorum queue or
	// stream): RabbitMQ's protocol error of the type, which its
	// HTTP-over-AMQP answers 400 rather than 409.
	ErrTypeProperty = errors.New("queues: property the queue type refuses")
)

// Error is a refusal with an AMQP reply code and RabbitMQ's reply text,
// e.g. {404, "NOT_FOUND - no queue 'q' in vhost '/'"}. Hard errors close
// the connection rather than the channel.
type Error struct {
	Code int
	Text string
	// Reason, when set, is the sentinel that tells refusals of one code
	// apart (ErrQueueLimit, ErrTypeProperty); errors.Is matches it.
	Reason error
}

// Because sets e's Reason and returns e.
func (e *Error) Because(reason error) *Error {
	e.Reason = reason
	return e
}

func (e *Error) Error() string { return e.Text }

// Is lets errors.Is match the package sentinels by code.
func (e *Error) Is(target error) bool {
	if e.Reason != nil && target == e.Reason {
		return true
	}
	switch target {
	case ErrNotFound:
		return e.Code == CodeNotFound
	case ErrAccessRefused:
		return e.Code == CodeAccessRefused
	case ErrInvalidArgument:
		return e.Code == CodePreconditionFailed
	}
	return false
}

// Errorf returns an *Error whose text is the code's constant name, " - "
// and the formatted explanation, as RabbitMQ writes reply texts.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Text: codeName(code) + " - " + fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error, or nil when it carries no code.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

func codeName(code int) string {
	switch code {
	case CodeAccessRefused:
		return "ACCESS_REFUSED"
	case CodeNotFound:
		return "NOT_FOUND"
	case CodeResourceLocked:
		return "RESOURCE_LOCKED"
	case CodePreconditionFailed:
		return "PRECONDITION_FAILED"
	case CodeNotAllowed:
		return "NOT_ALLOWED"
	case CodeNotImplemented:
		return "NOT_IMPLEMENTED"
	case CodeInternalError:
		return "INTERNAL_ERROR"
	}
	return fmt.Sprintf("CODE_%d", code)
}

// Resource renders a resource as RabbitMQ's rabbit_misc:rs/1 does:
// "queue 'q' in vhost '/'".
func Resource(kind, name, vhost string) string {
	return fmt.Sprintf("%s '%s' in vhost '%s'", kind, name, vhost)
}
