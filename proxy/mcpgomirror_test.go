package proxy

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// mcpgomirror.go copies private parts of one mcp-go version: when go.mod
// moves to another, this fails until someone has re-checked the copies
// against it (the file's comment says how) and updated mirroredMCPGo.
func TestMCPGoMirrorVersion(t *testing.T) {
	const module = "github.com/mark3labs/mcp-go"
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for line := range strings.Lines(string(gomod)) {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		switch {
		case len(fields) >= 2 && fields[0] == module:
			versions = append(versions, fields[1])
		case len(fields) >= 3 && fields[0] == "replace" && fields[1] == module,
			len(fields) >= 2 && fields[0] == module && fields[1] == "=>":
			t.Errorf("go.mod replaces %s (%s): mcpgomirror.go mirrors the released %s", module, strings.TrimSpace(line), mirroredMCPGo)
		}
	}
	if len(versions) != 1 {
		t.Fatalf("go.mod requires %s %d times (%v)", module, len(versions), versions)
	}
	if versions[0] != mirroredMCPGo {
		t.Fatalf("go.mod requires %s %s, but mcpgomirror.go mirrors %s: re-check what the fast path copies from it "+
			"(mcpgomirror.go says what), run FuzzFastPathMatchesMCPGo, then update mirroredMCPGo", module, versions[0], mirroredMCPGo)
	}
}

// A panic that reaches runFast is answered as mcp-go's recovery answers
// it, without the panic's text.
func TestRunFastRecoversAsMCPGo(t *testing.T) {
	s := &Server{opts: Options{Calls: panicking{}}, log: slog.New(slog.DiscardHandler)}
	res, err := s.runFast(t.Context(), Call{Name: "x__y"})
	if res != nil || err == nil || err.Error() != "panic recovered in x__y tool handler" {
		t.Fatalf("runFast: %v, %v", res, err)
	}
	data, err := encodeAnswer([]byte(`3`), nil, panicError("x__y"))
	if err != nil || string(data) != `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"panic recovered in x__y tool handler"}}` {
		t.Fatalf("the answer: %s, %v", data, err)
	}
}

type panicking struct{}

func (panicking) Handle(context.Context, Call) *mcp.CallToolResult { panic("boom") }
