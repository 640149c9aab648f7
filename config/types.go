package config

import "time"

// Config is the whole of toolgate.yaml. The zero value is valid: read settings through the accessors in
// defaults.go, which apply the defaults, rather than through the fields.
type Config struct {
	File    string             `yaml:"-"` // absolute path of the loaded file; "" when built in code
	Listen  Listen             `yaml:"listen"`
	Authz   Authz              `yaml:"authz"`
	Auth    Auth               `yaml:"auth"`
	Limits  Limits             `yaml:"limits"` // defaults for every server and tool
	Servers map[string]*Server `yaml:"mcpServers"`
}

// Listen configures the Streamable HTTP endpoint.
type Listen struct {
	HTTP               string   `yaml:"http"`                // host:port; /mcp is served there
	MaxBodyBytes       int64    `yaml:"max_body_bytes"`      // request body cap, bytes
	SessionIdleTTL     Duration `yaml:"session_idle_ttl"`    // idle MCP sessions are dropped after this
	AllowedOrigins     []string `yaml:"allowed_origins"`     // Origins accepted besides loopback ones (DNS-rebinding protection)
	AllowAnonymous     bool     `yaml:"allow_anonymous"`     // explicit opt-in to HTTP without a credential
	AnonymousPrincipal string   `yaml:"anonymous_principal"` // who an anonymous caller is; required with AllowAnonymous
}

// Authz names the Casbin model and policy files. After Load, non-empty values are absolute; use
// Config.ModelPath and Config.PolicyPath, which apply the defaults.
type Authz struct {
	Model  string `yaml:"model"`
	Policy string `yaml:"policy"`
}

// Auth maps credentials to principals.
type Auth struct {
	StdioPrincipal string   `yaml:"stdio_principal"` // who the one stdio client is
	APIKeys        []APIKey `yaml:"api_keys"`        // HTTP bearer keys
}

// APIKey stores only the SHA-256 of a bearer key, so the config file never holds a usable credential.
type APIKey struct {
	Principal string `yaml:"principal"`
	SHA256    string `yaml:"sha256"` // 64 lowercase hex characters after Load
}

// Limits are the gateway-wide defaults for calls. The same keys appear directly on a server (and, except
// init_timeout, on a tool) to override them.
type Limits struct {
	Timeout        Duration `yaml:"timeout"`          // deadline of one tools/call
	MaxResultBytes int64    `yaml:"max_result_bytes"` // cap on a call's result
	InitTimeout    Duration `yaml:"init_timeout"`     // bound on initialize + tools/list of an upstream
}

// Transport is how toolgate talks to an upstream, resolved at load from command/url/type.
type Transport string

// The transports an upstream can use.
const (
	TransportStdio Transport = "stdio" // a child process speaking MCP on stdin/stdout
	TransportHTTP  Transport = "http"  // MCP Streamable HTTP
	TransportSSE   Transport = "sse"   // the older HTTP+SSE transport
)

// Server is one upstream MCP server, keyed by its name under mcpServers.
type Server struct {
	Name      string    `yaml:"-"` // the map key
	Transport Transport `yaml:"-"` // resolved from Command, URL and Type

	// stdio
	Command string            `yaml:"command"` // as written (PATH lookup at spawn) unless it is a relative path with "/"
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"` // added to the child's environment
	Cwd     string            `yaml:"cwd"` // absolute after Load

	// http / sse
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"` // sent upstream; never the client's credential

	Type     string  `yaml:"type"`   // as written: "", stdio, http, streamable-http, streamableHttp, sse
	Prefix   *string `yaml:"prefix"` // nil means the default; see ToolPrefix
	Disabled bool    `yaml:"disabled"`

	// Overrides of Config.Limits for this server.
	Timeout        Duration `yaml:"timeout"`
	MaxResultBytes int64    `yaml:"max_result_bytes"`
	InitTimeout    Duration `yaml:"init_timeout"`

	Tools map[string]*Tool `yaml:"tools"` // keyed by the upstream's own tool name
}

// Tool overrides limits for one upstream tool.
type Tool struct {
	Timeout        Duration `yaml:"timeout"`
	MaxResultBytes int64    `yaml:"max_result_bytes"`
}

// Duration is a time.Duration written in YAML as a Go duration string ("8s", "250ms"). Bare numbers are
// rejected because "timeout: 8" does not say whether it means seconds or milliseconds.
type Duration time.Duration

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }
