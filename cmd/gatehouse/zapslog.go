package main

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapLogger is a zap logger (what etcd's client and server log through)
// writing to lg from level min up, so that etcd's messages land in this
// process's log, in its format.
// Once *stopping holds (when not nil), its messages are logged at debug
// level: what a stopping etcd says about its closed listeners is noise.
func zapLogger(lg *slog.Logger, min zapcore.Level, stopping *atomic.Bool) *zap.Logger {
	return zap.New(&slogCore{lg: lg, min: min, stopping: stopping})
}

// slogCore is a zapcore.Core over a *slog.Logger.
type slogCore struct {
	lg       *slog.Logger
	min      zapcore.Level
	stopping *atomic.Bool
	fields   []zapcore.Field
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *slogCore) With(fs []zapcore.Field) zapcore.Core {
	return &slogCore{lg: c.lg, min: c.min, stopping: c.stopping, fields: append(slices.Clip(c.fields), fs...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fs {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, len(enc.Fields)+1)
	if e.LoggerName != "" {
		attrs = append(attrs, slog.String("logger", e.LoggerName))
	}
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	lvl := slog.LevelError
	switch {
	case e.Level < zapcore.InfoLevel:
		lvl = slog.LevelDebug
	case e.Level < zapcore.WarnLevel:
		lvl = slog.LevelInfo
	case e.Level < zapcore.ErrorLevel:
		lvl = slog.LevelWarn
	}
	if c.stopping != nil && c.stopping.Load() {
		lvl = slog.LevelDebug
	}
	c.lg.Log(context.Background(), lvl, e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }
