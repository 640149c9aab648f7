package proxy

import (
	"context"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/sanitize"
)

// resolve maps the client-facing name to its catalog entry.
func (p *Pipeline) resolve(_ context.Context, x *exchange) *envelope.Error {
	tool, ok := p.Catalog().Resolve(x.call.Name)
	if !ok {
		return envelope.Errorf(envelope.ToolNotFound, "no tool named %q; call tools/list for the tools you may use", sanitize.Clip(x.call.Name, 80))
	}
	x.tool = tool
	return nil
}
