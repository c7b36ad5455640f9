package main

import (
	"errors"
	"fmt"
	"html"
	"net/http"
	"strings"
)

// Exit codes, rabbitmqctl's (RabbitMQ.CLI.Core.ExitCodes, from sysexits.h).
const (
	exitOK          = 0
	exitUsage       = 64 // bad verb, option, argument count or column
	exitDataErr     = 65 // not found, rejected input, unreadable local file
	exitNoUser      = 67 // the user a user verb names does not exist
	exitUnavailable = 69 // server unreachable, login refused, 503
	exitSoftware    = 70 // server error, unexpected response
	exitTempFail    = 75 // --timeout expired
)

// usageError is a command line mistake: run prints it with the verb's usage
// and exits with exitUsage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

// exitError is a failure with its exit code and the message run prints
// under "Error:".
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func failf(code int, format string, a ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, a...)}
}

// httpError is a 4xx or 5xx response. RabbitMQ's management API answers
// errors with {"error": "...", "reason": "..."}.
type httpError struct {
	method string
	uri    string // path and query, as sent
	status int
	tag    string // the body's "error"
	reason string // the body's "reason", HTML entities decoded
}

func (e *httpError) Error() string {
	msg := e.reason
	if msg == "" {
		msg = e.tag
	}
	switch {
	case msg != "":
	case e.status == http.StatusMethodNotAllowed:
		// RabbitMQ 3.x answers so for the stream paths it lacks.
		msg = "Method Not Allowed: the server does not implement this operation"
	default:
		msg = http.StatusText(e.status)
	}
	return msg + "\n" + e.detail()
}

// detail is the line naming the request and the status.
func (e *httpError) detail() string {
	s := fmt.Sprintf("(HTTP %d", e.status)
	if e.tag != "" {
		s += " " + e.tag
	}
	return s + ": " + e.method + " " + e.uri + ")"
}

// exitCode maps a status to rabbitmqctl's exit codes; notFound is the code
// for 404, which depends on what the verb was looking for.
func (e *httpError) exitCode(notFound int) int {
	switch {
	case e.status == http.StatusNotFound:
		return notFound
	case e.status == http.StatusUnauthorized, e.status == http.StatusForbidden,
		e.status == http.StatusServiceUnavailable:
		return exitUnavailable
	case e.status >= 500:
		return exitSoftware
	}
	return exitDataErr
}

// newHTTPError builds the error for a response with an error status.
func newHTTPError(method, uri string, status int, body []byte) *httpError {
	e := &httpError{method: method, uri: uri, status: status}
	if v, err := parseJSON(body); err == nil && v.kind == kObject {
		e.tag = v.get("error").str()
		switch r := v.get("reason"); r.kind {
		case kString:
			e.reason = r.s
		case kMissing, kNull:
		default:
			e.reason = string(r.compact())
		}
	} else if len(body) > 0 {
		e.reason = string(body[:min(len(body), 200)])
	}
	// RabbitMQ HTML-escapes reasons ("&lt;&lt;\"x\"&gt;&gt; is not a valid
	// maximum length") and ends some with a newline.
	e.reason = strings.TrimSpace(html.UnescapeString(e.reason))
	return e
}

// notFound turns a 404 into the verb's message ("User "x" does not exist")
// and exit code; any other error passes through.
func notFound(err error, code int, format string, a ...any) error {
	var he *httpError
	if !errors.As(err, &he) || he.status != http.StatusNotFound {
		return err
	}
	return &exitError{code: code, msg: fmt.Sprintf(format, a...) + "\n" + he.detail()}
}

// isNotFound reports whether err is a 404 response.
func isNotFound(err error) bool {
	var he *httpError
	return errors.As(err, &he) && he.status == http.StatusNotFound
}

// exitCodeOf returns the exit code for an error a verb returned.
func exitCodeOf(err error) int {
	var (
		ue *usageError
		ee *exitError
		he *httpError
	)
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &he):
		return he.exitCode(exitDataErr)
	}
	return exitSoftware
}
