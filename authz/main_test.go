package authz

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (a watcher, a reload loop).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
