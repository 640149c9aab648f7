package upstreams

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// ServerFeatures is what a server offers beyond tools, as it listed them
// when it (re)connected or announced a change: the capabilities it declared
// in initialize, and its resources, resource templates and prompts.
type ServerFeatures struct {
	HasResources bool // the server declared resources
	Subscribe    bool // resources/subscribe is supported
	Logging      bool // logging/setLevel is supported
	Completions  bool // completion/complete is supported

	Resources []mcp.Resource
	Templates []mcp.ResourceTemplate
	Prompts   []mcp.Prompt
}

// listFeatures reads what the upstream declared it offers. A list that
// fails is logged and left empty: a server whose tools work stays usable
// when, say, its prompts/list is broken.
func (c *Conn) listFeatures(ctx context.Context) *ServerFeatures {
	caps := c.caps
	f := &ServerFeatures{Logging: caps.Logging != nil, Completions: caps.Completions != nil}
	if caps.Resources != nil {
		// A 2026-07-28 upstream's updates arrive only on subscriptions/listen.
		f.HasResources, f.Subscribe = true, caps.Resources.Subscribe && !c.ListenRefused()
		c.listOrWarn(ctx, string(mcp.MethodResourcesList), "resources", func(raw []byte) error {
			return appendDecoded(raw, &f.Resources)
		})
		c.listOrWarn(ctx, string(mcp.MethodResourcesTemplatesList), "resourceTemplates", func(raw []byte) error {
			return appendDecoded(raw, &f.Templates)
		})
	}
	if caps.Prompts != nil {
		c.listOrWarn(ctx, string(mcp.MethodPromptsList), "prompts", func(raw []byte) error {
			return appendDecoded(raw, &f.Prompts)
		})
	}
	return f
}

// appendDecoded decodes one page's items and appends them to *into. An
// item that does not decode (an invalid URI template, say) is skipped
// rather than costing the whole page; the page itself must be an array.
func appendDecoded[T any](raw []byte, into *[]T) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return err
	}
	for _, item := range items {
		var v T
		if json.Unmarshal(item, &v) == nil {
			*into = append(*into, v)
		}
	}
	return nil
}

// listOrWarn pages through method, handing each page's field to each; a
// failure is logged, and what was read before it is kept.
func (c *Conn) listOrWarn(ctx context.Context, method, field string, each func([]byte) error) {
	if err := c.pages(ctx, method, field, each); err != nil {
		c.log.Warn("list failed; the server's "+field+" are not (all) offered", "method", method, "err", err.Error())
	}
}

// pages pages through a list method whose result holds its items under
// field and a nextCursor, bounded against cursors that never end.
func (c *Conn) pages(ctx context.Context, method, field string, each func([]byte) error) error {
	cursor := ""
	seen := map[string]bool{}
	for page := 0; page < maxListPages; page++ {
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		raw, err := c.request(ctx, method, params)
		if err != nil {
			return err
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(raw, &res); err != nil {
			return malformed(method+" result", raw, err)
		}
		if items, ok := res[field]; ok && string(items) != "null" {
			if err := each(items); err != nil {
				return malformed(method+" "+field, items, err)
			}
		}
		var next string
		if n, ok := res["nextCursor"]; ok && string(n) != "null" {
			if err := json.Unmarshal(n, &next); err != nil {
				return malformed(method+" nextCursor", n, err)
			}
		}
		if next == "" {
			return nil
		}
		if seen[next] {
			return fmt.Errorf("%s: cursor %q repeated", method, next)
		}
		seen[next] = true
		cursor = next
	}
	return fmt.Errorf("%s: more than %d pages", method, maxListPages)
}

// Forward sends one request other than tools/call (resources/read,
// prompts/get, completion/complete, resources/subscribe, ...) with params
// as given, and returns the raw result. Errors are classified like a tool
// call's (*CallError, *RPCError).
func (c *Conn) Forward(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if c.modern && (method == string(mcp.MethodResourcesSubscribe) || method == string(mcp.MethodResourcesUnsubscribe)) {
		return c.modernSubscription(method, params)
	}
	return c.request(ctx, method, params)
}
