package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/sanitize"
)

// Which protocol era an upstream speaks, when its config does not say
// (issue 17, item 7). toolgate starts with the initialize handshake
// (2025-11-25), which every server released before 2026 speaks. A server
// that speaks only 2026-07-28 refuses initialize: over Streamable HTTP
// with an HTTP 4xx (mcp-go reports it as ErrLegacySSEServer), over either
// transport with a JSON-RPC error that says the method or the version is
// unknown. Then toolgate tries server/discover in 2026-07-28 on a new
// connection (a fresh transport; over stdio a fresh process, since the
// first one may have been left in any state by the refused handshake),
// uses that era if the server answers, and logs which era it chose and
// why. The supervisor remembers the era (connHooks.era), so a reconnect
// starts with server/discover; one that no longer answers it is reached
// with initialize again (dialLegacyAgain).

// dialModernAfter tries server/discover in 2026-07-28 after initialize
// failed with refused; refused is returned, with what discover said, if
// that fails too or initialize failed for another reason.
func dialModernAfter(ctx context.Context, srv *Server, refused error, maxMessage int, log *slog.Logger, hooks connHooks) (*Conn, error) {
	if !eraRefused(refused) || ctx.Err() != nil {
		return nil, refused
	}
	c, err := dialAs(ctx, srv, mcp.ProtocolVersion20260728, maxMessage, log, hooks)
	if err != nil {
		return nil, fmt.Errorf("%w; server/discover (protocol %s) failed too: %v", refused, mcp.ProtocolVersion20260728, err)
	}
	if c.modern {
		log.Info("upstream refused initialize (protocol "+upstreamProtocol+") and answered server/discover: speaking "+c.version()+" to it",
			"protocol", c.version(), "initialize_refused", sanitize.Text(refused.Error()))
	}
	return c, nil
}

// dialLegacyAgain connects in the default era to an upstream that spoke
// 2026-07-28 last time but no longer answers server/discover (mcp-go then
// fell back to initialize on a transport set up for 2026-07-28, which over
// HTTP has no listening stream): a connection made that way is closed and
// made again for the handshake era.
func dialLegacyAgain(ctx context.Context, srv *Server, made *Conn, maxMessage int, log *slog.Logger, hooks connHooks) (*Conn, error) {
	if made != nil {
		made.Close()
	}
	log.Info("upstream no longer answers server/discover (protocol " + mcp.ProtocolVersion20260728 + "); connecting with initialize")
	hooks.era = ""
	return dial(ctx, srv, maxMessage, log, hooks)
}

// eraRefused reports whether an initialize failed as a 2026-07-28-only
// server refuses it: an HTTP 4xx for the initialize POST, or a JSON-RPC
// error saying the method is unknown (-32601), the version unsupported
// (-32022), or the request invalid (-32600, what a server that requires
// 2026-07-28's _meta on every request answers to a request without it).
// An error that is none of these (the server cannot be reached, a 401, a
// timeout) is no sign of another era, and trying one would only hide it.
func eraRefused(err error) bool {
	return errors.Is(err, transport.ErrLegacySSEServer) || errors.Is(err, mcp.ErrMethodNotFound) ||
		errors.Is(err, mcp.ErrInvalidRequest) || mcp.IsUnsupportedProtocolVersion(err)
}

// version is the protocol version a modern connection declares.
func (c *Conn) version() string {
	if v := c.spoken.Load(); v != nil {
		return *v
	}
	return c.proto
}

// speak makes version the one the connection declares from now on: in
// each request's _meta, and in the Mcp-Protocol-Version header, which
// mcp-go's HTTP transport sets from its own record of the version.
func (c *Conn) speak(version string) {
	c.spoken.Store(&version)
	if h, ok := c.tr.(transport.HTTPConnection); ok {
		h.SetProtocolVersion(version)
	}
}

// versionAskedFor reports whether err is a 2026-07-28 upstream's refusal
// of the protocol version a request declared (-32022, Unsupported protocol
// version), and the version to send it again with: the newest 2026-era
// version toolgate speaks among those the error's data lists as supported
// ({"supported": [...], "requested": "..."}). The request was refused
// before the server did anything with it, so sending it again is safe, and
// it goes to the same connection: there is no handshake to redo in that
// era (a bare initialize is what a 2026-only server refuses). A list that
// names no 2026 version toolgate speaks is not retried: the error stands.
// Only the first refusal of a request is retried (roundTrip retries once).
func (c *Conn) versionAskedFor(err error) (string, bool) {
	var ce *CallError
	if !c.modern || !errors.As(err, &ce) || ce.RPC == nil || ce.RPC.Code != mcp.UNSUPPORTED_PROTOCOL_VERSION {
		return "", false
	}
	var data mcp.UnsupportedProtocolVersionData
	if b, mErr := json.Marshal(ce.RPC.Data); mErr == nil {
		_ = json.Unmarshal(b, &data)
	}
	for _, v := range mcp.ValidProtocolVersions { // newest first
		if mcp.IsModernProtocol(v) && slices.Contains(data.Supported, v) {
			return v, true
		}
	}
	if c.versionUnknown.CompareAndSwap(false, true) {
		c.log.Warn("upstream refused the request's protocol version (-32022) and names none toolgate speaks in the 2026-07-28 era",
			"sent", c.version(), "supported", sanitize.Clip(fmt.Sprint(data.Supported), 200))
	}
	return "", false
}

// errNotServed is a 2026-07-28 request answered HTTP 404: with no session
// in that era, the server says it does not serve the request.
var errNotServed = errors.New("upstream answered HTTP 404 Not Found: it does not serve this request")
