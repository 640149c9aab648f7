package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/upstreams"
)

// Everything an upstream offers besides tools is relayed here: resources
// and resource templates, subscriptions, prompts, completions and logging.
// Tools go through the pipeline and answer envelopes; these answer in
// their own MCP shapes, and an error is a JSON-RPC error whose message
// never carries internals.
//
// Policy applies to them with their own actions (see authz.ActRead and
// authz.ActGet): lists show only what the caller may read or get, and every
// read, get, subscription and completion is decided like a call, by the
// policy snapshot of the moment. Default deny holds: no line, no access.

// Forwarder is what the relay needs of the upstreams (upstreams.Set).
type Forwarder interface {
	Forward(ctx context.Context, server, method string, params any) (json.RawMessage, error)
	SetLogLevel(level string)
}

// FeatureRelay connects the server to the upstreams for everything that is
// not a tool call.
type FeatureRelay struct {
	Upstreams Forwarder
	// Timeout bounds one forwarded request to server (for the gateway: the
	// server's call timeout).
	Timeout func(server string) time.Duration
}

// errNotAllowed and the other client-facing errors say what happened and
// nothing of how (no policy lines, paths or upstream internals).
var (
	errNotAllowed  = errors.New("not allowed by the gateway's policy")
	errUnavailable = errors.New("the upstream server is unavailable; try again later")
	errUpstream    = errors.New("the upstream server failed to answer")
	errTimeout     = errors.New("the upstream server did not answer in time")
	errNoRelay     = errors.New("not available through this gateway")
)

// SetFeatureRelay turns on relaying of resources, prompts, completions and
// logging; until it is called their requests fail.
func (s *Server) SetFeatureRelay(r FeatureRelay) {
	s.relay.Store(&r)
}

// SyncFeatures registers the catalog's resources, templates and prompts;
// mcp-go tells clients of the changes (list_changed) itself.
//
// A kind whose list did not change is left alone: re-setting it would send
// clients a needless list_changed, and mcp-go empties a registry before it
// refills it (a read in between would not find its resource).
func (s *Server) SyncFeatures(f *upstreams.Features) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	res := make([]server.ServerResource, 0, len(f.Resources()))
	for _, r := range f.Resources() {
		res = append(res, server.ServerResource{Resource: r.Resource, Handler: s.readResource(r.Server)})
	}
	if changed(&s.synced.resources, f.Resources()) {
		s.mcp.SetResources(res...)
	}
	tmpls := make([]server.ServerResourceTemplate, 0, len(f.Templates()))
	for _, t := range f.Templates() {
		tmpls = append(tmpls, server.ServerResourceTemplate{Template: t.Template, Handler: s.readThroughTemplate})
	}
	if changed(&s.synced.templates, f.Templates()) {
		s.mcp.SetResourceTemplates(tmpls...)
	}
	prompts := make([]server.ServerPrompt, 0, len(f.Prompts()))
	for _, p := range f.Prompts() {
		prompts = append(prompts, server.ServerPrompt{Prompt: p.Prompt, Handler: s.getPrompt})
	}
	if changed(&s.synced.prompts, f.Prompts()) {
		s.mcp.SetPrompts(prompts...)
	}
}

// syncedFeatures are the encodings last registered, per kind.
type syncedFeatures struct{ resources, templates, prompts string }

// changed reports whether v's encoding differs from *last, and records it.
func changed(last *string, v any) bool {
	b, err := json.Marshal(v)
	if err != nil || string(b) != *last {
		*last = string(b)
		return true
	}
	return false
}

// readThroughTemplate reads a URI matched by a template from the server
// that owns it (config order decides between overlapping templates, the
// same way subscriptions and completions decide).
func (s *Server) readThroughTemplate(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	srv, ok := s.features().Owner(req.Params.URI)
	if !ok {
		return nil, fmt.Errorf("resource %q not found", sanitize.Clip(req.Params.URI, 200))
	}
	return s.readResource(srv)(ctx, req)
}

// features is the current catalog's non-tool part.
func (s *Server) features() *upstreams.Features { return s.opts.Catalog().Features() }

