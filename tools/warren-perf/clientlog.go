package main

import (
	"fmt"
	"log"
	"strings"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/logs"
)

// newClientLogger adapts l to the stream client's logger (logs.SetLogger):
// warnings and errors always, info lines only with info. It drops the
// error v1.8.3 logs on every clean shutdown (the broker's close frame races
// the client's own close) unless info is set.
func newClientLogger(l *log.Logger, info bool) logs.Logger {
	return clientLogger{info: info, l: l}
}

// clientLogger adapts the stream client's logger interface.
type clientLogger struct {
	info bool
	l    *log.Logger
}

func (c clientLogger) Info(msg string, v ...any) {
	if c.info {
		c.l.Printf("[info] "+msg, v...)
	}
}
func (c clientLogger) Debug(string, ...any)      {}
func (c clientLogger) Warn(msg string, v ...any) { c.l.Printf("[warn] "+msg, v...) }

func (c clientLogger) Error(msg string, v ...any) {
	text := fmt.Sprintf(msg, v...)
	// On every clean shutdown the broker's close frame races the client's
	// own close, and v1.8.3 logs the failed reply as an error.
	if !c.info && strings.Contains(text, "closeFrameHandler") && strings.Contains(text, "use of closed network connection") {
		return
	}
	c.l.Print("[error] " + text)
}
