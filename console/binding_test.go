package console

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/authz"
)

// loadPolicyText is loadPolicy with another policy text.
func loadPolicyText(t *testing.T, text string) *authz.Policy {
	t.Helper()
	pol := filepath.Join(t.TempDir(), "policy.csv")
	if err := os.WriteFile(pol, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := authz.LoadPolicy(filepath.Join("..", "model.conf"), pol, authz.Options{Servers: []string{"orders"}, Principals: []string{"alice", "carol", "dave"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A decision is bound to the version of the rule that held the call: once the policy no longer has
// that rule (here its condition was edited), the page says why the request cannot be decided and a
// decision posted anyway is refused, with nothing decided. Editing other lines changes nothing.
func TestDecisionRefusedWhenTheRuleChanged(t *testing.T) {
	f := newFixture(t)
	req := f.hold("alice", `{"amount":150,"order_id":4821}`)
	b := f.browser()
	token := b.signIn(carolKey)

	f.setPolicy(loadPolicyText(t, testPolicy+"g, erin, support_agent\n")) // another line: the rule is the same
	if page := b.get("/ui/approvals").body; !strings.Contains(page, `action="/ui/approvals/`+req.ID+`"`) {
		t.Fatalf("after an unrelated edit the request cannot be decided:\n%s", page)
	}

	f.setPolicy(loadPolicyText(t, strings.Replace(testPolicy, "a, support_agent, orders/refund_order, call\n",
		"a, support_agent, orders/refund_order, call, amount > 100\n", 1)))
	page := b.get("/ui/approvals").body
	if strings.Contains(page, `action="/ui/approvals/`+req.ID+`"`) || !strings.Contains(page, "The policy no longer has the rule that held this call") {
		t.Errorf("the page still offers to decide a request whose rule changed:\n%s", page)
	}
	for _, decision := range []string{"approve", "deny"} {
		a := b.post("/ui/approvals/"+req.ID, url.Values{"decision": {decision}, "csrf": {token}})
		if a.StatusCode != http.StatusConflict || !strings.Contains(a.body, "no longer has the rule that held this call; nothing was decided") {
			t.Errorf("%s under the changed rule: %d %s", decision, a.StatusCode, a.body)
		}
	}
	if got := f.state(req.ID); got.State != approvals.StatePending || got.DecidedBy != "" {
		t.Fatalf("after the refused decisions: %s by %q", got.State, got.DecidedBy)
	}
}

// A webhook links to /ui/approvals?id=<id>: the page shows that request alone, wherever it would
// be in the list, or says what became of it.
func TestLinkToOneRequest(t *testing.T) {
	f := newFixture(t)
	first := f.hold("alice", `{"amount":60,"order_id":1}`)
	second := f.hold("alice", `{"amount":61,"order_id":2}`)
	b := f.browser()
	token := b.signIn(carolKey)
	page := b.get("/ui/approvals?id=" + second.ID).body
	if !strings.Contains(page, `id="`+second.ID+`"`) || strings.Contains(page, `id="`+first.ID+`"`) ||
		!strings.Contains(page, `<a href="/ui/approvals">All pending requests</a>`) {
		t.Errorf("the link to %s:\n%s", second.ID, page)
	}
	b.post("/ui/approvals/"+second.ID, url.Values{"decision": {"approve"}, "csrf": {token}})
	if page := b.get("/ui/approvals?id=" + second.ID).body; !strings.Contains(page, "was already approved by carol.") ||
		!strings.Contains(page, `id="`+first.ID+`"`) {
		t.Errorf("the link to a decided request:\n%s", page)
	}
	if page := b.get("/ui/approvals?id=apr_unknown").body; !strings.Contains(page, "is not waiting: it expired, or is unknown here") {
		t.Errorf("the link to an unknown request:\n%s", page)
	}
}
