package proxy

import (
	"context"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// logLevels are the levels clients chose with logging/setLevel. Upstream
// connections are shared, so an upstream is set to the most verbose level
// any live session asked for, and mcp-go filters what each session gets by
// its own level.
type logLevels struct {
	mu      sync.Mutex
	session map[string]mcp.LoggingLevel
	applied mcp.LoggingLevel // what upstreams were last told
}

// severity orders levels from most verbose (0) to least.
var severity = map[mcp.LoggingLevel]int{
	mcp.LoggingLevelDebug: 0, mcp.LoggingLevelInfo: 1, mcp.LoggingLevelNotice: 2, mcp.LoggingLevelWarning: 3,
	mcp.LoggingLevelError: 4, mcp.LoggingLevelCritical: 5, mcp.LoggingLevelAlert: 6, mcp.LoggingLevelEmergency: 7,
}

// set records session's level and returns the level upstreams should now
// use, or "" when it is unchanged.
func (l *logLevels) set(session string, level mcp.LoggingLevel) mcp.LoggingLevel {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.session == nil {
		l.session = map[string]mcp.LoggingLevel{}
	}
	if level == "" {
		delete(l.session, session)
	} else {
		l.session[session] = level
	}
	var most mcp.LoggingLevel
	for _, lv := range l.session {
		if most == "" || severity[lv] < severity[most] {
			most = lv
		}
	}
	if most == "" || most == l.applied {
		return ""
	}
	l.applied = most
	return most
}

// afterSetLevel passes a client's logging/setLevel on to the upstreams.
func (s *Server) afterSetLevel(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
	s.applyLevel(s.levels.set(sessionID(ctx), req.Params.Level))
}

func (s *Server) applyLevel(level mcp.LoggingLevel) {
	if r := s.relay.Load(); r != nil && level != "" {
		r.Upstreams.SetLogLevel(string(level))
	}
}
