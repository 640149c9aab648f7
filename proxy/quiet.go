package proxy

import (
	"context"
	"log/slog"
)

// atLeast passes on only records at or above min. mcp-go logs every
// request at info; the pipeline already writes the one line per call that
// matters, so the library's own lines are kept for warnings and errors.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{h.Handler.WithAttrs(attrs), h.min}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.Handler.WithGroup(name), h.min}
}

// libraryLogger is log restricted to warnings and errors.
func libraryLogger(log *slog.Logger) *slog.Logger {
	return slog.New(atLeast{log.Handler(), slog.LevelWarn})
}
