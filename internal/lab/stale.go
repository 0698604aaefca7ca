package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Ownership markers. A lab leaves its namespaces behind if its process
// dies without Close (SIGKILL, a test binary killed by -timeout). New
// records every lab it builds in markerDir as BASE holding the creator's
// pid and process start time; CleanupStale removes the namespaces of labs
// whose creator is gone. Only names this package created are ever touched.
var markerDir = "/run/rttscope-lab"

// procStart returns the start time (in clock ticks since boot) of pid, the
// 22nd field of /proc/PID/stat, which tells a reused pid apart, and
// whether the process has already exited (a zombie waiting to be reaped).
func procStart(pid int) (start string, exited bool, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false, err
	}
	// The command name (field 2) may hold spaces; skip past its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", false, errors.New("malformed stat")
	}
	// f[0] is the state (field 3), f[19] the start time (field 22).
	return f[19], f[0] == "Z" || f[0] == "X", nil
}

func writeMarker(base string) error {
	if err := os.MkdirAll(markerDir, 0o755); err != nil {
		return err
	}
	st, _, err := procStart(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(markerDir, base), []byte(fmt.Sprintf("%d %s\n", os.Getpid(), st)), 0o644)
}

func removeMarker(base string) {
	_ = os.Remove(filepath.Join(markerDir, base)) // a stale marker names a dead process: harmless
}

// creatorAlive reports whether the process recorded in a marker still runs.
func creatorAlive(marker []byte) bool {
	f := strings.Fields(string(marker))
	if len(f) != 2 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	st, exited, err := procStart(pid)
	return err == nil && !exited && st == f[1]
}

// CleanupStale removes the namespaces of labs whose creating process has
// died without closing them, and returns their names. Labs of live
// processes are left alone.
func CleanupStale() ([]string, error) {
	ents, err := os.ReadDir(markerDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		base := e.Name()
		b, err := os.ReadFile(filepath.Join(markerDir, base))
		if err != nil || creatorAlive(b) {
			continue
		}
		names, _ := filepath.Glob(filepath.Join(netnsDir, base+"-*"))
		ok := true
		for _, p := range names {
			if err := removeNetns(filepath.Base(p)); err != nil {
				errs = append(errs, err)
				ok = false
				continue
			}
			removed = append(removed, filepath.Base(p))
		}
		if ok {
			removeMarker(base)
		}
	}
	return removed, errors.Join(errs...)
}
