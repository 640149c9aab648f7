package config

import (
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	// serverName is what Claude accepts in a tool name, which a server name becomes part of.
	serverName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	prefixRe   = regexp.MustCompile(`^[A-Za-z0-9_-]{0,63}$`)
	// headerToken is an RFC 9110 token, the only thing a header name may be.
	headerToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// transportOfType maps each accepted spelling of `type` to its transport; the spellings are the ones
// Claude Desktop, Cursor and VS Code configs use.
var transportOfType = map[string]Transport{
	"stdio":           TransportStdio,
	"http":            TransportHTTP,
	"streamable-http": TransportHTTP,
	"streamableHttp":  TransportHTTP,
	"sse":             TransportSSE,
}

func (l *loader) checkServer(path string, s *Server, limits Limits) {
	l.checkServerName(path, s.Name)
	if s.Prefix != nil && !prefixRe.MatchString(*s.Prefix) {
		l.reportAt(path+".prefix", "expected at most 63 of A-Z a-z 0-9 _ -, got %q", *s.Prefix)
	}
	s.Transport = l.transport(path, s)
	l.checkTransportFields(path, s)
	l.checkLimits(path, s.limits(), limits)
	l.checkDescriptionScan(path+".description_scan", s.DescriptionScan)
	l.checkOneOf(path+".protocol", s.Protocol, UpstreamProtocols)
	for name, t := range s.Tools {
		tp := child(path+".tools", name)
		if name == "" {
			l.reportAt(tp, "expected a tool name, got an empty key")
		}
		l.checkLimits(tp, Limits{Timeout: t.Timeout, MaxResultBytes: t.MaxResultBytes}, Limits{})
	}
}

// checkServerName enforces names that fit in client-facing tool names; "__" is kept free because it
// separates server and tool there, and a name containing it would make that split ambiguous.
func (l *loader) checkServerName(path, name string) {
	switch {
	case !serverName.MatchString(name):
		l.reportAt(path, "server names must be 1 to 64 of A-Z a-z 0-9 _ -, got %q", name)
	case strings.Contains(name, "__"):
		l.reportAt(path, "server names must not contain \"__\" (it separates server and tool in tool names), got %q", name)
	}
}

// transport decides stdio, http or sse from command/url, then checks `type` agrees. It returns "" when
// the server is unusable, after reporting why.
func (l *loader) transport(path string, s *Server) Transport {
	if l.bad[path] {
		return "" // not even a mapping; already reported
	}
	hasCmd := s.Command != "" || l.bad[path+".command"]
	hasURL := s.URL != "" || l.bad[path+".url"]
	var inferred Transport
	switch {
	case hasCmd && hasURL:
		l.reportAt(path+".url", "set either command (stdio) or url (http, sse), not both")
		return ""
	case hasCmd:
		inferred = TransportStdio
	case hasURL:
		inferred = TransportHTTP
	default:
		l.reportAt(path, "expected command (a stdio server) or url (an http or sse server)")
		return ""
	}
	return l.checkType(path, s.Type, inferred)
}

func (l *loader) checkType(path, typ string, inferred Transport) Transport {
	if typ == "" {
		return inferred
	}
	t, known := transportOfType[typ]
	switch {
	case !known:
		l.reportAt(path+".type", "expected one of stdio, http, streamable-http, streamableHttp, sse, got %q", typ)
		return inferred
	case t == TransportStdio && inferred != TransportStdio:
		l.reportAt(path+".type", "type %q needs command, but url is set", typ)
		return inferred // check the fields against what was actually written
	case t != TransportStdio && inferred == TransportStdio:
		l.reportAt(path+".type", "type %q needs url, but command is set", typ)
		return inferred
	}
	return t
}

// checkTransportFields reports settings the chosen transport would silently ignore: an operator who set
// env on an http server, or headers on a stdio one, expects them to have an effect.
func (l *loader) checkTransportFields(path string, s *Server) {
	switch s.Transport {
	case TransportStdio:
		l.onlyFor(path, "headers", s.Headers != nil, "http and sse servers (url)")
		if !strings.ContainsRune(s.Command, '/') && strings.ContainsAny(s.Command, " \t") {
			l.reportAt(path+".command", "expected one program name (looked up on PATH); put its arguments in args, got %q", s.Command)
		}
	case TransportHTTP, TransportSSE:
		l.onlyFor(path, "args", s.Args != nil, "stdio servers (command)")
		l.onlyFor(path, "env", s.Env != nil, "stdio servers (command)")
		l.onlyFor(path, "cwd", s.Cwd != "", "stdio servers (command)")
		l.checkURL(path+".url", s.URL)
		for name, v := range s.Headers {
			if strings.ContainsAny(v, "\r\n\x00") {
				l.reportAt(child(path+".headers", name), "header values must not contain line breaks or NUL")
			}
		}
	}
}

func (l *loader) onlyFor(path, key string, isSet bool, kind string) {
	if isSet {
		l.reportAt(path+"."+key, "%s applies only to %s", key, kind)
	}
}

// checkURL quotes the URL redacted: it may carry a password from the environment.
func (l *loader) checkURL(path, raw string) {
	if raw == "" {
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		l.reportAt(path, "expected an http:// or https:// URL; it does not parse")
	case u.Scheme != "http" && u.Scheme != "https":
		l.reportAt(path, "expected an http:// or https:// URL, got %q", u.Redacted())
	case u.Host == "":
		l.reportAt(path, "expected a URL with a host, got %q", u.Redacted())
	}
}

func (l *loader) checkEnvName(e entry) {
	if !envName.MatchString(e.key) {
		l.report(e.line, e.path, "expected an environment variable name (letters, digits, _; not starting with a digit)")
	}
}

func (l *loader) checkHeaderName(e entry) {
	if !headerToken.MatchString(e.key) {
		l.report(e.line, e.path, "expected an HTTP header name (letters, digits and !#$%%&'*+.^_`|~-)")
	}
}

// resolvePaths makes paths relative to the config file absolute, so the rest of the gateway never depends
// on the working directory it was started from. A bare command name stays as is for the PATH lookup.
func resolvePaths(c *Config, dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	c.Authz.Model = abs(c.Authz.Model)
	c.Authz.Policy = abs(c.Authz.Policy)
	c.Authz.ShadowPolicy = abs(c.Authz.ShadowPolicy)
	c.Pinning.File = abs(c.Pinning.File)
	c.Approvals.File = abs(c.Approvals.File)
	c.Audit.File = abs(c.Audit.File)
	c.Credentials.File = abs(c.Credentials.File)
	c.Credentials.KeyFile = abs(c.Credentials.KeyFile)
	if c.Auth.JWT != nil {
		c.Auth.JWT.JWKSFile = abs(c.Auth.JWT.JWKSFile)
	}
	for _, s := range c.Servers {
		s.Cwd = abs(s.Cwd)
		if strings.ContainsRune(s.Command, '/') {
			s.Command = abs(s.Command)
		}
	}
}
