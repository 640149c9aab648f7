package conformanceserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const (
	staticTextURI   = "test://static-text"
	staticText      = "This is the content of the static text resource."
	staticBinaryURI = "test://static-binary"
	watchedURI      = "test://watched-resource"
	templateURI     = "test://template/{id}/data"
)

func addResources(s *server.MCPServer, subs *subscriptions) {
	s.AddResource(mcp.NewResource(staticTextURI, "static-text",
		mcp.WithResourceDescription("A static text resource"), mcp.WithMIMEType("text/plain")),
		fixedContents(mcp.TextResourceContents{URI: staticTextURI, MIMEType: "text/plain", Text: staticText}))
	s.AddResource(mcp.NewResource(staticBinaryURI, "static-binary",
		mcp.WithResourceDescription("A static binary resource (1x1 red PNG)"), mcp.WithMIMEType("image/png")),
		fixedContents(mcp.BlobResourceContents{URI: staticBinaryURI, MIMEType: "image/png", Blob: redPixelPNG}))

	// The watched resource changes whenever test_update_resource is called, which is what gives
	// resources/subscribe a meaning: subscribers get notifications/resources/updated.
	var version atomic.Int64
	s.AddResource(mcp.NewResource(watchedURI, "watched-resource",
		mcp.WithResourceDescription("A resource that changes on test_update_resource; subscribe to it"),
		mcp.WithMIMEType("text/plain")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			text := fmt.Sprintf("Watched resource, version %d", version.Load())
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: watchedURI, MIMEType: "text/plain", Text: text}}, nil
		})
	s.AddTool(mcp.NewTool("test_update_resource",
		mcp.WithDescription("Marks a resource as changed and notifies the sessions subscribed to it"),
		mcp.WithString("uri", mcp.Description("Resource URI (default "+watchedURI+")"))),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			uri := req.GetString("uri", watchedURI)
			if uri == watchedURI {
				version.Add(1)
			}
			n := subs.notify(s, uri)
			return mcp.NewToolResultText(fmt.Sprintf("Resource %s updated; %d subscribed session(s) notified", uri, n)), nil
		})

	s.AddResourceTemplate(mcp.NewResourceTemplate(templateURI, "template-data",
		mcp.WithTemplateDescription("JSON data for any id"), mcp.WithTemplateMIMEType("application/json")),
		readTemplate)
}

func fixedContents(c mcp.ResourceContents) server.ResourceHandlerFunc {
	return func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{c}, nil
	}
}

func readTemplate(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	id := templateArg(req.Params.Arguments["id"])
	body, err := json.Marshal(struct {
		ID           string `json:"id"`
		TemplateTest bool   `json:"templateTest"`
		Data         string `json:"data"`
	}{id, true, "Data for ID: " + id})
	if err != nil {
		return nil, err
	}
	return []mcp.ResourceContents{
		mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json", Text: string(body)},
	}, nil
}

// templateArg unwraps a matched URI template variable: mcp-go hands over the matcher's []string.
func templateArg(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []string:
		if len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// subscriptions records which sessions subscribed to which URIs. mcp-go acknowledges
// resources/subscribe itself but keeps no record unless the session type implements
// SessionWithResourceSubscriptions, which its own HTTP and stdio sessions do not; hooks do it here.
type subscriptions struct {
	mu   sync.Mutex
	uris map[string][]string // uri -> session IDs
}

func newSubscriptions() *subscriptions { return &subscriptions{uris: map[string][]string{}} }

func (s *subscriptions) install(h *server.Hooks) {
	h.AddAfterSubscribe(func(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		if id := sessionID(ctx); id != "" {
			s.add(req.Params.URI, id)
		}
	})
	h.AddAfterUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		s.remove(req.Params.URI, sessionID(ctx))
	})
	h.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) { s.dropSession(cs.SessionID()) })
}

func sessionID(ctx context.Context) string {
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		return cs.SessionID()
	}
	return ""
}

func (s *subscriptions) add(uri, session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.uris[uri], session) {
		s.uris[uri] = append(s.uris[uri], session)
	}
}

func (s *subscriptions) remove(uri, session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uris[uri] = slices.DeleteFunc(s.uris[uri], func(id string) bool { return id == session })
	if len(s.uris[uri]) == 0 {
		delete(s.uris, uri)
	}
}

func (s *subscriptions) dropSession(session string) {
	s.mu.Lock()
	uris := make([]string, 0, len(s.uris))
	for uri := range s.uris {
		uris = append(uris, uri)
	}
	s.mu.Unlock()
	for _, uri := range uris {
		s.remove(uri, session)
	}
}

// notify sends notifications/resources/updated to every session subscribed to uri and returns
// how many it reached.
func (s *subscriptions) notify(srv *server.MCPServer, uri string) int {
	s.mu.Lock()
	sessions := slices.Clone(s.uris[uri])
	s.mu.Unlock()
	n := 0
	for _, id := range sessions {
		err := srv.SendNotificationToSpecificClient(id, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri})
		if err == nil {
			n++
		}
	}
	return n
}
