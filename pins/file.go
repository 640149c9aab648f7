package pins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/toolgate/toolgate/canonjson"
)

// fileVersion is the lock file's format version.
const fileVersion = 1

// fileFormat is the lock file: a version and one entry per canonical tool
// ID. encoding/json writes map keys sorted, so the file is stable.
type fileFormat struct {
	Version int              `json:"version"`
	Tools   map[string]Entry `json:"tools"`
}

var (
	// idRe is <server>/<tool>: a server name as config allows it, and any
	// non-empty upstream tool name.
	idRe   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}/.+$`)
	hashRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// readFile reads and checks the lock file. A missing file is an empty set of
// pins; anything else that is not a complete, consistent lock file is an
// error naming the file, never an empty set: an empty set would trust every
// tool again.
func readFile(path string) (map[string]Entry, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pins file %s: %w", path, err)
	}
	m, err := parseFile(data)
	if err != nil {
		return nil, fmt.Errorf("pins file %s: %w (fix or restore it; toolgate never treats a damaged pins file as empty)", path, err)
	}
	return m, nil
}

func parseFile(data []byte) (map[string]Entry, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the file is empty")
	}
	// The strict parser first: it refuses duplicate keys, which
	// encoding/json would silently resolve to the last one.
	if _, err := canonjson.Canonical(data); err != nil {
		return nil, err
	}
	var f fileFormat
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("version %d, expected %d", f.Version, fileVersion)
	}
	if f.Tools == nil {
		return nil, errors.New(`no "tools" object`)
	}
	for id, e := range f.Tools {
		if err := checkEntry(id, &e); err != nil {
			return nil, fmt.Errorf("tools[%q]: %w", id, err)
		}
		f.Tools[id] = e
	}
	return f.Tools, nil
}

// checkEntry verifies one entry and replaces its definition with the
// canonical bytes, so that entries compare and hash the same however the
// file was indented.
func checkEntry(id string, e *Entry) error {
	if !idRe.MatchString(id) {
		return errors.New("expected a tool ID <server>/<tool>")
	}
	if !hashRe.MatchString(e.Hash) {
		return fmt.Errorf("hash: expected sha256: and 64 lowercase hex digits, got %q", clip(e.Hash, 80))
	}
	if len(e.Definition) == 0 {
		return errors.New("no definition")
	}
	d, err := ParseDefinition(e.Definition)
	if err != nil {
		return err
	}
	canon, err := d.Canonical()
	if err != nil {
		return fmt.Errorf("definition: %w", err)
	}
	if h := hashOf(canon); h != e.Hash {
		return fmt.Errorf("hash %s does not match its definition (%s); was it edited by hand?", e.Hash, h)
	}
	if wantID := strings.SplitN(id, "/", 2)[1]; d.Name != wantID {
		return fmt.Errorf("definition names tool %q, not %q", clip(d.Name, 80), clip(wantID, 80))
	}
	e.Definition = canon
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// encodeFile renders the lock file: indented, keys sorted, no HTML escaping
// (a description's <IMPORTANT> stays readable), ending in a newline.
func encodeFile(m map[string]Entry) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fileFormat{Version: fileVersion, Tools: m}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
