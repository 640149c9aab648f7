package config

import (
	"cmp"
	"net/url"
	"strings"
	"time"
)

// Connect configures the page where users connect the upstreams that act as them
// (docs/configuration.md, "Upstream credentials"): the links an authorization_required answer carries
// and the OAuth callback are under BaseURL, on the HTTP listener. Read it through the accessors below.
type Connect struct {
	// BaseURL is the HTTP listener as users' browsers reach it, such as "https://toolgate.example.com";
	// by default http://<listen.http>, which only a browser on the same machine reaches.
	BaseURL string `yaml:"base_url"`
	// Key signs the links and seals the authorization requests' state: at least 32 characters, as
	// ${VAR}. By default a random key per process: links then die with the process, and a callback
	// must reach the replica that made its link.
	Key string `yaml:"key"`
	// LinkTTL is how long a link stays valid; 15m by default (a link is also used once only).
	LinkTTL Duration `yaml:"link_ttl"`
	// ClientMetadataURL is the https URL, under BaseURL, where the gateway serves its OAuth Client ID
	// Metadata Document; authorization servers that support them then know toolgate by that URL and no
	// registration is needed.
	ClientMetadataURL string `yaml:"client_metadata_url"`
}

// DefaultConnectLinkTTL is connect.link_ttl's default.
const DefaultConnectLinkTTL = 15 * time.Minute

// minConnectKey is the shortest connect.key accepted: 256 bits of a random string's characters.
const minConnectKey = 32

func (l *loader) connectFields(x *Connect) fields {
	return fields{
		"base_url":            set(&x.BaseURL, l.str),
		"key":                 set(&x.Key, l.secretRef),
		"link_ttl":            set(&x.LinkTTL, l.duration),
		"client_metadata_url": set(&x.ClientMetadataURL, l.str),
	}
}

// checkConnect: an http(s) base URL (https unless on loopback: codes and states travel on it), a key
// long enough, and a metadata document URL that is https and under the base URL (the gateway serves it).
func (l *loader) checkConnect(c *Config) {
	x := &c.Connect
	if x.BaseURL != "" && !l.bad["connect.base_url"] {
		l.checkIdentifierURL("connect.base_url", x.BaseURL, "https://toolgate.example.com")
		if u, err := url.Parse(x.BaseURL); err == nil && u.Scheme == "http" && !isLoopbackHost(u.Hostname()) {
			l.reportAt("connect.base_url", "expected an https:// URL (plain http is accepted for loopback hosts only: "+
				"authorization codes travel on it), got %q", u.Redacted())
		}
	}
	if x.Key != "" && len(x.Key) < minConnectKey {
		l.reportAt("connect.key", "expected at least %d characters (the value is not repeated here)", minConnectKey)
	}
	if x.LinkTTL < 0 {
		l.reportAt("connect.link_ttl", "expected a positive duration")
	}
	if x.ClientMetadataURL != "" {
		l.checkMetadataURL(x)
	}
}

func (l *loader) checkMetadataURL(x *Connect) {
	const path = "connect.client_metadata_url"
	u, err := url.Parse(x.ClientMetadataURL)
	switch {
	case err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") == "":
		l.reportAt(path, "expected an https:// URL with a path, such as \"https://toolgate.example.com/oauth/client.json\"")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		l.reportAt(path, "expected a URL without user information, query or fragment")
	case x.BaseURL == "" || !strings.HasPrefix(x.ClientMetadataURL, strings.TrimSuffix(x.BaseURL, "/")+"/"):
		l.reportAt(path, "expected a URL under connect.base_url, where the gateway serves it (set connect.base_url)")
	case strings.HasPrefix(u.Path, "/mcp") || strings.HasPrefix(u.Path, "/connect/") || strings.HasPrefix(u.Path, "/.well-known/"):
		l.reportAt(path, "expected a path outside /mcp, /connect/ and /.well-known/, which the gateway serves already")
	}
}

// ConnectBaseURL is connect.base_url without a trailing slash; "" when unset (the listener's address
// is used once it is open).
func (c *Config) ConnectBaseURL() string { return strings.TrimSuffix(c.Connect.BaseURL, "/") }

// ConnectLinkTTL is connect.link_ttl, DefaultConnectLinkTTL by default.
func (c *Config) ConnectLinkTTL() time.Duration {
	return cmp.Or(time.Duration(c.Connect.LinkTTL), DefaultConnectLinkTTL)
}
