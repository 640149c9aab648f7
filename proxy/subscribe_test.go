package proxy

import (
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestSubscriptionsFirstAndLast(t *testing.T) {
	var s subscriptions
	if !s.add("u://1", "s1", "a") {
		t.Fatal("first subscriber of u://1 not first")
	}
	if s.add("u://1", "s2", "a") {
		t.Fatal("second subscriber counted as first")
	}
	s.add("u://2", "s1", "a")
	if got := s.sessions("a", "u://1"); len(got) != 2 {
		t.Errorf("sessions of u://1: %v", got)
	}
	if got := s.sessions("b", "u://1"); len(got) != 0 {
		t.Errorf("another server's update reached %v", got)
	}
	if _, last := s.remove("u://1", "s1"); last {
		t.Error("s2 still subscribes, yet s1's leaving was the last")
	}
	if srv, last := s.remove("u://1", "s2"); !last || srv != "a" {
		t.Errorf("last unsubscribe: %q %v", srv, last)
	}
	if _, last := s.remove("u://1", "s2"); last {
		t.Error("unsubscribing twice unsubscribed upstream twice")
	}
	if got := s.uris("s1"); !slices.Equal(got, []string{"u://2"}) {
		t.Errorf("s1 subscribes to %v", got)
	}
}

func TestLogLevelsMostVerboseWins(t *testing.T) {
	var l logLevels
	steps := []struct {
		session string
		level   mcp.LoggingLevel
		want    mcp.LoggingLevel // "" = upstreams are not told again
	}{
		{"s1", mcp.LoggingLevelError, mcp.LoggingLevelError},
		{"s2", mcp.LoggingLevelDebug, mcp.LoggingLevelDebug},
		{"s1", mcp.LoggingLevelWarning, ""}, // s2 still wants debug
		{"s2", "", mcp.LoggingLevelWarning}, // s2 left
		{"s1", "", ""},                      // nobody left: keep the last level
	}
	for i, st := range steps {
		if got := l.set(st.session, st.level); got != st.want {
			t.Errorf("step %d (%s=%q): upstreams told %q, want %q", i, st.session, st.level, got, st.want)
		}
	}
}
