package approvals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// fileVersion is the approvals file's format version.
const fileVersion = 1

// fileFormat is the approvals file:
//
//	{"version": 1, "requests": [{"id": "apr_…", "principal": "alice", "tool": "orders/refund_order",
//	  "args_hash": "<64 hex>", "args": {…}, "rule": "policy.csv:31", "state": "pending",
//	  "created_at": "…", "expires_at": "…"}, …]}
//
// Requests are kept oldest first. Timestamps are RFC 3339 with nanoseconds.
type fileFormat struct {
	Version  int       `json:"version"`
	Requests []Request `json:"requests"`
}

// readFile reads and checks the file. A missing file is an empty store; anything else that is not a
// complete, consistent approvals file is an error naming the file, never an empty store (that would
// forget denials and pending requests silently).
func readFile(path string) ([]Request, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return []Request{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("approvals file %s: %w", path, err)
	}
	reqs, err := parseFile(data)
	if err != nil {
		return nil, fmt.Errorf("approvals file %s: %w (fix, restore or remove it; toolgate never treats a damaged approvals file as empty)", path, err)
	}
	return reqs, nil
}

func parseFile(data []byte) ([]Request, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the file is empty")
	}
	var f fileFormat
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON object")
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("version %d, expected %d", f.Version, fileVersion)
	}
	if f.Requests == nil {
		return nil, errors.New(`no "requests" list`)
	}
	seen := make(map[string]bool, len(f.Requests))
	for i, r := range f.Requests {
		if err := checkRequest(&r); err != nil {
			return nil, fmt.Errorf("requests[%d]: %w", i, err)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("requests[%d]: id %s appears twice", i, r.ID)
		}
		seen[r.ID] = true
	}
	return f.Requests, nil
}

func checkRequest(r *Request) error {
	switch {
	case !strings.HasPrefix(r.ID, "apr_") || len(r.ID) < 8:
		return fmt.Errorf("id: expected apr_ and random characters, got %q", clip(r.ID, 40))
	case r.Principal == "":
		return errors.New("no principal")
	case r.Tool == "":
		return errors.New("no tool")
	case r.ArgsHash == "":
		return errors.New("no args_hash")
	case r.CreatedAt.IsZero() || r.ExpiresAt.IsZero():
		return errors.New("created_at and expires_at are required")
	}
	if _, err := ParseState(string(r.State)); err != nil {
		return err
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// encodeFile renders the file: indented, no HTML escaping, ending in a newline.
func encodeFile(reqs []Request) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fileFormat{Version: fileVersion, Requests: reqs}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
