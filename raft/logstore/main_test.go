package logstore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: an
// unclosed Pebble or an unstopped raft.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
