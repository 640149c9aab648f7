package proxy

import (
	"net/http"

	"github.com/toolgate/toolgate/pipeline"
)

// answerScopeChallenges lets a request whose token lacks a scope be
// answered as the MCP authorization specification asks ("Scope Challenge
// Handling"): HTTP 403 with a WWW-Authenticate insufficient_scope
// challenge, on which a client steps up, rather than a 200 carrying a
// JSON-RPC answer, on which it cannot. The links that find a scope
// missing (pipeline.Scopes for tools/call, Server.permit for
// resources/read, prompts/get and completions) note it on the request's
// pipeline.ScopeChallenge; this wrapper puts one on every request and,
// when the answer is about to be written with status 200 and a challenge
// was noted, writes answer's 403 instead and drops the JSON-RPC body
// (which carried the insufficient_scope envelope or error). It works the
// same for the fast path and for mcp-go's handler, whose tool handlers
// run on the request's context.
//
// A response already started (an event stream the fast path or mcp-go
// opened for notifications before the answer) cannot change its status:
// it carries the envelope (code insufficient_scope), as stdio does. nil
// answer: no 403s (no challenge could be built).
func answerScopeChallenges(next http.Handler, answer func(w http.ResponseWriter, scopes []string)) http.Handler {
	if answer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, challenge := pipeline.WithScopeChallenge(r.Context())
		next.ServeHTTP(&challengeWriter{ResponseWriter: w, challenge: challenge, answer: answer}, r.WithContext(ctx))
	})
}

// challengeWriter decides at the response's first write whether it is
// the 403 or what the handler meant.
type challengeWriter struct {
	http.ResponseWriter
	challenge *pipeline.ScopeChallenge
	answer    func(w http.ResponseWriter, scopes []string)
	decided   bool // the first write happened
	replaced  bool // and it was the 403: what the handler writes is dropped
}

func (c *challengeWriter) WriteHeader(status int) {
	if c.start(status) {
		c.ResponseWriter.WriteHeader(status)
	}
}

func (c *challengeWriter) Write(b []byte) (int, error) {
	if !c.start(http.StatusOK) {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

// Flush streams what the handler wrote; nothing once the 403 replaced it.
// A flush before any write starts the response (with status 200) as the
// real writer's would.
func (c *challengeWriter) Flush() {
	if !c.start(http.StatusOK) {
		return
	}
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// start decides, at the response's first write, whether it is the 403:
// a challenge was noted and the handler starts a 200. It reports whether
// the handler's writes go through (false: the 403 replaced them).
func (c *challengeWriter) start(status int) bool {
	if !c.decided {
		c.decided = true
		if scopes, noted := c.challenge.Scopes(); noted && status == http.StatusOK {
			h := c.ResponseWriter.Header()
			for _, k := range []string{"Content-Type", "Content-Length", "Connection", "Cache-Control"} {
				h.Del(k)
			}
			c.answer(c.ResponseWriter, scopes)
			c.replaced = true
		}
	}
	return !c.replaced
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *challengeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
