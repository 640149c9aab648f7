package discovery

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/upstreams"
)

func TestTerms(t *testing.T) {
	for text, want := range map[string]string{
		"TwilioApiV2010--CreateMessage": "twilio api 2010 creat messag",
		"browser_take_screenshot":       "browser take screenshot",
		"HTTPServer listing the files":  "http server list file",
		"API-post-search":               "api post search",
		"Send a message to the channel": "send messag channel",
	} {
		if got := strings.Join(terms(text), " "); got != want {
			t.Errorf("terms(%q) = %q, want %q", text, got, want)
		}
	}
}

// The meta-tools' names are the ones the catalog refuses to upstream
// tools.
func TestMetaToolNamesAreReserved(t *testing.T) {
	for _, tool := range Tools() {
		if !slices.Contains(upstreams.ReservedToolNames, tool.Name) {
			t.Errorf("%s is not in upstreams.ReservedToolNames %v", tool.Name, upstreams.ReservedToolNames)
		}
	}
	if len(Tools()) != len(upstreams.ReservedToolNames) {
		t.Errorf("%d meta-tools, %d reserved names", len(Tools()), len(upstreams.ReservedToolNames))
	}
}

func TestParseSearch(t *testing.T) {
	if q, n, err := ParseSearch([]byte(`{"query":"refund an order"}`)); err != nil || q != "refund an order" || n != DefaultLimit {
		t.Errorf("plain: %q %d %v", q, n, err)
	}
	if _, n, err := ParseSearch([]byte(`{"query":"x","limit":20}`)); err != nil || n != 20 {
		t.Errorf("limit 20: %d %v", n, err)
	}
	for name, args := range map[string]string{
		"no arguments":   ``,
		"not an object":  `["refund"]`,
		"no query":       `{"limit":3}`,
		"empty query":    `{"query":""}`,
		"query a number": `{"query":42}`,
		"unknown field":  `{"query":"x","scope":"all"}`,
		"query too long": `{"query":"` + strings.Repeat("é", maxQueryLength+1) + `"}`,
	} {
		if _, _, err := ParseSearch([]byte(args)); err == nil || !strings.Contains(err.Message, `expected {"query"`) || err.Code != "invalid_arguments" {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, args := range map[string]string{
		"limit 0":        `{"query":"x","limit":0}`,
		"limit 21":       `{"query":"x","limit":21}`,
		"limit fraction": `{"query":"x","limit":2.5}`,
		"limit string":   `{"query":"x","limit":"5"}`,
	} {
		if _, _, err := ParseSearch([]byte(args)); err == nil || err.Message != "limit: expected a whole number from 1 to 20" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseCall(t *testing.T) {
	name, args, err := ParseCall([]byte(`{"name":"orders__refund","arguments":{"amount":9007199254740993}}`))
	if err != nil || name != "orders__refund" || string(args) != `{"amount":9007199254740993}` {
		t.Errorf("got %q %s %v; want the inner arguments' exact bytes", name, args, err)
	}
	if name, args, err := ParseCall([]byte(`{"name":"t"}`)); err != nil || name != "t" || args != nil {
		t.Errorf("without arguments: %q %s %v", name, args, err)
	}
	if _, args, err := ParseCall([]byte(`{"name":"t","arguments":"x"}`)); err != nil || string(args) != `"x"` {
		t.Errorf("arguments that are not an object go to the chain, which refuses them as it would directly: %s %v", args, err)
	}
	for label, raw := range map[string]string{
		"no arguments":  ``,
		"not an object": `"orders__refund"`,
		"null":          `null`,
		"no name":       `{"arguments":{}}`,
		"empty name":    `{"name":""}`,
		"name a number": `{"name":7}`,
		"unknown field": `{"name":"t","args":{}}`,
	} {
		if _, _, err := ParseCall([]byte(raw)); err == nil || !strings.Contains(err.Message, `expected {"name"`) || err.Code != "invalid_arguments" {
			t.Errorf("%s: %v", label, err)
		}
	}
}

// A denied tool never appears in results, however well it matches; nor
// does a stand-in for a server that is down or a tool its pin blocks.
func TestSearchNeverReturnsWhatKeepRefuses(t *testing.T) {
	cat := realCatalog(t)
	ix := NewIndex(cat.Tools())
	denied := "github/merge_pull_request"
	visible := func(t *upstreams.Tool) bool { return t.ID != denied }
	for _, q := range []string{"merge pull request", "github merge_pull_request"} {
		for _, h := range ix.Search(q, Keep(visible), MaxLimit) {
			if h.Tool.ID == denied {
				t.Errorf("%q returned the denied %s", q, denied)
			}
		}
		if all := ix.Search(q, keepAll, 1); len(all) != 1 || all[0].Tool.ID != denied {
			t.Errorf("%q: without the filter the denied tool should rank first, got %v", q, ids(all))
		}
	}
	down := &upstreams.Tool{Name: "x__merge_pull_request", ID: "x/merge_pull_request", Unreachable: true}
	changed := &upstreams.Tool{Name: "y__merge_pull_request", ID: "y/merge_pull_request", Changed: true}
	if hits := NewIndex([]*upstreams.Tool{down, changed}).Search("merge pull request", Keep(func(*upstreams.Tool) bool { return true }), 5); len(hits) != 0 {
		t.Errorf("stand-ins found: %v", ids(hits))
	}
}
