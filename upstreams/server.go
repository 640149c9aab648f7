package upstreams

import (
	"fmt"
	"math"
	"time"

	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/upstreams/egress"
	"github.com/toolgate/toolgate/upstreams/overrides"
)

// Server is everything upstreams needs to know about one upstream server,
// resolved: Start, Build and Dial take these, not the gateway's config
// (gateway.UpstreamServers converts the config, applying its defaults).
//
// A zero limit means none, not a default: a zero InitTimeout puts no bound
// of its own on connecting and listing (the caller's context still does), a
// zero CallTimeout or MaxResultBytes gives the catalog's tools none. The
// defaults (limits.timeout 8s, limits.max_result_bytes 1 MiB,
// limits.init_timeout 10s) are the config's (config.DefaultCallTimeout,
// config.DefaultMaxResultBytes, config.DefaultInitTimeout): config owns
// them and upstreams does not import config, so repeating them here would
// put each default in two places. Whoever builds a Server for real traffic
// sets the limits, as the gateway does.
type Server struct {
	Name      string    // the server's name: tool IDs are <Name>/<tool>; names are unique
	Transport Transport // the zero value is TransportHTTP

	// stdio
	Command string            // looked up in PATH at spawn unless it contains a "/"
	Args    []string          //
	Env     map[string]string // added to the child's allowlisted environment
	Cwd     string            // "": the gateway's working directory

	// http / sse
	URL     string            //
	Headers map[string]string // sent upstream with every request
	// Credentials, when set, give every request its Authorization, per
	// request (an auth block other than static, built by package
	// upstreams/credentials); nil: Headers only. The Set started with the
	// server closes them on Close when they have a Close method.
	Credentials Credentials
	// Egress is what the server's connections may reach (package
	// upstreams/egress): every connection is dialled through its guard.
	// The zero value allows public addresses only, so a server on
	// loopback or a private network needs Allow to say so.
	Egress egress.Options

	// Redact replaces secrets in what the server writes to stderr and in
	// its error text before they are logged or kept as its reason for being
	// down; nil redacts nothing.
	Redact *redact.Redactor

	// Protocol is the MCP protocol era spoken to the server: "2025-11-25"
	// (the initialize handshake) or "2026-07-28". "": 2025-11-25.
	Protocol string
	// ToolPrefix is prepended to the server's tool names (and prompt names
	// and resource URIs) to form client-facing names, verbatim: "" exposes
	// them unprefixed.
	ToolPrefix string
	// Disabled servers are not started; they list nothing.
	Disabled bool

	// InitTimeout bounds one attempt to connect and list the tools, and each
	// later tools/list and logging/setLevel. Zero: no bound of its own.
	InitTimeout time.Duration
	// CallTimeout and MaxResultBytes are the deadline and the result cap of
	// a call to any of the server's tools that Tools does not override.
	// Zero: none.
	CallTimeout    time.Duration
	MaxResultBytes int64
	// Tools overrides CallTimeout and MaxResultBytes for single tools, keyed
	// by the upstream's own tool name; a zero field falls back to the
	// server's.
	Tools map[string]ToolLimits
	// Overrides reshape single tools (upstreams/overrides), keyed by the
	// upstream's own tool name; the catalog applies them (catalog_overrides.go).
	Overrides map[string]*overrides.Override

	// DescriptionScan is what happens to tools whose titles, descriptions or
	// schemas hide characters or instruct the model (scan.go). The zero
	// value scans as ScanStrip.
	DescriptionScan ScanMode
}

// ToolLimits overrides a server's limits for one tool; a zero field means
// the server's.
type ToolLimits struct {
	Timeout        time.Duration
	MaxResultBytes int64
}

// Transport is how the gateway talks to an upstream.
type Transport string

// The transports an upstream can use.
const (
	TransportHTTP  Transport = "http"  // MCP Streamable HTTP; also the zero Transport
	TransportStdio Transport = "stdio" // a child process speaking MCP on stdin/stdout
	TransportSSE   Transport = "sse"   // the older HTTP+SSE transport
)

// ScanMode is the description scan's mode (description_scan).
type ScanMode string

// The description scan modes.
const (
	ScanOff        ScanMode = "off"        // no scan (titles and descriptions are still sanitised)
	ScanStrip      ScanMode = "strip"      // remove hidden characters; instruction-like text is flagged and kept; also the zero ScanMode
	ScanQuarantine ScanMode = "quarantine" // a tool with any finding is quarantined
)

// callTimeout is the deadline of a call to tool: its own, else the server's.
func (s *Server) callTimeout(tool string) time.Duration {
	if t := s.Tools[tool].Timeout; t != 0 {
		return t
	}
	return s.CallTimeout
}

// maxResultBytes caps the result of a call to tool: its own cap, else the
// server's.
func (s *Server) maxResultBytes(tool string) int64 {
	if n := s.Tools[tool].MaxResultBytes; n != 0 {
		return n
	}
	return s.MaxResultBytes
}

// frameSlack is room for the JSON-RPC envelope and escaping around a result
// at the transport cap; the exact per-tool cap is applied to the result.
const frameSlack = 64 << 10

// maxMessageBytes is the transport cap for the server: the largest result
// cap of any of its tools, plus framing. Without a server-wide cap, a tool
// Tools does not name has none, so neither has the transport.
func (s *Server) maxMessageBytes() int {
	largest := s.MaxResultBytes
	if largest <= 0 {
		return math.MaxInt
	}
	for tool := range s.Tools {
		largest = max(largest, s.maxResultBytes(tool))
	}
	return int(min(largest, math.MaxInt-frameSlack) + frameSlack)
}

// checkNames fails on a server without a name or a name given twice: the
// catalog and the supervisors key servers by name.
func checkNames(servers []Server) error {
	seen := make(map[string]bool, len(servers))
	for _, s := range servers {
		if s.Name == "" {
			return fmt.Errorf("upstreams: a server has no name")
		}
		if seen[s.Name] {
			return fmt.Errorf("upstreams: server %q given twice", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}
