package config

import (
	"cmp"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// Credentials configures the vault: where the credentials toolgate holds for each user (auth modes
// per_user and oauth) are kept, and the key that encrypts them (docs/configuration.md, "Upstream
// credentials"). Read it through CredentialsPath and CredentialsKeySource.
type Credentials struct {
	// File is the encrypted store; absolute after Load (relative to the config file as written). Not
	// with state.redis, where the credentials are kept in Redis for every replica.
	File string `yaml:"file"`
	// KeyEnv names the environment variable holding the key(s): base64, the first encrypts, all
	// decrypt. TOOLGATE_CREDENTIALS_KEY when neither it nor KeyFile is set.
	KeyEnv string `yaml:"key_env"`
	// KeyFile is a file holding the key(s), one a line; mode 0600 or stricter.
	KeyFile string `yaml:"key_file"`
}

// DefaultCredentialsFile is the vault, looked for beside the config file.
const DefaultCredentialsFile = "toolgate.credentials.json"

// DefaultCredentialsKeyEnv is the variable the vault's key is read from by default.
const DefaultCredentialsKeyEnv = "TOOLGATE_CREDENTIALS_KEY"

// CredentialsPath is the vault file: credentials.file, else toolgate.credentials.json beside the
// config file.
func (c *Config) CredentialsPath() string {
	return cmp.Or(c.Credentials.File, filepath.Join(c.Dir(), DefaultCredentialsFile))
}

// CredentialsKeySource is where the vault's keys are: credentials.key_file, else the variable
// credentials.key_env (TOOLGATE_CREDENTIALS_KEY by default).
func (c *Config) CredentialsKeySource() vault.KeySource {
	if c.Credentials.KeyFile != "" {
		return vault.KeySource{File: c.Credentials.KeyFile}
	}
	return vault.KeySource{Env: cmp.Or(c.Credentials.KeyEnv, DefaultCredentialsKeyEnv)}
}

// UsesVault lists the servers whose auth mode keeps a credential per user in the vault (per_user,
// oauth), in ServerNames order.
func (c *Config) UsesVault() []string {
	var out []string
	for _, name := range c.ServerNames() {
		if m := c.Servers[name].AuthMode(); m == AuthPerUser || m == AuthOAuth {
			out = append(out, name)
		}
	}
	return out
}

func (l *loader) credentialsFields(x *Credentials) fields {
	return fields{
		"file":     set(&x.File, l.str),
		"key_env":  set(&x.KeyEnv, l.str),
		"key_file": set(&x.KeyFile, l.str),
	}
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkCredentials checks credentials: and, when an upstream keeps credentials per user (or a key is
// named), that the key can be read now: a gateway that would fail at the first user's call, or
// store what it cannot read back, must not start.
func (l *loader) checkCredentials(c *Config) {
	x := &c.Credentials
	if x.File != "" && (strings.TrimSpace(x.File) != x.File || strings.HasSuffix(x.File, "/")) {
		l.reportAt("credentials.file", "expected a file path without leading or trailing spaces, got %q", x.File)
	}
	if x.File != "" && c.State.Redis != nil {
		l.reportAt("credentials.file", "applies only without state.redis (with it, the credentials are kept in Redis, "+
			"encrypted, so that every replica has them); remove it")
	}
	if x.KeyEnv != "" && !envNameRe.MatchString(x.KeyEnv) {
		l.reportAt("credentials.key_env", "expected the name of an environment variable (letters, digits, _), got %q", x.KeyEnv)
		return
	}
	if x.KeyEnv != "" && x.KeyFile != "" {
		l.reportAt("credentials.key_file", "set key_env or key_file, not both: the keys come from one place, the first of them encrypts")
		return
	}
	users := c.UsesVault()
	if len(users) == 0 && x.KeyEnv == "" && x.KeyFile == "" {
		return
	}
	src := c.CredentialsKeySource()
	if src.File != "" {
		src.File = l.absPath(src.File)
	}
	src.LookupEnv = l.env
	if _, err := vault.LoadKeyring(src); err != nil {
		path := "credentials.key_env"
		switch {
		case x.KeyFile != "":
			path = "credentials.key_file"
		case x.KeyEnv == "":
			path = child("mcpServers", users[0]) + ".auth.mode"
			l.reportAt(path, "mode %s keeps each user's credential encrypted, and the key cannot be read: %v; "+
				"set %s, or name the key with credentials.key_env or credentials.key_file",
				c.Servers[users[0]].AuthMode(), err, DefaultCredentialsKeyEnv)
			return
		}
		l.reportAt(path, "%v", err)
	}
}

// absPath is p relative to the config file's directory, as Load resolves paths after the checks.
func (l *loader) absPath(p string) string {
	if p == "" || filepath.IsAbs(p) || l.file == "" {
		return p
	}
	if abs, err := filepath.Abs(l.file); err == nil {
		return filepath.Join(filepath.Dir(abs), p)
	}
	return p
}

func (l *loader) perUserFields(x *UpstreamAuth) fields {
	return fields{
		"header":         set(&x.Header, l.str),
		"format":         set(&x.Format, l.str),
		"service_secret": set(&x.ServiceSecret, l.secretRef),
	}
}

// headerTokenRe is an HTTP field name (RFC 9110 token).
var headerTokenRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// reservedHeaders are the headers the gateway or the MCP transport sets itself.
var reservedHeaders = []string{"host", "content-length", "content-type", "accept", "connection", "transfer-encoding",
	"mcp-session-id", "mcp-protocol-version", "last-event-id", "cookie"}

// checkPerUser checks the keys of auth mode per_user: the header the secret goes in and its format.
func (l *loader) checkPerUser(server string, s *Server) {
	path := server + ".auth"
	a := s.Auth
	if a.Header != "" {
		switch {
		case !headerTokenRe.MatchString(a.Header):
			l.reportAt(path+".header", "expected an HTTP header name such as X-Api-Key, got %q", a.Header)
		case isReservedHeader(a.Header):
			l.reportAt(path+".header", "%s is set by the gateway or the MCP transport itself; expected a header such as Authorization or X-Api-Key", a.Header)
		}
	}
	if a.Format != "" {
		switch {
		case strings.Count(a.Format, perUserPlaceholder) != 1:
			l.reportAt(path+".format", "expected the secret's place, %s, once, such as \"Bearer %s\", got %q", perUserPlaceholder, perUserPlaceholder, a.Format)
		case strings.IndexFunc(a.Format, isControl) >= 0:
			l.reportAt(path+".format", "expected no control characters: the format is a header value")
		}
	}
	header := cmp.Or(a.Header, "Authorization")
	for name := range s.Headers {
		if strings.EqualFold(name, header) {
			l.reportAt(child(server+".headers", name), "a %s header cannot be set beside auth mode per_user, which sets it on every request", name)
		}
	}
}

// perUserPlaceholder is where the secret goes in auth.format (credentials.SecretPlaceholder).
const perUserPlaceholder = "{secret}"

func isReservedHeader(name string) bool {
	for _, r := range reservedHeaders {
		if strings.EqualFold(name, r) {
			return true
		}
	}
	return false
}
