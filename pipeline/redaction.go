package pipeline

import (
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/redact"
)

// redactError is err with the secrets in its message (a tool's own error
// text) and its detail (an upstream's error, for the log and the audit
// trail) replaced, counted on the exchange; err itself when there were
// none. Errors are never changed in place: a recorded one may be shared.
func redactError(r *redact.Redactor, x *Exchange, err *envelope.Error) *envelope.Error {
	if r == nil || err == nil {
		return err
	}
	msg, inMsg := r.String(err.Message)
	detail, inDetail := r.Uncounted().String(err.Detail)
	if inMsg == nil && inDetail == nil {
		return err
	}
	// The detail usually repeats the message (an upstream's JSON-RPC
	// error): a secret in both is one secret.
	var onlyDetail redact.Counts
	for name, n := range inDetail {
		if extra := n - inMsg[name]; extra > 0 {
			onlyDetail.Add(redact.Counts{name: extra})
		}
	}
	r.Report(onlyDetail)
	x.Redactions.Add(inMsg)
	x.Redactions.Add(onlyDetail)
	out := *err
	out.Message, out.Detail = msg, detail
	return &out
}

// RedactContent is c with the secrets in its text replaced (counted by the
// redactor's Options.Count), for content that does not pass through a
// call's exchange: a prompt's messages. nil redacts nothing.
func RedactContent(r *redact.Redactor, c mcp.Content) mcp.Content {
	var counts redact.Counts
	return redactBlock(r, c, &counts)
}

// RedactResource is RedactContent for a resource's contents
// (resources/read): its text, when it is a text resource.
func RedactResource(r *redact.Redactor, rc mcp.ResourceContents) mcp.ResourceContents {
	if t, ok := rc.(mcp.TextResourceContents); ok && r != nil {
		t.Text, _ = r.Content(t.Text)
		return t
	}
	return rc
}

// redactBlock is c with the secrets in its text replaced: a text block's
// text, an embedded text resource's text, a resource link's name, title
// and description. Images and audio are left alone.
func redactBlock(r *redact.Redactor, c mcp.Content, counts *redact.Counts) mcp.Content {
	if r == nil {
		return c
	}
	switch b := c.(type) {
	case mcp.TextContent:
		b.Text = redactContent(r, b.Text, counts)
		return b
	case mcp.EmbeddedResource:
		if rc, ok := b.Resource.(mcp.TextResourceContents); ok {
			rc.Text = redactContent(r, rc.Text, counts)
			b.Resource = rc
		}
		return b
	case mcp.ResourceLink:
		b.Name, b.Title, b.Description = redactText(r, b.Name, counts), redactText(r, b.Title, counts), redactText(r, b.Description, counts)
		return b
	}
	return c
}

// redactContent redacts a text that is often JSON (redact.Content).
func redactContent(r *redact.Redactor, s string, counts *redact.Counts) string {
	out, n := r.Content(s)
	counts.Add(n)
	return out
}

func redactText(r *redact.Redactor, s string, counts *redact.Counts) string {
	out, n := r.String(s)
	counts.Add(n)
	return out
}