// permit decides one non-tool request. args are what conditions read.
func (s *Server) permit(ctx context.Context, obj, act string, args any) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return errNotAllowed
	}
	d := s.opts.Policy().Decide(authz.Request{Subject: SubjectFrom(ctx), Object: obj, Action: act, Args: raw})
	if d.Internal != nil {
		s.log.Error("authorization failed", "object", obj, "action", act, "err", d.Internal)
	}
	if !d.Allowed {
		s.log.Info("denied", "principal", SubjectFrom(ctx).Principal, "object", obj, "action", act, "rule", d.Rule)
		return errNotAllowed
	}
	return s.checkScopes(ctx, obj, act)
}

// checkScopes refuses a request the policy allows when the caller's
// access token lacks a scope its scope lines require, noting the
// challenge for the HTTP transport (answerScopeChallenges), as the
// chain's scopes link does for tools/call. The error names the scopes.
func (s *Server) checkScopes(ctx context.Context, obj, act string) error {
	sub := SubjectFrom(ctx)
	check := s.opts.Policy().CheckScopes(authz.Request{Subject: sub, Object: obj, Action: act})
	if len(check.Missing) == 0 {
		return nil
	}
	s.log.Info("insufficient scope", "principal", sub.Principal, "object", obj, "action", act,
		"missing", strings.Join(check.Missing, " "), "rules", strings.Join(check.Rules, ", "))
	pipeline.NoteScopeChallenge(ctx, pipeline.ChallengeScopes(sub.Scopes, check.Missing))
	return fmt.Errorf("insufficient_scope: this request needs the OAuth scope %s, which the access token lacks; authorize again asking for it, then repeat the request",
		strings.Join(check.Missing, " "))
}

// visible reports whether the caller may ever act on obj, for lists.
func (s *Server) visible(ctx context.Context, obj, act string) bool {
	return s.opts.Policy().VisibleAct(SubjectFrom(ctx), obj, act)
}

// forward sends one request upstream within the server's timeout, with
// requests the upstream makes meanwhile relayed to this client.
func (s *Server) forward(ctx context.Context, srv, method string, params any) (json.RawMessage, error) {
	r := s.relay.Load()
	if r == nil {
		return nil, errNoRelay
	}
	if r.Timeout != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout(srv))
		defer cancel()
	}
	start := time.Now()
	raw, err := r.Upstreams.Forward(s.withClientRelay(ctx, s.callerCaps(ctx, nil)), srv, method, params)
	// One line per forwarded request, like the record stage's for calls.
	attrs := []any{"principal", SubjectFrom(ctx).Principal, "server", srv, "session", sessionID(ctx),
		"duration_ms", time.Since(start).Milliseconds()}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	s.opts.Metrics.ForwardedRequest(method, srv, outcome, time.Since(start))
	if err != nil {
		s.log.Info(method, append(attrs, "outcome", "error", "reason", s.opts.Redact.Text(sanitize.Text(err.Error())))...)
		return nil, s.clientError(ctx, err)
	}
	s.log.Info(method, append(attrs, "outcome", "ok")...)
	return raw, nil
}

// clientError turns an upstream failure into what the client is told: the
// upstream's own JSON-RPC error (sanitised) when it answered one, else a
// fixed sentence. (The cause is in the request's log line.)
func (s *Server) clientError(ctx context.Context, err error) error {
	var ce *upstreams.CallError
	switch {
	case errors.As(err, &ce) && ce.RPC != nil:
		return fmt.Errorf("upstream error %d: %s", ce.RPC.Code, sanitize.Clip(s.opts.Redact.Text(sanitize.Text(ce.RPC.Message)), 500))
	case errors.As(err, &ce) && ce.Where == upstreams.NotSent:
		return errUnavailable
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return errTimeout
	}
	return errUpstream
}

