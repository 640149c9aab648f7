package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// modernMeta is the _meta every 2026-07-28 request carries (as the
// conformance suite's client sends it), before extra members.
const modernMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{},"roots":{"listChanged":true}}`

// modernCallBody is a 2026-07-28 tools/call of name, with extra _meta
// members (each followed by a comma) and arguments {}.
func modernCallBody(id, name, extraMeta string) string {
	return toolsCallBody(id, `{"name":"`+name+`","arguments":{},"_meta":{`+extraMeta+modernMeta+`}}`)
}

// modernHeaders are the headers of a 2026-07-28 tools/call of name.
func modernHeaders(name string) map[string]string {
	return map[string]string{"MCP-Protocol-Version": mcp.ProtocolVersion20260728, "Mcp-Method": "tools/call", "Mcp-Name": name,
		"Mcp-Session-Id": ""}
}

// postModern sends a 2026-07-28 tools/call to url (no session, as the
// protocol has none) and returns the messages of its answer.
func postModern(t *testing.T, url, name, body string) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer alice")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range modernHeaders(name) {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %v %s", resp.Status, err, data)
	}
	resp.Body = io.NopCloser(strings.NewReader(string(data)))
	return (&httpClient{t: t}).events(resp)
}

// A 2026-07-28 call with a progress token gets every one of its progress
// notifications on its own response, before the answer. Through mcp-go's
// handler, whose modern path has no event store, the last notification
// its forwarder took just as the handler returned was dropped (mcp-go
// trap 5): the conformance suite's tools-call-with-progress lost one of
// its three in about half its runs (issue 17).
func TestModernProgressTravelsOnTheCallStream(t *testing.T) {
	d := newDifferential(t)
	srv := httptest.NewServer(d.fast)
	defer srv.Close()
	const calls = 200
	before := d.fast.FastCalls()
	short := 0
	for i := range calls {
		events := postModern(t, srv.URL+"/mcp", "hostile__progress", modernCallBody(`7`, "hostile__progress", `"progressToken":"tok",`))
		var progress []float64
		for j, e := range events {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Token    any     `json:"progressToken"`
					Progress float64 `json:"progress"`
				} `json:"params"`
				Result struct {
					ResultType string `json:"resultType"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(e), &msg); err != nil {
				t.Fatalf("call %d: event %q: %v", i, e, err)
			}
			switch {
			case msg.Method == "notifications/progress" && msg.Params.Token == "tok" && j < len(events)-1:
				progress = append(progress, msg.Params.Progress)
			case string(msg.ID) == `7` && j == len(events)-1 && msg.Result.ResultType == "complete":
			default:
				t.Fatalf("call %d: event %d of %d is %s", i, j+1, len(events), e)
			}
		}
		if len(progress) != 3 || progress[0] != 0 || progress[1] != 50 || progress[2] != 100 {
			short++
			t.Logf("call %d: progress %v before the answer, want [0 50 100]", i, progress)
		}
	}
	if short > 0 {
		t.Fatalf("%d of %d calls lost progress", short, calls)
	}
	if got := d.fast.FastCalls() - before; got != calls {
		t.Fatalf("the fast path took %d of %d calls", got, calls)
	}
}

