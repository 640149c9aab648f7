package config

import (
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/toolgate/toolgate/upstreams/egress"
)

// approvalRules decodes approvals.rules.
func (l *loader) approvalRules(n ast.Node, path string) []ApprovalRule {
	return objectList(l, n, path, "{tools, ttl, webhooks}", func(x *ApprovalRule) fields {
		return fields{
			"tools":    set(&x.Tools, l.strList),
			"ttl":      set(&x.TTL, l.duration),
			"webhooks": set(&x.Webhooks, l.webhooks),
		}
	})
}

func (l *loader) webhooks(n ast.Node, path string) []Webhook {
	return objectList(l, n, path, "{url, secret, format, egress, proxy}", func(x *Webhook) fields {
		return fields{
			"url":    set(&x.URL, l.str),
			"secret": set(&x.Secret, l.secretRef),
			"format": set(&x.Format, l.str),
			"egress": set(&x.Egress, l.egress),
			"proxy":  set(&x.Proxy, l.str),
		}
	})
}

// checkApprovalRules checks approvals.rules: each names tools of configured servers and says
// something (a ttl or a webhook), and each webhook is deliverable and, in format json, signed.
func (l *loader) checkApprovalRules(c *Config) {
	for i, r := range c.Approvals.Rules {
		p := index("approvals.rules", i)
		if len(r.Tools) == 0 && !l.bad[p+".tools"] {
			l.reportAt(p, "tools is required: the held tools this rule is for, as <server>/<tool> or <server>/* (the policy's a lines say which calls are held)")
		}
		for j, t := range r.Tools {
			l.checkToolPattern(c, index(p+".tools", j), t)
		}
		l.checkDuration(p+".ttl", r.TTL, approvalTTLRange)
		if r.TTL == 0 && len(r.Webhooks) == 0 && !l.bad[p+".ttl"] && !l.bad[p+".webhooks"] {
			l.reportAt(p, "expected a ttl or webhooks: a rule with neither changes nothing")
		}
		for j, w := range r.Webhooks {
			l.checkWebhook(index(p+".webhooks", j), w)
		}
	}
}

func (l *loader) checkToolPattern(c *Config, path, pattern string) {
	server, tool, ok := strings.Cut(pattern, "/")
	switch {
	case l.bad[path]:
	case !ok || server == "" || tool == "" || strings.TrimSpace(pattern) != pattern:
		l.reportAt(path, "expected <server>/<tool> or <server>/* (a canonical tool ID or a pattern of them), got %q", pattern)
	case server != "*" && !slices.Contains(c.ServerNames(), server):
		l.reportAt(path, "%q names no server of mcpServers (configured: %s)", server, strings.Join(c.ServerNames(), ", "))
	}
}

// checkWebhook requires https except to loopback hosts (the body names who called what with which
// arguments), and quotes neither the URL (a Slack URL is its own credential) nor the secret.
func (l *loader) checkWebhook(path string, w Webhook) {
	switch w.Format {
	case "", WebhookJSON, WebhookSlack:
	default:
		l.reportAt(path+".format", "expected json or slack, got %q", w.Format)
	}
	urlOK := false
	if w.URL == "" {
		if !l.bad[path+".url"] {
			l.reportAt(path, "url is required: where the new request is posted")
		}
	} else if u, err := url.Parse(w.URL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		l.reportAt(path+".url", "expected an http:// or https:// URL with a host (the value is not repeated here: it may be a credential)")
	} else if u.Scheme == "http" && !isLoopbackHost(u.Hostname()) {
		l.reportAt(path+".url", "expected an https:// URL: plain http is accepted for loopback hosts only (the body carries the call's arguments), got host %q", u.Hostname())
	} else {
		urlOK = !l.bad[path+".url"]
	}
	if w.Secret == "" && (w.Format == "" || w.Format == WebhookJSON) && !l.bad[path+".secret"] {
		l.reportAt(path, "secret is required for format json: write secret: ${VAR} (the receiver checks the X-Toolgate-Signature header with it)")
	}
	l.checkWebhookEgress(path, w, urlOK)
}

// anyButMetadata is a guard that refuses the cloud metadata addresses only (every other address is
// in one of its prefixes).
var anyButMetadata = egress.New(egress.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}})

// checkWebhookEgress checks a webhook's egress.allow and proxy, and fails fast on a url (or proxy)
// whose host is an address the egress guard would refuse at every delivery, naming the line to add.
// Through a proxy the guard checks the proxy's address, not the receiver's: the url is then checked
// only for a metadata address, which a mistaken url names and no proxy should be asked for.
func (l *loader) checkWebhookEgress(path string, w Webhook, urlOK bool) {
	if w.Egress != nil {
		l.checkEgressAllow(path, w.Egress)
	}
	classes, prefixes := w.EgressAllow()
	guard := egress.New(egress.Options{Allow: classes, AllowPrefixes: prefixes})
	if w.Proxy != "" {
		if u, err := url.Parse(w.Proxy); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			l.reportAt(path+".proxy", "expected an http:// or https:// proxy URL with a host (the value is not repeated here: it may hold a password)")
			return
		}
		l.checkEgressURL(path+".proxy", w.Proxy, guard, "webhook")
		guard = anyButMetadata
	}
	if urlOK {
		l.checkEgressURL(path+".url", w.URL, guard, "webhook")
	}
}

// ApprovalRules are approvals.rules, as configured.
func (c *Config) ApprovalRules() []ApprovalRule { return c.Approvals.Rules }

// TTLOf is how long the requests of r live: its ttl, else approvals.ttl (else its default).
func (c *Config) TTLOf(r ApprovalRule) time.Duration {
	if r.TTL > 0 {
		return time.Duration(r.TTL)
	}
	return c.ApprovalTTL()
}
