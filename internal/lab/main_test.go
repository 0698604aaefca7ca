package lab

import (
	"fmt"
	"os"
	"testing"
)

// TestMain first removes labs left behind by earlier test binaries that
// were killed before their cleanups ran (e.g. by -timeout).
func TestMain(m *testing.M) {
	if os.Geteuid() == 0 {
		if removed, err := CleanupStale(); len(removed) > 0 || err != nil {
			fmt.Fprintf(os.Stderr, "removed stale lab namespaces %v (%v)\n", removed, err)
		}
	}
	os.Exit(m.Run())
}
