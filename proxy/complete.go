package proxy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/sanitize"
)

// completer forwards completion/complete to the server that owns the
// prompt or resource template, after the same policy check as getting the
// prompt or reading through the template.
type completer struct{ s *Server }

// CompletePromptArgument implements server.PromptCompletionProvider.
func (c completer) CompletePromptArgument(ctx context.Context, name string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	p, ok := c.s.features().Prompt(name)
	if !ok {
		return nil, fmt.Errorf("prompt %q not found", sanitize.Clip(name, 200))
	}
	if err := c.s.permit(ctx, p.ID, authz.ActGet, completionArgs(arg, cctx)); err != nil {
		return nil, err
	}
	ref := map[string]string{"type": "ref/prompt", "name": p.Upstream}
	return c.complete(ctx, p.Server, ref, arg, cctx)
}

// CompleteResourceArgument implements server.ResourceCompletionProvider;
// uri is a template (or a listed resource's URI).
func (c completer) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	f := c.s.features()
	srv, ok := f.TemplateOwner(uri)
	if !ok {
		srv, ok = f.Owner(uri)
	}
	if !ok {
		return nil, fmt.Errorf("resource %q not found", sanitize.Clip(uri, 200))
	}
	if err := c.s.permit(ctx, srv+"/"+uri, authz.ActRead, completionArgs(arg, cctx)); err != nil {
		return nil, err
	}
	ref := map[string]string{"type": "ref/resource", "uri": uri}
	return c.complete(ctx, srv, ref, arg, cctx)
}

func (c completer) complete(ctx context.Context, srv string, ref map[string]string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	if sf, ok := c.s.features().Server(srv); !ok || !sf.Completions {
		return &mcp.Completion{Values: []string{}}, nil // the server offers none
	}
	params := map[string]any{"ref": ref, "argument": arg}
	if len(cctx.Arguments) > 0 {
		params["context"] = cctx
	}
	raw, err := c.s.forward(ctx, srv, string(mcp.MethodCompletionComplete), params)
	if err != nil {
		return nil, err
	}
	var res struct {
		Completion mcp.Completion `json:"completion"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, errUpstream
	}
	out := res.Completion
	out.Values = make([]string, 0, len(res.Completion.Values))
	for _, v := range res.Completion.Values {
		out.Values = append(out.Values, sanitize.Text(v))
	}
	return &out, nil
}

// completionArgs is what conditions see of a completion: the argument
// being completed and those already chosen.
func completionArgs(arg mcp.CompleteArgument, cctx mcp.CompleteContext) map[string]string {
	args := map[string]string{}
	for k, v := range cctx.Arguments {
		args[k] = v
	}
	args[arg.Name] = arg.Value
	return args
}
