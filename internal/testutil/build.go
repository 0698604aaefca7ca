package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
)

// RttscopeCmd is the import path of the rttscope command.
const RttscopeCmd = "github.com/rttscope/rttscope/cmd/rttscope"

// Build compiles the main package pkg (an import path of this module; the
// go command must run inside its source tree) into a new directory that
// every user can traverse, so tests may run the program as nobody too.
// The program is named after the last element of pkg; cleanup removes the
// directory.
func Build(pkg string) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "rttscope-build-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	if err := os.Chmod(dir, 0o755); err != nil {
		cleanup()
		return "", nil, err
	}
	bin = filepath.Join(dir, path.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, cleanup, nil
}
