package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authn"
)

// TestKeysNewApprover: `toolgate keys new --approver carol` prints a key and the console.approvers
// line holding its hash.
func TestKeysNewApprover(t *testing.T) {
	cmd := exec.Command(self(t), "keys", "new", "--approver", "carol")
	cmd.Env = append(os.Environ(), execRole+"=toolgate")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`tg_[A-Za-z0-9_-]{40,}`).FindString(string(out))
	if key == "" || !strings.Contains(string(out), fmt.Sprintf(`- {name: carol, sha256: "%s"}`, authn.HashKey(key))) ||
		!strings.Contains(string(out), "approve, allow") {
		t.Fatalf("keys new --approver output:\n%s", out)
	}
	bad := exec.Command(self(t), "keys", "new", "--approver", "a,b")
	bad.Env = append(os.Environ(), execRole+"=toolgate")
	if err := bad.Run(); err == nil {
		t.Error("an approver name with a comma was accepted")
	}
}
