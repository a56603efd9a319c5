package docker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// buildCgroupName is the cgroup every task build's step containers are
// put under (ImageBuild's CgroupParent): the engine's builder takes no
// pids limit of its own, so the parent's pids.max bounds all task builds
// together (a fork bomb in one step stops at it).
const buildCgroupName = "dreadnode-build"

var (
	buildCgroupOnce sync.Once
	buildCgroupOK   bool
)

// buildCgroup prepares the parent cgroup with pids.max and returns its
// name for CgroupParent, or "" where the backend cannot (not root, not on
// the engine's host, or the engine uses the systemd cgroup driver, which
// wants a slice): then builds run without a pids limit (README, Task
// builds).
func buildCgroup(ctx context.Context, e *Groups, pids int64) string {
	buildCgroupOnce.Do(func() {
		if info, err := e.cli.Info(ctx); err != nil || info.CgroupDriver != "cgroupfs" {
			return
		}
		dirs := []string{"/sys/fs/cgroup/pids/" + buildCgroupName} // cgroup v1
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			dirs = []string{"/sys/fs/cgroup/" + buildCgroupName} // cgroup v2
		}
		for _, d := range dirs {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return
			}
			if err := os.WriteFile(filepath.Join(d, "pids.max"), []byte(strconv.FormatInt(pids, 10)), 0o644); err != nil {
				return
			}
		}
		buildCgroupOK = true
	})
	if !buildCgroupOK {
		return ""
	}
	return "/" + buildCgroupName
}
