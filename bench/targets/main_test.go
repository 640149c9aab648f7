package targets

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: the lean stdio
// client's reader must end with its server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http keeps idle client connections' loops alive briefly after a test.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
