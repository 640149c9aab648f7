package config

import (
	"strings"
	"testing"
	"time"
)

const ordersServer = "mcpServers:\n  orders: {command: orders-server}\n"

// approvalRuleProblems are problems of approvals.rules and console.public_url: each the only one,
// at its line and key, never quoting a webhook's URL or secret.
var approvalRuleProblems = []problemCase{
	{"rules not a list", ordersServer + "approvals: {rules: x}\n", nil, 3, "approvals.rules", "expected a list of {tools, ttl, webhooks} mappings"},
	{"rule without tools", ordersServer + "approvals:\n  rules:\n    - {ttl: 5m}\n", nil, 5, "approvals.rules[0]", "tools is required"},
	{"tool of no server", ordersServer + "approvals:\n  rules:\n    - {tools: [billing/refund], ttl: 5m}\n", nil, 5, "approvals.rules[0].tools[0]",
		`"billing" names no server of mcpServers (configured: orders)`},
	{"tool without a slash", ordersServer + "approvals:\n  rules:\n    - {tools: [refund], ttl: 5m}\n", nil, 5, "approvals.rules[0].tools[0]", "expected <server>/<tool> or <server>/*"},
	{"rule ttl too short", ordersServer + "approvals:\n  rules:\n    - {tools: [orders/*], ttl: 5s}\n", nil, 5, "approvals.rules[0].ttl", "expected a duration from 1m"},
	{"rule saying nothing", ordersServer + "approvals:\n  rules:\n    - {tools: [orders/*]}\n", nil, 5, "approvals.rules[0]", "expected a ttl or webhooks"},
	{"webhook without url", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{secret: \"${HOOK_SECRET}\"}]\n",
		map[string]string{"HOOK_SECRET": "tga_secret"}, 6, "approvals.rules[0].webhooks[0]", "url is required"},
	{"webhook over plain http", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"http://hooks.example.com/tga_secret\", secret: \"${HOOK_SECRET}\"}]\n",
		map[string]string{"HOOK_SECRET": "x"}, 6, "approvals.rules[0].webhooks[0].url", `expected an https:// URL: plain http is accepted for loopback hosts only (the body carries the call's arguments), got host "hooks.example.com"`},
	{"webhook url not a URL", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"${HOOK_URL}\", format: slack}]\n",
		map[string]string{"HOOK_URL": "tga_secret"}, 6, "approvals.rules[0].webhooks[0].url", "expected an http:// or https:// URL with a host (the value is not repeated here"},
	{"webhook secret written in the file", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"https://hooks.example.com/x\", secret: tga_secret}]\n",
		nil, 6, "approvals.rules[0].webhooks[0].secret", "expected a reference to an environment variable"},
	{"json webhook without a secret", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"https://hooks.example.com/x\"}]\n",
		nil, 6, "approvals.rules[0].webhooks[0]", "secret is required for format json"},
	{"webhook secret unset", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"https://hooks.example.com/x\", secret: \"${HOOK_SECRET}\"}]\n",
		nil, 6, "approvals.rules[0].webhooks[0].secret", "environment variable HOOK_SECRET is not set"},
	// A webhook pointed by mistake at the metadata service, or at loopback or the internal network
	// without saying so, is refused at load like an upstream, naming the line to add.
	{"webhook at the metadata address", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"${HOOK_URL}\", format: slack, egress: {allow: [link_local]}}]\n",
		map[string]string{"HOOK_URL": "https://169.254.169.254/latest/meta-data/tga_secret"}, 6, "approvals.rules[0].webhooks[0].url", "169.254.169.254 is a cloud metadata address, which toolgate never connects to"},
	{"webhook on loopback not allowed", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"http://127.0.0.1:9000/tga_secret\", format: slack}]\n",
		nil, 6, "approvals.rules[0].webhooks[0].url", "127.0.0.1 is a loopback address, which the egress guard refuses unless the webhook allows it: add egress: {allow: [loopback]}"},
	{"webhook on the internal network not allowed", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"https://10.20.0.5/tga_secret\", format: slack}]\n",
		nil, 6, "approvals.rules[0].webhooks[0].url", "10.20.0.5 is a private address, which the egress guard refuses unless the webhook allows it: add egress: {allow: [private]}"},
	{"webhook egress allows metadata", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"https://hooks.example.com/x\", format: slack, egress: {allow: [metadata]}}]\n",
		nil, 6, "approvals.rules[0].webhooks[0].egress.allow[0]", "the cloud metadata addresses are never allowed"},
	{"webhook proxy not a URL", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"https://hooks.example.com/x\", format: slack, proxy: \"${PROXY}\"}]\n",
		map[string]string{"PROXY": "tga_secret:3128"}, 6, "approvals.rules[0].webhooks[0].proxy", "expected an http:// or https:// proxy URL with a host (the value is not repeated here"},
	{"webhook proxy on the internal network not allowed", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"https://hooks.example.com/x\", format: slack, proxy: \"http://tga_secret@10.1.2.3:3128\"}]\n",
		nil, 6, "approvals.rules[0].webhooks[0].proxy", "10.1.2.3 is a private address, which the egress guard refuses unless the webhook allows it: add egress: {allow: [private]}"},
	{"webhook through a proxy to the metadata address", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"https://169.254.169.254/tga_secret\", format: slack, proxy: \"https://proxy.example.com\"}]\n",
		nil, 6, "approvals.rules[0].webhooks[0].url", "169.254.169.254 is a cloud metadata address, which toolgate never connects to"},
	{"webhook format unknown", ordersServer + "approvals:\n  rules:\n    - tools: [orders/*]\n      webhooks: [{url: \"https://hooks.example.com/x\", format: teams}]\n",
		nil, 6, "approvals.rules[0].webhooks[0].format", `expected json or slack, got "teams"`},
	{"public url with a query", "console: {public_url: \"https://admin.example.com/?a=1\"}\n", nil, 1, "console.public_url", "without user information, query or fragment"},
	{"public url not http", "console: {public_url: \"ftp://admin.example.com\"}\n", nil, 1, "console.public_url", "expected an http:// or https:// URL"},
}

func TestApprovalRuleProblems(t *testing.T) {
	for _, tt := range approvalRuleProblems {
		t.Run(tt.name, func(t *testing.T) {
			probs := parseProblems(t, tt.src, tt.env)
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%s", len(probs), (&Problems{List: probs}).Error())
			}
			got := probs[0].String()
			if want := locate(tt.line, tt.key); !strings.HasPrefix(got, want) {
				t.Errorf("got  %s\nwant prefix %s", got, want)
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got  %s\nwant it to contain %s", got, tt.want)
			}
			if strings.Contains(got, "tga_secret") {
				t.Errorf("the problem echoes a secret: %s", got)
			}
		})
	}
}

