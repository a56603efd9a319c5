package docker

import (
	"os"
	"path/filepath"
	"syscall"
)

// A deployment's networks may only be pruned by another backend once no
// backend of that deployment runs. The daemon cannot say so (an idle live
// backend's network is as empty as a killed one's), so every backend holds
// a shared flock on a per-deployment file in the temp dir while it runs;
// the kernel releases it when the process dies, kill -9 included. A pruner
// that gets the lock exclusively knows no backend of that deployment runs
// on this host. A deployment with no lock file (its backends run on
// another host, or in a container with its own /tmp) is never pruned.

func deploymentLockPath(scope string) string {
	return filepath.Join(os.TempDir(), "dreadnode-deployment-"+filepath.Base(scope)+".lock")
}

// holdDeployment takes the shared lock of scope for the process's lifetime
// (until release); on any error it holds nothing and the deployment's
// networks may then be pruned while idle, which a create tolerates
// (isNetworkRace).
func holdDeployment(scope string) (release func()) {
	f, err := os.OpenFile(deploymentLockPath(scope), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() } // closing the last descriptor releases the lock
}

// deploymentGone reports whether no backend of scope runs on this host: its
// lock file exists and nobody holds it. It removes the file when so.
func deploymentGone(scope string) bool {
	path := deploymentLockPath(scope)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false // no file: not ours to judge
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false // held (EWOULDBLOCK) or unknown: alive
	}
	_ = os.Remove(path)
	return true
}
