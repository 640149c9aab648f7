package targets

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: the lean stdio
// client's reader must end with its server. Nothing is ignored, not even
// net/http's keep-alive loops: each test closes its servers and clients, so
// a goroutine blocked reading a connection is a connection left open.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
