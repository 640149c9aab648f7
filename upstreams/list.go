package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// Listed is one tool as its upstream lists it, schemas kept as raw bytes.
type Listed struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// maxListPages bounds tools/list paging against an upstream whose cursors
// never end.
const maxListPages = 100

// ListTools pages through tools/list.
func (c *Conn) ListTools(ctx context.Context) ([]Listed, error) {
	var all []Listed
	err := c.pages(ctx, string(mcp.MethodToolsList), "tools", func(raw []byte) error {
		var page []Listed // strict: a tool that does not decode fails the list
		if err := json.Unmarshal(raw, &page); err != nil {
			return err
		}
		all = append(all, page...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// annotations decodes a tool's hints; a malformed object counts as none.
func (l Listed) annotations() mcp.ToolAnnotation {
	var a mcp.ToolAnnotation
	if len(l.Annotations) > 0 {
		if err := json.Unmarshal(l.Annotations, &a); err != nil {
			return mcp.ToolAnnotation{}
		}
	}
	return a
}

// listOverCap explains a tools/list answer (or one page of it) refused as
// over the transport cap, maxMessage bytes: which cap it passed and the
// keys that raise it. Any other error is returned as it is. The answer's
// own size is not known: an oversize message is streamed past unread.
func listOverCap(srv *Server, maxMessage int, err error) error {
	var ce *CallError
	if !errors.As(err, &ce) || !ce.Oversize || maxMessage < frameSlack {
		return err
	}
	return fmt.Errorf("%w: the answer is over the %d byte limit on one upstream message "+
		"(max_result_bytes %d, the largest of this server and its tools, plus %d for framing); "+
		"raise it with mcpServers.%s.max_result_bytes (this server) or limits.max_result_bytes "+
		"(every server without its own)", err, maxMessage, maxMessage-frameSlack, frameSlack, srv.Name)
}
