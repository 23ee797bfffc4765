package devstack

import (
	"context"
	"fmt"
	"log/slog"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// serverLogger adapts a *slog.Logger to the Temporal server's log.Logger.
// Lines below level are dropped before their tags are evaluated. DPanic is
// an error line. Panic and Fatal log an error line and panic, since the
// server does not expect them to return (its own logger exits on Fatal);
// StartTemporal turns such a panic during start into an error.
type serverLogger struct {
	log   *slog.Logger
	level *slog.LevelVar
	tags  []tag.Tag // from With, evaluated only when a line is written
}

var (
	_ log.Logger     = (*serverLogger)(nil)
	_ log.WithLogger = (*serverLogger)(nil)
)

func (l *serverLogger) Debug(msg string, tags ...tag.Tag)  { l.emit(slog.LevelDebug, msg, tags) }
func (l *serverLogger) Info(msg string, tags ...tag.Tag)   { l.emit(slog.LevelInfo, msg, tags) }
func (l *serverLogger) Warn(msg string, tags ...tag.Tag)   { l.emit(slog.LevelWarn, msg, tags) }
func (l *serverLogger) Error(msg string, tags ...tag.Tag)  { l.emit(slog.LevelError, msg, tags) }
func (l *serverLogger) DPanic(msg string, tags ...tag.Tag) { l.emit(slog.LevelError, msg, tags) }
func (l *serverLogger) Panic(msg string, tags ...tag.Tag)  { l.fail(msg, tags) }
func (l *serverLogger) Fatal(msg string, tags ...tag.Tag)  { l.fail(msg, tags) }

// serverFailure is the panic value of Panic and Fatal.
type serverFailure struct{ msg string }

func (f serverFailure) Error() string { return f.msg }

func (l *serverLogger) fail(msg string, tags []tag.Tag) {
	l.emit(slog.LevelError, msg, tags)
	for _, t := range tags {
		if t.Key() == "error" {
			msg += ": " + fmt.Sprint(t.Value())
		}
	}
	panic(serverFailure{msg: msg})
}

// With returns a logger that adds tags to every line.
func (l *serverLogger) With(tags ...tag.Tag) log.Logger {
	all := make([]tag.Tag, 0, len(l.tags)+len(tags))
	all = append(append(all, l.tags...), tags...)
	return &serverLogger{log: l.log, level: l.level, tags: all}
}

func (l *serverLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	if level < l.level.Level() || !l.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(l.tags)+len(tags))
	for _, t := range l.tags {
		attrs = append(attrs, attr(t))
	}
	for _, t := range tags {
		attrs = append(attrs, attr(t))
	}
	l.log.LogAttrs(ctx, level, msg, attrs...)
}

// attr converts a tag. The server's "error" becomes the project's "err",
// and its "component" (a part of the server) becomes "temporal_component"
// so as not to repeat the key of the whole adapter.
func attr(t tag.Tag) slog.Attr {
	switch key := t.Key(); key {
	case "error":
		return slog.Any("err", t.Value())
	case "component":
		return slog.Any("temporal_component", t.Value())
	default:
		return slog.Any(key, t.Value())
	}
}
