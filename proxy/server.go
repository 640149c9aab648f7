package proxy

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/dedup"
	"github.com/toolgate/toolgate/discovery"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/internal/listenstream"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/upstreams"
)

// unresolvedTool is registered (never listed) to receive calls of names
// the catalog does not have, so they too get an envelope (tool_not_found)
// instead of a bare JSON-RPC error. ':' cannot occur in a catalog name.
const unresolvedTool = "toolgate:unresolved"

// requestedNameKey carries the name the client asked for into the
// unresolved tool's handler.
const requestedNameKey = "io.toolgate/requested-name"

// Server is the MCP server clients talk to.
type Server struct {
	mcp      *server.MCPServer
	identity mcp.Implementation // the server's, which 2026-07-28 results carry (decorateModern)
	opts     Options
	log      *slog.Logger
	sessions sync.Map // session id -> *clientSession: per-client list_changed, fast calls
	declared pendingCaps
	// stdioTaken counts the tools/calls the stdio fast path answered.
	stdioTaken atomic.Uint64

	relay    atomic.Pointer[FeatureRelay] // nil until SetFeatureRelay
	syncMu   sync.Mutex                   // serialises SyncFeatures
	synced   syncedFeatures               // what SyncFeatures registered last
	subs     subscriptions
	levels   logLevels
	parked   parkedCalls     // 2026-07-28 calls waiting for their client's input
	searches discovery.Cache // the search index of the latest catalog (discovery.go)
	// listening counts the GET streams of HTTP sessions (see listening.go).
	listening listenstream.Streams
}

// NewServer builds the client-facing MCP server around the chain that runs
// its tools/calls, and registers the current catalog.
func NewServer(opts Options, version string, log *slog.Logger) *Server {
	s := &Server{opts: opts, log: log, identity: mcp.Implementation{Name: "toolgate", Version: version}}
	hooks := &server.Hooks{}
	hooks.AddAfterListTools(s.filterList)
	hooks.AddBeforeCallTool(s.routeUnknown)
	hooks.AddAfterInitialize(func(ctx context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) {
		if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
			s.noteInitialize(cs.SessionID(), req.Params.Capabilities, req.Params.ClientInfo.Name)
		}
	})
	hooks.AddOnRegisterSession(func(ctx context.Context, cs server.ClientSession) {
		e := &clientSession{subject: SubjectFrom(ctx)}
		if p, ok := s.declared.take(cs.SessionID()); ok {
			e.caps.Store(&p.caps)
			e.client.Store(&p.client)
		}
		e.cs.Store(&cs)
		s.sessions.Store(cs.SessionID(), e)
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) {
		s.sessions.Delete(cs.SessionID())
		s.dropSession(cs.SessionID())
		s.applyLevel(s.levels.set(cs.SessionID(), ""))
	})
	hooks.AddAfterListResources(s.filterResources)
	hooks.AddAfterListResourceTemplates(s.filterTemplates)
	hooks.AddOnRequestInitialization(s.interceptSubscription)
	hooks.AddOnRequestInitialization(s.refuseStaleState)
	hooks.AddAfterSetLevel(s.afterSetLevel)
	s.mcp = server.NewMCPServer(s.identity.Name, s.identity.Version,
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithPromptFilter(s.filterPrompts),
		server.WithPromptCompletionProvider(completer{s}),
		server.WithResourceCompletionProvider(completer{s}),
		server.WithRecovery(),
		server.WithHooks(hooks),
		server.WithLogger(libraryLogger(log)),
		server.WithInstructions("toolgate fronts several tool servers. Every tool answers with structured content "+
			"{ok, data, error_code, message, retryable}; when ok is false, read error_code and retryable before trying again."),
	)
	s.SyncTools(opts.Catalog())
	return s
}

// MCP returns the underlying mcp-go server.
func (s *Server) MCP() *server.MCPServer { return s.mcp }

// SyncTools replaces the registered tools with the catalog's. mcp-go tells
// connected clients (tools/list_changed) by itself.
func (s *Server) SyncTools(cat *upstreams.Catalog) {
	s.SyncFeatures(cat.Features())
	tools := make([]server.ServerTool, 0, len(cat.Tools())+3)
	for _, t := range cat.Tools() {
		tools = append(tools, server.ServerTool{Tool: clientTool(t), Handler: s.handle})
	}
	tools = append(tools, s.metaTools()...)
	tools = append(tools, server.ServerTool{Tool: mcp.Tool{
		Name: unresolvedTool, RawInputSchema: json.RawMessage(`{"type":"object"}`),
		RawOutputSchema: envelope.OutputSchema(nil),
	}, Handler: s.handle})
	s.mcp.SetTools(tools...)
}

// clientTool is how a catalog entry is advertised: the upstream's input
// schema unchanged, an output schema describing the envelope.
func clientTool(t *upstreams.Tool) mcp.Tool {
	return mcp.Tool{
		Name:            t.Name,
		Title:           t.Title,
		Description:     t.Description,
		RawInputSchema:  t.InputSchema,
		RawOutputSchema: envelope.OutputSchema(t.OutputSchema),
		Annotations:     t.Annotations,
	}
}

// handle is the one tools/call handler: everything goes through the
// chain.
func (s *Server) handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	caps := s.callerCaps(ctx, req.Params.Meta)
	ctx = s.withClientRelay(pipeline.WithInteraction(ctx), caps)
	call := s.callFrom(ctx, &req.Params)
	if server.IsModernRequest(ctx) {
		return s.handleModern(ctx, req, call, caps)
	}
	return s.opts.Calls.Handle(ctx, call), nil
}