func TestApprovalRuleSettings(t *testing.T) {
	src := ordersServer + `approvals:
  ttl: 2h
  rules:
    - tools: [orders/refund_order]
      ttl: 15m
      webhooks:
        - {url: "${SLACK_URL}", format: slack}
        - {url: "https://hooks.example.com/toolgate", secret: "${HOOK_SECRET}"}
    - tools: ["orders/*"]
      webhooks:
        - {url: "http://127.0.0.1:9000/hook", secret: "${HOOK_SECRET}", egress: {allow: [loopback]}}
        - {url: "https://hooks.example.com/x", secret: "${HOOK_SECRET}", proxy: "${HTTPS_PROXY}", egress: {allow: [10.0.0.0/8]}}
console:
  public_url: https://admin.example.com/
`
	c, err := Parse("toolgate.yaml", []byte(src), envOf(map[string]string{"SLACK_URL": "https://hooks.slack.com/services/T/B/X", "HOOK_SECRET": "s3cret",
		"HTTPS_PROXY": "http://user:pw@10.1.2.3:3128"}))
	if err != nil {
		t.Fatal(err)
	}
	rs := c.ApprovalRules()
	if len(rs) != 2 || c.TTLOf(rs[0]) != 15*time.Minute || c.TTLOf(rs[1]) != 2*time.Hour {
		t.Fatalf("rules %+v", rs)
	}
	if w := rs[0].Webhooks; len(w) != 2 || w[0].URL != "https://hooks.slack.com/services/T/B/X" || w[0].Format != WebhookSlack || w[1].Secret != "s3cret" {
		t.Errorf("webhooks %+v", w)
	}
	if w := rs[1].Webhooks; len(w) != 2 || w[1].Proxy != "http://user:pw@10.1.2.3:3128" {
		t.Errorf("webhooks %+v", w)
	} else if classes, prefixes := w[0].EgressAllow(); len(classes) != 1 || classes[0] != "loopback" || len(prefixes) != 0 {
		t.Errorf("egress.allow of a loopback webhook: %v %v", classes, prefixes)
	} else if classes, prefixes = rs[0].Webhooks[0].EgressAllow(); classes != nil || prefixes != nil {
		t.Errorf("egress.allow of a public webhook: %v %v", classes, prefixes)
	}
	if got := c.ConsolePublicURL(); got != "https://admin.example.com" {
		t.Errorf("public url %q", got)
	}
}
