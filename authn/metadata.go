package authn

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
)

// wellKnown is RFC 9728's registered well-known suffix.
const wellKnown = "/.well-known/oauth-protected-resource"

// metadata is the RFC 9728 protected-resource metadata document, serialised once, and again when
// the scopes it lists change (SetScopesSupported).
type metadata struct {
	url   string   // where clients fetch it; named by resource_metadata in challenges
	paths []string // where to mount the handler
	doc   resourceMetadata
	mu    sync.Mutex // serialises SetScopesSupported
	body  atomic.Pointer[[]byte]
}

// resourceMetadata is the document. Fields without a value in toolgate's configuration are left out.
type resourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name"`
	// ScopesSupported are the scopes the policy's scope lines name (RFC 9728 section 2): left out
	// when there are none, which tells an MCP client to request no particular scope.
	ScopesSupported []string `json:"scopes_supported,omitempty"`
}

// newMetadata builds the document for resource; issuer is "" when JWT is not configured. The URL follows
// RFC 9728 §3.1: the well-known path goes between the host and the resource's path, and a lone "/" path
// is dropped.
func newMetadata(resource, issuer string) (*metadata, error) {
	u, err := url.Parse(resource)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("authn: auth.resource %q is not an absolute URL", resource)
	}
	path := u.EscapedPath()
	if path == "/" {
		path = ""
	}
	doc := resourceMetadata{
		Resource:               resource,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "toolgate",
	}
	if issuer != "" {
		doc.AuthorizationServers = []string{issuer}
	}
	paths := []string{wellKnown + path}
	if path != "" {
		paths = append(paths, wellKnown)
	}
	m := &metadata{url: u.Scheme + "://" + u.Host + wellKnown + path, paths: paths, doc: doc}
	m.publish()
	return m, nil
}

// publish serialises m.doc as the body served from now on. Marshalling strings and string slices
// cannot fail.
func (m *metadata) publish() {
	body, _ := json.Marshal(m.doc)
	m.body.Store(&body)
}

// SetScopesSupported sets the scopes_supported the protected-resource metadata lists (the gateway
// passes the scopes its policy's scope lines name, on every policy load); nil or empty leaves the
// field out. Requests already being answered keep the document they started with. It does nothing
// without Options.Resource (no metadata is served).
func (a *Authenticator) SetScopesSupported(scopes []string) {
	if a.meta == nil {
		return
	}
	a.meta.mu.Lock()
	defer a.meta.mu.Unlock()
	a.meta.doc.ScopesSupported = slices.Clone(scopes)
	a.meta.publish()
}

// ProtectedResourceMetadata serves the RFC 9728 metadata document, or is nil when Options.Resource is not
// set. Mount it at each of MetadataPaths. It answers GET and HEAD (and CORS preflight: the document is
// public, and browser-based clients fetch it cross-origin).
func (a *Authenticator) ProtectedResourceMetadata() http.Handler {
	if a.meta == nil {
		return nil
	}
	return a.meta
}

// MetadataURL is the URL resource_metadata names in challenges, or "" without Options.Resource.
func (a *Authenticator) MetadataURL() string {
	if a.meta == nil {
		return ""
	}
	return a.meta.url
}

// MetadataPaths are the request paths at which to serve ProtectedResourceMetadata: the RFC 9728 path for
// the resource first, then the bare well-known path for clients that only try that one. Nil without
// Options.Resource.
func (a *Authenticator) MetadataPaths() []string {
	if a.meta == nil {
		return nil
	}
	return slices.Clone(a.meta.paths)
}

func (m *metadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodOptions:
		h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
		return
	default:
		h.Set("Allow", "GET, HEAD, OPTIONS")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h.Set("Content-Type", "application/json")
	// An hour at most: scopes_supported follows the policy, which may change.
	h.Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(*m.body.Load())
}