// readResource reads a resource (listed, or matching one of the server's
// templates) from its server.
func (s *Server) readResource(srv string) server.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		uri := req.Params.URI
		if err := s.permit(ctx, srv+"/"+uri, authz.ActRead, map[string]any{"uri": uri}); err != nil {
			return nil, err
		}
		raw, err := s.forward(ctx, srv, string(mcp.MethodResourcesRead), map[string]any{"uri": uri})
		if err != nil {
			return nil, err
		}
		res, err := mcp.ParseReadResourceResult(&raw)
		if err != nil {
			s.log.Info("malformed resources/read result", "server", srv, "err", sanitize.Text(err.Error()))
			return nil, errUpstream
		}
		out := make([]mcp.ResourceContents, 0, len(res.Contents))
		for _, c := range res.Contents {
			out = append(out, pipeline.RedactResource(s.opts.Redact, pipeline.CleanResource(c)))
		}
		return out, nil
	}
}

// getPrompt gets a prompt from its server, arguments as the client gave
// them.
func (s *Server) getPrompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	p, ok := s.features().Prompt(req.Params.Name)
	if !ok {
		return nil, fmt.Errorf("prompt %q not found", sanitize.Clip(req.Params.Name, 200))
	}
	args := req.Params.Arguments
	if args == nil {
		args = map[string]string{}
	}
	if err := s.permit(ctx, p.ID, authz.ActGet, args); err != nil {
		return nil, err
	}
	raw, err := s.forward(ctx, p.Server, string(mcp.MethodPromptsGet), map[string]any{"name": p.Upstream, "arguments": args})
	if err != nil {
		return nil, err
	}
	res, err := mcp.ParseGetPromptResult(&raw)
	if err != nil {
		s.log.Info("malformed prompts/get result", "server", p.Server, "err", sanitize.Text(err.Error()))
		return nil, errUpstream
	}
	return cleanPrompt(res, s.opts.Redact)
}

// cleanPrompt builds the client's result fresh (no upstream _meta), with
// every text sanitised and redacted like a tool's content.
func cleanPrompt(res *mcp.GetPromptResult, r *redact.Redactor) (*mcp.GetPromptResult, error) {
	out := &mcp.GetPromptResult{Description: r.Text(sanitize.Text(res.Description))}
	for _, m := range res.Messages {
		c, err := pipeline.CleanBlock(m.Content)
		if err != nil {
			return nil, errUpstream
		}
		c = pipeline.RedactContent(r, c)
		out.Messages = append(out.Messages, mcp.PromptMessage{Role: m.Role, Content: c})
	}
	return out, nil
}

// filterResources leaves in resources/list what the caller may read.
func (s *Server) filterResources(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, result *mcp.ListResourcesResult) {
	if result == nil {
		return
	}
	f := s.features()
	kept := result.Resources[:0:0]
	for _, r := range result.Resources {
		if e, ok := f.Resource(r.URI); ok && s.visible(ctx, e.ID, authz.ActRead) {
			kept = append(kept, r)
		}
	}
	result.Resources = kept
}

// filterTemplates leaves in resources/templates/list the templates the
// caller may read through.
func (s *Server) filterTemplates(ctx context.Context, _ any, _ *mcp.ListResourceTemplatesRequest, result *mcp.ListResourceTemplatesResult) {
	if result == nil {
		return
	}
	f := s.features()
	kept := result.ResourceTemplates[:0:0]
	for _, t := range result.ResourceTemplates {
		if t.URITemplate == nil || t.URITemplate.Template == nil {
			continue
		}
		raw := t.URITemplate.Raw()
		if srv, ok := f.TemplateOwner(raw); ok && s.visible(ctx, srv+"/"+raw, authz.ActRead) {
			kept = append(kept, t)
		}
	}
	result.ResourceTemplates = kept
}

// filterPrompts leaves in prompts/list (and gettable, mcp-go applies it to
// prompts/get too) the prompts the caller may get.
func (s *Server) filterPrompts(ctx context.Context, prompts []mcp.Prompt) []mcp.Prompt {
	f := s.features()
	kept := make([]mcp.Prompt, 0, len(prompts))
	for _, p := range prompts {
		if e, ok := f.Prompt(p.Name); ok && s.visible(ctx, e.ID, authz.ActGet) {
			kept = append(kept, p)
		}
	}
	return kept
}