// callFrom is a tools/call as the chain takes it. Both paths build every
// call here: mcp-go's handler (handle) and the fast path (fastCalls.serve),
// so that what either reads of a request is the same. ctx is the call's:
// it holds the subject, the client session (its ID), and the server that
// sends the client progress.
func (s *Server) callFrom(ctx context.Context, p *mcp.CallToolParams) Call {
	name, meta := p.Name, p.Meta
	call := Call{Subject: SubjectFrom(ctx), Session: sessionID(ctx), Name: name, Args: p.RawArguments,
		Progress: s.progressRelay(ctx, meta), Toolset: s.toolsetOf(ctx, meta)}
	if meta != nil && len(meta.AdditionalFields) > 0 {
		call.TraceMeta = meta.AdditionalFields
	}
	if name == unresolvedTool {
		call.Name = requestedName(meta)
		if _, noted := call.TraceMeta[requestedNameKey]; noted { // routeUnknown's note is not the client's
			if len(call.TraceMeta) == 1 {
				call.TraceMeta = nil
			} else {
				call.TraceMeta = maps.Clone(call.TraceMeta)
				delete(call.TraceMeta, requestedNameKey)
			}
		}
	}
	unwrapDiscoveryCall(&call)
	if key, err := dedup.IdempotencyKeyFrom(meta); err != nil {
		s.log.Info("idempotency key ignored", "tool", call.Name, "reason", err.Error())
	} else {
		call.IdempotencyKey = key
	}
	return call
}

// session is the entry of a registered session, or nil.
func (s *Server) session(id string) *clientSession {
	if e, ok := s.sessions.Load(id); ok {
		return e.(*clientSession)
	}
	return nil
}

// routeUnknown sends a call of a name mcp-go does not know to the
// unresolved tool, remembering the requested name.
func (s *Server) routeUnknown(_ context.Context, _ any, req *mcp.CallToolRequest) {
	if s.mcp.GetTool(req.Params.Name) != nil && req.Params.Name != unresolvedTool {
		return
	}
	if req.Params.Meta == nil {
		req.Params.Meta = &mcp.Meta{}
	}
	if req.Params.Meta.AdditionalFields == nil {
		req.Params.Meta.AdditionalFields = map[string]any{}
	}
	req.Params.Meta.AdditionalFields[requestedNameKey] = req.Params.Name
	req.Params.Name = unresolvedTool
}

// requestedName is the name routeUnknown noted in meta.
func requestedName(meta *mcp.Meta) string {
	if meta != nil {
		if name, ok := meta.AdditionalFields[requestedNameKey].(string); ok {
			return name
		}
	}
	return unresolvedTool
}

// filterList leaves in a tools/list answer exactly the tools the caller may
// call, in its toolset (and never the unresolved stand-in).
func (s *Server) filterList(ctx context.Context, _ any, req *mcp.ListToolsRequest, result *mcp.ListToolsResult) {
	if result == nil {
		return
	}
	var meta *mcp.Meta
	if req != nil {
		meta = req.Params.Meta
	}
	set := s.toolsetOf(ctx, meta)
	if set.Discovers() {
		result.Tools = discovery.Tools()
		return
	}
	subject := SubjectFrom(ctx)
	cat := s.opts.Catalog()
	policy := s.opts.Policy()
	kept := result.Tools[:0:0]
	for _, t := range result.Tools {
		entry, ok := cat.Resolve(t.Name)
		if !ok || entry.Unreachable || entry.Changed {
			continue
		}
		if set.Has(entry.ID) && policy.Visible(subject, entry.ID) {
			kept = append(kept, t)
		}
	}
	result.Tools = kept
}

// PolicyChanged sends notifications/tools/list_changed to every client
// whose visible tools differ between the old and the new policy, and to
// no one else. Calls need no notice: each is decided by the policy in force
// when it arrives.
func (s *Server) PolicyChanged(old, new Policy) {
	tools := s.opts.Catalog().Tools()
	s.sessions.Range(func(key, value any) bool {
		id, subject := key.(string), value.(*clientSession).subject
		for _, t := range tools {
			if old.Visible(subject, t.ID) != new.Visible(subject, t.ID) {
				if err := s.mcp.SendNotificationToSpecificClient(id, string(mcp.MethodNotificationToolsListChanged), nil); err != nil {
					s.log.Debug("tools/list_changed not delivered", "session", id, "err", err)
				}
				break
			}
		}
		return true
	})
}

// progressRelay forwards an upstream's progress to the client under the
// client's own token, its message redacted, or is nil when the client
// asked for no progress. It goes through the context's session: on the
// fast path, the call's callSession, so it travels on the call's own
// response.
func (s *Server) progressRelay(ctx context.Context, meta *mcp.Meta) func(upstreams.Progress) {
	if meta == nil || meta.ProgressToken == nil {
		return nil
	}
	token, srv := meta.ProgressToken, s.mcp
	return func(p upstreams.Progress) {
		params := map[string]any{"progressToken": token, "progress": p.Progress}
		if p.Total != nil {
			params["total"] = *p.Total
		}
		if p.Message != "" { // sanitised by the connection; its secrets are ours to hide
			params["message"] = s.opts.Redact.Text(p.Message)
		}
		_ = srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), params)
	}
}

// Shutdown ends the 2026-07-28 calls still running, parked for input their
// clients have not given or not: each is cancelled (the upstream is told,
// the outcome recorded, as when its deadline passes) and waited for, at
// most until ctx ends. Calls that arrive afterwards do not run. Call it
// once no client request is being served (after the listeners stopped),
// before the upstreams close.
func (s *Server) Shutdown(ctx context.Context) error { return s.parked.shutdown(ctx) }
