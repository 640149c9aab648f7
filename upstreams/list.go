package upstreams

import (
	"context"
	"encoding/json"
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
	cursor := ""
	seen := map[string]bool{}
	for page := 0; page < maxListPages; page++ {
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		raw, err := c.request(ctx, string(mcp.MethodToolsList), params)
		if err != nil {
			return nil, err
		}
		var res struct {
			Tools      []Listed `json:"tools"`
			NextCursor string   `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, malformed("tools/list result", raw, err)
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" {
			return all, nil
		}
		if seen[res.NextCursor] {
			return nil, fmt.Errorf("tools/list: cursor %q repeated", res.NextCursor)
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
	return nil, fmt.Errorf("tools/list: more than %d pages", maxListPages)
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
