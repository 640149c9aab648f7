package authz

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// files is a model and a policy in one temp directory.
type files struct {
	dir, model, policy string
}

func newFiles(t testing.TB, model, policy string) files {
	t.Helper()
	dir := t.TempDir()
	f := files{dir: dir, model: filepath.Join(dir, "model.conf"), policy: filepath.Join(dir, "policy.csv")}
	if err := os.WriteFile(f.model, []byte(model), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.policy, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// rootFiles copies the repository's model.conf and policy.csv into a temp directory.
func rootFiles(t *testing.T) files {
	t.Helper()
	return newFiles(t, readRoot(t, rootModel), readRoot(t, rootPolicy))
}

// replaceFile replaces path the way editors do: write a temp file beside it, rename it over.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".swp")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// loadWith loads a policy (with the repository model unless model is given) or fails the test.
func loadWith(t *testing.T, model, policy string, o Options) *Policy {
	t.Helper()
	if model == "" {
		model = readRoot(t, rootModel)
	}
	f := newFiles(t, model, policy)
	p, err := LoadPolicy(f.model, f.policy, o)
	if err != nil {
		t.Fatalf("LoadPolicy:\n%v", err)
	}
	return p
}

// loadErr loads a policy that must fail and returns the problems.
func loadErr(t *testing.T, model, policy string, o Options) (files, *LoadErrors) {
	t.Helper()
	if model == "" {
		model = readRoot(t, rootModel)
	}
	f := newFiles(t, model, policy)
	p, err := LoadPolicy(f.model, f.policy, o)
	if err == nil {
		t.Fatalf("LoadPolicy accepted it (version %s)", p.Version())
	}
	le, ok := err.(*LoadErrors)
	if !ok {
		t.Fatalf("error is a %T, not *LoadErrors: %v", err, err)
	}
	return f, le
}

func req(principal, obj, args string, roles ...string) Request {
	r := Request{Subject: Subject{Principal: principal, Roles: roles}, Object: obj, Action: ActCall}
	if args != "" {
		r.Args = json.RawMessage(args)
	}
	return r
}

// logSink collects JSON log records.
type logSink struct {
	mu   sync.Mutex
	recs []map[string]any
	ch   chan map[string]any // if set, receives every record (tests wait on it, never sleep)
}

func newLog() (*slog.Logger, *logSink) {
	s := &logSink{}
	return slog.New(slog.NewJSONHandler(s, &slog.HandlerOptions{Level: slog.LevelDebug})), s
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil {
			s.recs = append(s.recs, m)
			if s.ch != nil {
				select {
				case s.ch <- m:
				default: // a full channel must not block the logger
				}
			}
		}
	}
	return len(p), nil
}

// find returns the records at level whose message contains msg.
func (s *logSink) find(level, msg string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, r := range s.recs {
		if r["level"] == level && strings.Contains(r["msg"].(string), msg) {
			out = append(out, r)
		}
	}
	return out
}

// traceAllows reads a trace as the model's policy effect (deny-override) does: allowed when an
// allow line applied and no deny line did. decidedBy are the lines that decided: every deny line
// that applied, else every allow line that applied. Package authz/explain reads a trace the same
// way; this keeps the agreement of Trace with Decide tested here, beside Decide.
func traceAllows(t Trace) (allowed bool, decidedBy []string) {
	var denies, allows []string
	for _, l := range t.Lines {
		if !l.Applied {
			continue
		}
		switch l.Effect {
		case effectDeny:
			denies = append(denies, l.Rule)
		case effectAllow:
			allows = append(allows, l.Rule)
		}
	}
	if len(denies) > 0 {
		return false, denies
	}
	return len(allows) > 0, allows
}

// firstApplied is the first line of lines that applied, "" if none did.
func firstApplied(lines []TracedLine) string {
	for _, l := range lines {
		if l.Applied {
			return l.Rule
		}
	}
	return ""
}

func asLoadError(err error, target **LoadError) bool {
	return errors.As(err, target)
}
