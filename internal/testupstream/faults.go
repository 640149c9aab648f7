package testupstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// FlakyTool is the tool Options.Faults adds: echo, except on the fraction of its calls that get a fault.
const FlakyTool = "flaky"

// Fault is one kind of upstream failure injected into flaky's calls.
type Fault string

// The faults. Over stdio: crash ends the process mid-call (exit 3), hang answers nothing until the
// call is cancelled (at most MaxHang), garbage answers one of GarbageVariants. Over HTTP the request
// is handled before mcp-go sees it: crash aborts the connection without an answer, hang answers nothing
// until the client gives up, garbage answers 200 with a body that is not JSON (HTTPGarbageBody), and
// 429 answers 429 Too Many Requests with Retry-After: 1 (HTTP only).
const (
	FaultCrash     Fault = "crash"
	FaultHang      Fault = "hang"
	FaultGarbage   Fault = "garbage"
	FaultRateLimit Fault = "429"
)

// GarbageVariants are the stdio garbage answers, drawn uniformly: "unparseable" (the answer line split
// by a raw newline: neither part is JSON), "wrong_id" (a good answer under another id) and
// "bad_result" (valid JSON-RPC whose result is not a CallToolResult).
var GarbageVariants = []string{"unparseable", "wrong_id", "bad_result"}

// HTTPGarbageBody is the body of an HTTP garbage answer (Content-Type application/json).
const HTTPGarbageBody = `{"jsonrpc":"2.0","id":` + "\x00 this is not JSON\n"

// MaxHang bounds a hung call whose cancellation never arrives, so hung handlers cannot pile up.
const MaxHang = time.Minute

// Faults makes the tool flaky fail on a fraction of its calls, each fault drawn from Kinds with a
// generator seeded by Seed: the same seed and the same order of calls give the same faults.
type Faults struct {
	Rate  float64 // the fraction of flaky calls that get a fault, 0..1
	Seed  uint64
	Kinds []Fault // drawn uniformly; empty: every kind the transport supports
	// Log, when set, gets one line per injected fault, "<kind>" or "garbage <variant>", written
	// before the fault happens (a crash's line is out before the process exits).
	Log io.Writer
}

// faultPicker draws the faults of one upstream process.
type faultPicker struct {
	mu    sync.Mutex
	rng   *rand.Rand
	rate  float64
	kinds []Fault
	log   io.Writer
}

// DefaultFaults is every fault a transport supports: 429 only over HTTP.
func DefaultFaults(transport string) []Fault {
	if transport == "stdio" {
		return []Fault{FaultCrash, FaultHang, FaultGarbage}
	}
	return []Fault{FaultCrash, FaultHang, FaultGarbage, FaultRateLimit}
}

// ParseFaults reads a comma-separated list of faults ("" is the transport's default).
func ParseFaults(list, transport string) ([]Fault, error) {
	if strings.TrimSpace(list) == "" {
		return DefaultFaults(transport), nil
	}
	var out []Fault
	for _, s := range strings.Split(list, ",") {
		f := Fault(strings.TrimSpace(s))
		switch f {
		case FaultCrash, FaultHang, FaultGarbage:
		case FaultRateLimit:
			if transport == "stdio" {
				return nil, fmt.Errorf("fault %q needs HTTP", f)
			}
		default:
			return nil, fmt.Errorf("unknown fault %q (want crash, hang, garbage or 429)", f)
		}
		out = append(out, f)
	}
	return out, nil
}

func newFaultPicker(f Faults, transport string) *faultPicker {
	kinds := f.Kinds
	if len(kinds) == 0 {
		kinds = DefaultFaults(transport)
	}
	return &faultPicker{rng: rand.New(rand.NewPCG(f.Seed, f.Seed^0x9e3779b97f4a7c15)), rate: f.Rate, kinds: kinds, log: f.Log}
}

// pick draws whether this call gets a fault and which ("" for none), and for garbage its variant.
func (p *faultPicker) pick() (Fault, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rate <= 0 || p.rng.Float64() >= p.rate {
		return "", ""
	}
	f := p.kinds[p.rng.IntN(len(p.kinds))]
	variant := ""
	if f == FaultGarbage {
		variant = GarbageVariants[p.rng.IntN(len(GarbageVariants))]
	}
	if p.log != nil {
		line := string(f)
		if variant != "" {
			line += " " + variant
		}
		_, _ = io.WriteString(p.log, line+"\n")
	}
	return f, variant
}

// flakyTool is echo with stdio faults; over HTTP (p nil) the faults happen before mcp-go (faultHandler).
func flakyTool(p *faultPicker, exit func(int)) server.ServerTool {
	return server.ServerTool{
		Tool: mcp.Tool{Name: FlakyTool, Description: "Returns its arguments, except on the calls that get an injected fault.",
			RawInputSchema: json.RawMessage(`{"type":"object","additionalProperties":true}`), Annotations: hints(false, false, false, false)},
		Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if p == nil {
				return echo(ctx, req)
			}
			f, variant := p.pick()
			switch f {
			case FaultCrash:
				exit(3)
				return nil, fmt.Errorf("crash: exit returned")
			case FaultHang:
				t := time.NewTimer(MaxHang)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-t.C:
					return nil, fmt.Errorf("hang: never cancelled")
				}
			case FaultGarbage:
				switch variant {
				case "unparseable":
					return mcp.NewToolResultText(SplitMarker), nil
				case "wrong_id":
					return mcp.NewToolResultText(WrongIDMarker), nil
				default:
					return mcp.NewToolResultText(GarbageMarker), nil
				}
			}
			return echo(ctx, req)
		},
	}
}

// faultHandler injects the HTTP faults into the tools/call requests of flaky, before h sees them.
// stop ends hanging requests (the upstream is stopping).
func faultHandler(h http.Handler, p *faultPicker, stop <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRecordedLine+1))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if !bytes.Contains(body, []byte(FlakyTool)) || json.Unmarshal(body, &msg) != nil ||
			msg.Method != string(mcp.MethodToolsCall) || msg.Params.Name != FlakyTool {
			h.ServeHTTP(w, r)
			return
		}
		f, _ := p.pick()
		switch f {
		case FaultCrash:
			panic(http.ErrAbortHandler) // the connection drops without an answer
		case FaultHang:
			t := time.NewTimer(MaxHang)
			defer t.Stop()
			select {
			case <-r.Context().Done():
			case <-stop:
			case <-t.C:
			}
		case FaultGarbage:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, HTTPGarbageBody)
		case FaultRateLimit:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "rate limited by testupstream", http.StatusTooManyRequests)
		default:
			h.ServeHTTP(w, r)
		}
	})
}
