package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/lmittmann/tint"
	"github.com/toolgate/toolgate/internal/logsink"
)

// newLogger logs to stderr only (stdout carries the protocol in stdio
// mode): coloured, human-readable lines on a terminal, JSON otherwise so
// collectors can parse them. Lines reach stderr through a logsink.Writer,
// a few milliseconds late and several in one write (why: the package's
// comment); close it before the process exits.
func newLogger(level string) (*slog.Logger, *logsink.Writer, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("--log-level %q: expected debug, info, warn or error", level)
	}
	sink := logsink.New(os.Stderr, logsink.Options{})
	log := slog.New(logsink.Handler(handlerFor(sink, isTerminal(os.Stderr), lvl), sink))
	// Libraries that print with the standard log package (OpenTelemetry's
	// exporter errors) become lines of this log too, in order with the rest.
	slog.SetDefault(log)
	return log, sink, nil
}

func handlerFor(w io.Writer, terminal bool, lvl slog.Level) slog.Handler {
	if terminal {
		return tint.NewHandler(w, &tint.Options{Level: lvl})
	}
	return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// printProblems writes a multi-line error to w, one problem per line.
func printProblems(w io.Writer, what string, err error) {
	fmt.Fprintf(w, "toolgate: %s:\n", what)
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
}
