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

// print logs fmt.Sprint(v...), formatted only if level is enabled:
// raft logs every election and rejected message, in every group.
func (l raftLogger) print(level slog.Level, v ...any) {
	if ctx := context.Background(); l.log.Enabled(ctx, level) {
		l.log.Log(ctx, level, "raft: "+fmt.Sprint(v...))
	}
}

func (l raftLogger) printf(level slog.Level, format string, v ...any) {
	if ctx := context.Background(); l.log.Enabled(ctx, level) {
		l.log.Log(ctx, level, "raft: "+fmt.Sprintf(format, v...))
	}
}

func (l raftLogger) Debug(v ...any)                   { l.print(slog.LevelDebug, v...) }
func (l raftLogger) Debugf(format string, v ...any)   { l.printf(slog.LevelDebug, format, v...) }
func (l raftLogger) Info(v ...any)                    { l.print(slog.LevelDebug, v...) }
func (l raftLogger) Infof(format string, v ...any)    { l.printf(slog.LevelDebug, format, v...) }
func (l raftLogger) Warning(v ...any)                 { l.print(slog.LevelWarn, v...) }
func (l raftLogger) Warningf(format string, v ...any) { l.printf(slog.LevelWarn, format, v...) }
func (l raftLogger) Error(v ...any)                   { l.print(slog.LevelError, v...) }
func (l raftLogger) Errorf(format string, v ...any)   { l.printf(slog.LevelError, format, v...) }

// Fatal and Panic are raft's broken invariants: it cannot go on.
func (l raftLogger) Fatal(v ...any)                 { l.Panic(v...) }
func (l raftLogger) Fatalf(format string, v ...any) { l.Panicf(format, v...) }

func (l raftLogger) Panic(v ...any) {
	s := fmt.Sprint(v...)
	l.log.Error("raft: " + s)
	panic("raft: " + s)
}

func (l raftLogger) Panicf(format string, v ...any) {
	s := fmt.Sprintf(format, v...)
	l.log.Error("raft: " + s)
	panic("raft: " + s)
}
