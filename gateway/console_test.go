package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/authn"
)

// TestApprovalLineText: the console shows the text of the a line a request names, as the policy
// file reads now, and nothing for another file or a line that is no longer an a line.
func TestApprovalLineText(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.csv")
	body := "p, support_agent, orders/refund_order, call, allow\n\n  a, support_agent, orders/refund_order, call, amount > 50  \n"
	if err := os.WriteFile(policy, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		policy + ":3":                     "a, support_agent, orders/refund_order, call, amount > 50",
		policy + ":1":                     "", // a p line: the file changed since the request was held
		policy + ":9":                     "",
		policy + ":0":                     "",
		policy + ":x":                     "",
		policy:                            "",
		filepath.Join(dir, "other.csv:3"): "",
		"/etc/passwd:1":                   "",
	} {
		if got := approvalLineText(policy, ref); got != want {
			t.Errorf("approvalLineText(%q) = %q, want %q", ref, got, want)
		}
	}
}

// TestAdminListenerMountsTheConsole: /ui/ is the console only with console.approvers; without, the
// admin listener is what it was (the probes, and the admin API refusing a request without its key).
func TestAdminListenerMountsTheConsole(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		signin      int
	}{
		{"without approvers", "", http.StatusUnauthorized},
		{"with approvers", "console:\n  approvers:\n    - {name: carol, sha256: \"" + authn.HashKey("tg_carol_console") + "\"}\n", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, err := New(context.Background(), Options{ConfigPath: writeGateway(t, "", tc.extra)})
			if err != nil {
				t.Fatal(err)
			}
			defer gw.Close()
			h, err := gw.AdminListenerHandler()
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]int{"/ui/signin": tc.signin, "/healthz": http.StatusOK} {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
				if w.Code != want {
					t.Errorf("GET %s: %d, want %d", path, w.Code, want)
				}
			}
		})
	}
}
