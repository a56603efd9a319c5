// Package containment checks from inside a running container what confines
// it (capabilities, no_new_privs, cgroup limits), by reading the kernel's
// own view (/proc/self/status, the cgroup files) rather than the engine's
// configuration, so a protection that the engine silently did not apply is
// caught. Cgroup v1 and v2 are both read.
package containment

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// capBits numbers the capabilities (linux/capability.h).
var capBits = map[string]uint{
	"CHOWN": 0, "DAC_OVERRIDE": 1, "DAC_READ_SEARCH": 2, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6,
	"SETUID": 7, "SETPCAP": 8, "LINUX_IMMUTABLE": 9, "NET_BIND_SERVICE": 10, "NET_BROADCAST": 11,
	"NET_ADMIN": 12, "NET_RAW": 13, "IPC_LOCK": 14, "IPC_OWNER": 15, "SYS_MODULE": 16, "SYS_RAWIO": 17,
	"SYS_CHROOT": 18, "SYS_PTRACE": 19, "SYS_PACCT": 20, "SYS_ADMIN": 21, "SYS_BOOT": 22, "SYS_NICE": 23,
	"SYS_RESOURCE": 24, "SYS_TIME": 25, "SYS_TTY_CONFIG": 26, "MKNOD": 27, "LEASE": 28, "AUDIT_WRITE": 29,
	"AUDIT_CONTROL": 30, "SETFCAP": 31,
}

// Mask is the /proc/<pid>/status bitmask of caps.
func Mask(caps []string) uint64 {
	var m uint64
	for _, c := range caps {
		b, ok := capBits[c]
		if !ok {
			panic("containment: unknown capability " + c)
		}
		m |= 1 << b
	}
	return m
}

// Field returns the value of key in /proc/<pid>/status text ("" if absent).
func Field(status, key string) string {
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// CheckStatus returns an error unless status (of a process in the
// container) shows the bounding set caps, the effective set caps when the
// process runs as root (uid 0; others have none effective), and no_new_privs.
func CheckStatus(status string, caps []string) error {
	want := Mask(caps)
	var errs []string
	check := func(key string, want uint64) {
		got, err := strconv.ParseUint(Field(status, key), 16, 64)
		if err != nil || got != want {
			errs = append(errs, fmt.Sprintf("%s is %q, want %016x", key, Field(status, key), want))
		}
	}
	check("CapBnd", want)
	if uid := strings.Fields(Field(status, "Uid")); len(uid) > 1 && uid[1] == "0" {
		check("CapEff", want)
	} else {
		check("CapEff", 0)
	}
	if got := Field(status, "NoNewPrivs"); got != "1" {
		errs = append(errs, fmt.Sprintf("NoNewPrivs is %q, want 1", got))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Exec runs cmd in container id and returns its stdout; a non-zero exit is
// an error carrying stderr.
func Exec(ctx context.Context, cli *client.Client, id string, cmd ...string) (string, error) {
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", err
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", err
	}
	defer att.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, att.Reader); err != nil {
		return "", err
	}
	st, err := cli.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return "", err
	}
	if st.ExitCode != 0 {
		return out.String(), fmt.Errorf("%q exited with %d: %s", cmd, st.ExitCode, errOut.String())
	}
	return out.String(), nil
}

// limitsScript prints "pids <pids.max>" and "memory <limit>" from cgroup
// v1 or v2, whichever the container sees.
const limitsScript = `for f in /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max; do [ -r $f ] && echo pids $(cat $f) && break; done
for f in /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max; do [ -r $f ] && echo memory $(cat $f) && break; done`

// Limits reads the pids and memory limits container id sees in its cgroup
// ("max", or v1's huge memory number, when unlimited).
func Limits(ctx context.Context, cli *client.Client, id string) (pids, memory string, err error) {
	out, err := Exec(ctx, cli, id, "sh", "-c", limitsScript)
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			switch k {
			case "pids":
				pids = v
			case "memory":
				memory = v
			}
		}
	}
	if pids == "" || memory == "" {
		return pids, memory, fmt.Errorf("no cgroup v1 or v2 pids/memory files readable in the container: %q", out)
	}
	return pids, memory, nil
}
