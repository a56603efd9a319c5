// Package hardening is the one definition of what confines every container
// the backend starts on Docker (sandboxes, warm-pool containers, task
// services, helper containers): the capability set, no-new-privileges,
// the log cap, the default limits of a task service, and the runtime check.
// Keeping it in one place keeps sandboxes and task services from drifting
// apart.
package hardening

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/system"
)

// Capabilities is the documented minimum every container keeps: Docker's
// default set minus NET_RAW (raw sockets: ARP and packet forging on a shared
// segment), MKNOD (device nodes), SETFCAP (file capabilities handed to
// later executions) and AUDIT_WRITE. Everything else is dropped (CapDrop ALL).
var Capabilities = []string{
	"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT",
}

// AddableCapabilities may be added back by a task service (compose
// `cap_add`), which always runs on its environment's own network, where a
// raw socket reaches no other tenant. Sandboxes share networks, so their
// templates add nothing back.
var AddableCapabilities = []string{"NET_RAW"}

// NoNewPrivileges keeps setuid binaries and file capabilities from raising
// a process's privileges above the container's.
const NoNewPrivileges = "no-new-privileges:true"

// Log cap: the engine keeps at most LogMaxFiles files of LogMaxSize of a
// container's output, so a chatty container cannot fill the host's disk.
const (
	LogMaxSize  = "10m"
	LogMaxFiles = "2"
)

// Apply confines hc: every capability dropped but Capabilities (plus add,
// which the caller has validated), no-new-privileges, the engine's default
// seccomp and AppArmor profiles (nothing here ever asks for unconfined),
// and the log cap.
func Apply(hc *container.HostConfig, add ...string) {
	hc.CapDrop = []string{"ALL"}
	hc.CapAdd = slices.Clone(Capabilities)
	for _, c := range add {
		if c = capName(c); !slices.Contains(hc.CapAdd, c) {
			hc.CapAdd = append(hc.CapAdd, c)
		}
	}
	hc.SecurityOpt = []string{NoNewPrivileges}
	hc.Privileged = false
	hc.LogConfig = container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": LogMaxSize, "max-file": LogMaxFiles}}
}

// CheckCapAdd says why a requested capability may not be added back (nil
// when it may). Names are matched as Docker does: case-insensitive, with or
// without the CAP_ prefix.
func CheckCapAdd(capability string) error {
	name := capName(capability)
	if slices.Contains(AddableCapabilities, name) || slices.Contains(Capabilities, name) {
		return nil
	}
	return fmt.Errorf("capability %q cannot be added (allowed: %s)", capability, strings.Join(AddableCapabilities, ", "))
}

// Without returns caps less those named in drop ("ALL" names every one),
// except those named in keep (compose: cap_add wins over cap_drop).
func Without(caps, drop, keep []string) []string {
	norm := func(cs []string) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = capName(c)
		}
		return out
	}
	drop, keep = norm(drop), norm(keep)
	all := slices.Contains(drop, "ALL")
	return slices.DeleteFunc(slices.Clone(caps), func(c string) bool {
		return (all || slices.Contains(drop, c)) && !slices.Contains(keep, c)
	})
}

// capName is Docker's spelling of a capability: upper case, no CAP_ prefix.
func capName(c string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(c)), "CAP_")
}

// Limits are the resource limits of one container.
type Limits struct {
	MemoryBytes int64
	NanoCPUs    int64
	Pids        int64
}

// DefaultServiceLimits apply to a task service whose compose file sets no
// limit of its own (mem_limit / cpus / pids_limit or deploy.resources.limits).
var DefaultServiceLimits = Limits{MemoryBytes: 512 << 20, NanoCPUs: 1e9, Pids: 512}

// BuildLimits bound each RUN step of a task's Dockerfile build (the
// engine's builder runs one container per step).
var BuildLimits = Limits{MemoryBytes: 2 << 30, NanoCPUs: 2e9, Pids: 1024}

// HelperLimits bound the short-lived helper containers the backend starts.
var HelperLimits = Limits{MemoryBytes: 32 << 20, NanoCPUs: 5e8, Pids: 16}

// Set writes l into r; memory without swap, so a container over its limit
// is OOM-killed rather than swapping the host.
func (l Limits) Set(r *container.Resources) {
	r.Memory, r.MemorySwap = l.MemoryBytes, l.MemoryBytes
	r.NanoCPUs = l.NanoCPUs
	r.PidsLimit = &l.Pids
}

// Infoer is the part of the Docker client CheckRuntime needs.
type Infoer interface {
	Info(ctx context.Context) (system.Info, error)
}

// RuntimeError is a runtime the engine does not offer.
type RuntimeError struct {
	Field     string // where the name came from, e.g. "task.yaml runtime"
	Runtime   string
	Available []string
}

func (e *RuntimeError) Error() string {
	return fmt.Sprintf("%s: the Docker engine has no runtime %q (available: %s); install and register it with the engine (e.g. runsc for gVisor) or remove the field",
		e.Field, e.Runtime, strings.Join(e.Available, ", "))
}

// CheckRuntime returns a *RuntimeError when the engine does not offer
// runtime (named by field), nil when it does or runtime is "" (the
// engine's default).
func CheckRuntime(ctx context.Context, cli Infoer, field, runtime string) error {
	if runtime == "" {
		return nil
	}
	info, err := cli.Info(ctx)
	if err != nil {
		return fmt.Errorf("%s: could not ask the Docker engine for its runtimes: %w", field, err)
	}
	if _, ok := info.Runtimes[runtime]; ok {
		return nil
	}
	return &RuntimeError{Field: field, Runtime: runtime, Available: slices.Sorted(maps.Keys(info.Runtimes))}
}