// modernSeeds are 2026-07-28 requests, the headers they are sent with
// besides modernHeaders, and whether the fast path takes them.
var modernSeeds = []struct {
	body  string
	hdr   map[string]string
	taken bool
}{
	{modernCallBody(`1`, "hostile__echo", ``), nil, true},
	{modernCallBody(`"m-2"`, "hostile__echo", `"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","io.toolgate/idempotency-key":"k-1",`), nil, true},
	{modernCallBody(`3`, "hostile__meta", ``), nil, true},
	{modernCallBody(`4`, "hostile__fail", ``), nil, true},
	{modernCallBody(`5`, "hostile__good_output", ``), nil, true},
	{modernCallBody(`6`, "nope__x", ``), nil, true},
	{modernCallBody(`7`, "hostile__echo", `"io.modelcontextprotocol/logLevel":"debug",`), nil, true},
	{modernCallBody(`10`, "hostile__progress", `"progressToken":"p-1 <&>",`), nil, true},
	{modernCallBody(`11`, "hostile__progress", `"progressToken":1.5,`), nil, true}, // decoded as mcp-go decodes it
	{toolsCallBody(`8`, `{"name":"hostile__echo","arguments":{"a":[1,2.5]},"inputResponses":{},"_meta":{`+modernMeta+`}}`), nil, true},
	{toolsCallBody(`9`, `{"name":"hostile__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`), nil, true},
	// what mcp-go refuses, and the fast path leaves to it
	{toolsCallBody(`20`, `{"name":"hostile__echo","arguments":{},"requestState":"tg-input-00","_meta":{`+modernMeta+`}}`), nil, false},
	{toolsCallBody(`21`, `{"name":"hostile__echo","arguments":{},"inputResponses":null,"_meta":{`+modernMeta+`}}`), nil, false},
	{toolsCallBody(`22`, `{"name":"hostile__echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), nil, false},
	{toolsCallBody(`23`, `{"name":"hostile__echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}`), nil, false},
	{toolsCallBody(`24`, `{"name":"hostile__echo","arguments":{}}`), nil, false},
	{modernCallBody(`25`, "hostile__echo", ``), map[string]string{"Mcp-Name": "hostile__other"}, false},
	{modernCallBody(`26`, "hostile__echo", ``), map[string]string{"Mcp-Method": ""}, false},
	{modernCallBody(`27`, "hostile__echo", ``), map[string]string{"Last-Event-ID": "1"}, false},
	{modernCallBody(`28`, "hostile__echo", ``), map[string]string{"MCP-Protocol-Version": "2025-11-25"}, false},
	{modernCallBody(`29`, "hostile__echo", ``), map[string]string{"Content-Type": "text/plain"}, false},
	{modernCallBody(`30`, "hostile__echo", ``), map[string]string{"Host": "evil.example:80"}, false},
	// members the allow-list does not name
	{modernCallBody(`40`, "hostile__echo", `"x-vendor":"1",`), nil, false},
	{toolsCallBody(`41`, `{"name":"hostile__echo","arguments":{},"task":{"ttl":1000},"_meta":{`+modernMeta+`}}`), nil, false},
	{toolsCallBody(`42`, `{"name":"hostile__echo","arguments":{"n":1E400},"_meta":{`+modernMeta+`}}`), nil, false},
	{toolsCallBody(`43`, `{"name":"hostile__echo","Arguments":{},"_meta":{`+modernMeta+`}}`), nil, false},
	{`{"jsonrpc":"2.0","id":44,"method":"tools/list","params":{"_meta":{` + modernMeta + `}}}`, nil, false},
	{toolsCallBody(`1.5`, `{"name":"hostile__echo","arguments":{},"_meta":{`+modernMeta+`}}`), nil, false},
	// notifications/cancelled: acknowledged (202) and ignored only when it
	// passes mcp-go's checks of a 2026-07-28 POST; otherwise mcp-go's 400
	{modernCancelBody(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`), cancelHeaders(nil), false},
	{modernCancelBody(``), cancelHeaders(nil), false},
	{modernCancelBody(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`), cancelHeaders(map[string]string{"Last-Event-ID": "1"}), false},
	{modernCancelBody(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01"}`), cancelHeaders(map[string]string{"MCP-Protocol-Version": "2027-01-01"}), false},
	{modernCancelBody(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`), cancelHeaders(map[string]string{"MCP-Protocol-Version": "7"}), false},
}

// modernCancelBody is a notifications/cancelled with more params members.
func modernCancelBody(more string) string {
	if more != "" {
		more = "," + more
	}
	return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1` + more + `}}`
}

// cancelHeaders are a notification's standard headers, with extra.
func cancelHeaders(extra map[string]string) map[string]string {
	h := map[string]string{"Mcp-Method": "notifications/cancelled", "Mcp-Name": ""}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

// Every 2026-07-28 request shape gets the same answer (status, headers,
// body) and the same Call from the fast path as from mcp-go's handler,
// and the fast path takes exactly those its allow-list names.
func TestModernFastPathMatchesMCPGo(t *testing.T) {
	d := newDifferential(t)
	for _, s := range modernSeeds {
		if taken := d.check(t, []byte(s.body), modernClient, s.hdr); taken != s.taken {
			t.Errorf("%s %v: the fast path took it: %v, want %v", s.body, s.hdr, taken, s.taken)
		}
	}
}
