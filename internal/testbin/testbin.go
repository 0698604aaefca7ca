// Package testbin builds the rttscope binary for tests that run it as a
// subprocess (exit codes, kill -9, running as an unprivileged user).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build compiles cmd/rttscope into a new directory that every user can
// traverse, so tests may run it as nobody too. cleanup removes it.
func Build() (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "rttscope-test-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if err := os.Chmod(dir, 0o755); err != nil {
		cleanup()
		return "", nil, err
	}
	path = filepath.Join(dir, "rttscope")
	cmd := exec.Command("go", "build", "-o", path, "github.com/rttscope/rttscope/cmd/rttscope")
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go build rttscope: %v\n%s", err, out)
	}
	return path, cleanup, nil
}
