package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/approvals"
)

// Event is the body of a FormatJSON delivery:
//
//	{"event": "approval.requested", "delivery": "apr_….0.0", "sent_at": "…",
//	 "request": {"id": "apr_…", "principal": "alice", "tool": "orders/refund_order",
//	             "arguments": {…}, "args_sha256": "…", "rule": "policy.csv:67", "rule_digest": "…",
//	             "policy_version": "…", "created_at": "…", "expires_at": "…"},
//	 "url": "https://toolgate-admin.example.com/ui/approvals?id=apr_…"}
//
// url is absent without console.public_url. arguments are what Options.Arguments lets out of the
// canonical arguments the approval is bound to (fields and secrets redacted), and absent when it
// lets out none; args_sha256 is always the digest of the exact arguments.
type Event struct {
	Event    string    `json:"event"`
	Delivery string    `json:"delivery"`
	SentAt   time.Time `json:"sent_at"`
	Request  Held      `json:"request"`
	URL      string    `json:"url,omitempty"`
}

// Held is the request in an Event.
type Held struct {
	ID            string          `json:"id"`
	Principal     string          `json:"principal"`
	Tool          string          `json:"tool"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	ArgsSHA256    string          `json:"args_sha256"`
	Rule          string          `json:"rule,omitempty"`
	RuleDigest    string          `json:"rule_digest,omitempty"`
	PolicyVersion string          `json:"policy_version,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	ExpiresAt     time.Time       `json:"expires_at"`
}

// Link is the request's page in the console under base (console.public_url), or "".
func Link(base, id string) string {
	if base == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/ui/approvals?id=" + url.QueryEscape(id)
}

// body is the delivery of req to h, carrying args (nil: none) of its arguments.
func (n *Notifier) body(h Hook, req approvals.Request, args json.RawMessage, delivery string) ([]byte, error) {
	link := Link(n.o.ConsoleURL, req.ID)
	if h.Payload == FormatSlack {
		return marshal(slackMessage(req, args, link))
	}
	return marshal(Event{Event: EventRequested, Delivery: delivery, SentAt: n.o.Now().UTC(), URL: link,
		Request: Held{ID: req.ID, Principal: req.Principal, Tool: req.Tool, Arguments: args, ArgsSHA256: req.ArgsHash,
			Rule: shortRule(req.Rule), RuleDigest: req.RuleDigest, PolicyVersion: req.PolicyVersion,
			CreatedAt: req.CreatedAt.UTC(), ExpiresAt: req.ExpiresAt.UTC()}})
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// maxSlackArgs caps the arguments shown in a Slack message: a section's text holds at most 3,000
// characters, and the fence and note take some.
const maxSlackArgs = 2800

// slackMessage is an incoming-webhook message: text (the notification's) and blocks (what is shown).
// Everything from the request is escaped for Slack's mrkdwn (&, <, >), so arguments cannot mention
// @channel or hide a link; args (nil: none are sent) are in a code block, cut at maxSlackArgs.
func slackMessage(req approvals.Request, args json.RawMessage, link string) map[string]any {
	who := esc(req.Principal)
	tool := esc(req.Tool)
	text := fmt.Sprintf("Approval needed: %s called %s (held by %s; expires %s)", who, tool, esc(shortRule(req.Rule)),
		req.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	detail := "*" + tool + "* called by *" + who + "*\n" + slackArguments(args)
	blocks := []map[string]any{
		{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": detail}},
	}
	ctx := "Request `" + esc(req.ID) + "` · held by `" + esc(shortRule(req.Rule)) + "` · expires " +
		req.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")
	if link != "" {
		ctx += " · <" + link + "|Open in the console to approve or deny>"
		text += ": " + link
	}
	blocks = append(blocks, map[string]any{"type": "context", "elements": []map[string]string{{"type": "mrkdwn", "text": ctx}}})
	return map[string]any{"text": text, "blocks": blocks}
}

// slackArguments shows args in a code block, or says where to see them when none are sent.
func slackArguments(args json.RawMessage) string {
	if len(args) == 0 {
		return "_The arguments are not sent here: open the request in the console to see them._"
	}
	shown := pretty(args)
	if len(shown) > maxSlackArgs {
		shown = strings.ToValidUTF8(shown[:maxSlackArgs], "") + "\n… (cut; the approval covers all of it)"
	}
	return "```" + esc(strings.ReplaceAll(shown, "```", "`\u200b``")) + "```"
}

// esc escapes Slack's control characters in text taken from a request.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func pretty(args json.RawMessage) string {
	var b bytes.Buffer
	if len(args) == 0 || json.Indent(&b, args, "", "  ") != nil {
		return string(args)
	}
	return b.String()
}

// shortRule shows "/etc/toolgate/policy.csv:12" as "policy.csv:12": the receiver needs the line, not
// the gateway's file system.
func shortRule(ref string) string {
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		return ref[i+1:]
	}
	return ref
}
