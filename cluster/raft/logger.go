package raft

import (
	"context"
	"fmt"
	"log/slog"

	etcdraft "go.etcd.io/raft/v3"
)

// raftLogger is etcd raft's Logger on slog, naming the node and group.
// raft's Info level (elections, leader changes) goes to slog's Debug.
type raftLogger struct{ log *slog.Logger }

var _ etcdraft.Logger = raftLogger{}

func newRaftLogger(log *slog.Logger, node, group uint64) raftLogger {
	return raftLogger{log.With("node", node, "group", group)}
}

func (l raftLogger) out(level slog.Level, msg string) {
	l.log.Log(context.Background(), level, "raft: "+msg)
}

func (l raftLogger) Debug(v ...any) { l.out(slog.LevelDebug, fmt.Sprint(v...)) }
func (l raftLogger) Debugf(format string, v ...any) {
	l.out(slog.LevelDebug, fmt.Sprintf(format, v...))
}
func (l raftLogger) Info(v ...any)                 { l.out(slog.LevelDebug, fmt.Sprint(v...)) }
func (l raftLogger) Infof(format string, v ...any) { l.out(slog.LevelDebug, fmt.Sprintf(format, v...)) }
func (l raftLogger) Warning(v ...any)              { l.out(slog.LevelWarn, fmt.Sprint(v...)) }
func (l raftLogger) Warningf(format string, v ...any) {
	l.out(slog.LevelWarn, fmt.Sprintf(format, v...))
}
func (l raftLogger) Error(v ...any) { l.out(slog.LevelError, fmt.Sprint(v...)) }
func (l raftLogger) Errorf(format string, v ...any) {
	l.out(slog.LevelError, fmt.Sprintf(format, v...))
}

// Fatal and Panic are raft's broken invariants: it cannot go on.
func (l raftLogger) Fatal(v ...any) { l.Panic(v...) }
func (l raftLogger) Fatalf(format string, v ...any) {
	l.Panicf(format, v...)
}
func (l raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	l.out(slog.LevelError, s)
	panic("raft: " + s)
}
func (l raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	l.out(slog.LevelError, s)
	panic("raft: " + s)
}
