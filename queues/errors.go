package queues

import "github.com/warren-mq/warren/queues/qerr"

// The errors with reply codes live in package qerr, below the model's
// sub-packages; these are their names for the front ends.

// Reply codes the model reports, as AMQP 0-9-1 defines them (qerr).
const (
	CodeAccessRefused      = qerr.CodeAccessRefused
	CodeNotFound           = qerr.CodeNotFound
	CodeResourceLocked     = qerr.CodeResourceLocked
	CodePreconditionFailed = qerr.CodePreconditionFailed
	CodeNotAllowed         = qerr.CodeNotAllowed
	CodeNotImplemented     = qerr.CodeNotImplemented
	CodeInternalError      = qerr.CodeInternalError
)

// Error is a refusal with an AMQP reply code and RabbitMQ's reply text
// (qerr.Error).
type Error = qerr.Error

// Errorf returns an *Error whose text is the code's constant name, " - "
// and the formatted explanation (qerr.Errorf).
func Errorf(code int, format string, args ...any) *Error {
	return qerr.Errorf(code, format, args...)
}

// AsError returns err as an *Error, or nil when it carries no code.
func AsError(err error) *Error { return qerr.AsError(err) }

// rs renders a resource as RabbitMQ's rabbit_misc:rs/1 does:
// "queue 'q' in vhost '/'".
func rs(kind, name, vhost string) string { return qerr.Resource(kind, name, vhost) }
