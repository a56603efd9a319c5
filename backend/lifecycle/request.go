package lifecycle

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
)

// CreateRequest is the body of POST /sandboxes (§1), the type generated
// from the API document.
type CreateRequest = apitypes.CreateSandbox

// NetworkRequest is the create option "network".
type NetworkRequest = apitypes.SandboxNetwork

// removedFields answers retired create fields with their replacement.
var removedFields = map[string]string{
	"timeoutMs":     "removed; the sandbox lifetime is `timeout` in seconds (only a command run's timeoutMs is in milliseconds)",
	"secure":        "removed; every sandbox is secured by the accessToken returned at create (send it as X-Access-Token); drop the field",
	"mcp":           "removed; MCP servers are no longer configured at create; drop the field and start them with exec",
	"volume_mounts": "renamed; use `volumeMounts` (camelCase)",
}

// Bounds of the create options: the document's (CreateSandbox), which the
// server checks on POST /sandboxes before the handler runs. Spec.validate
// checks them again because a Spec also comes from entrances the document
// does not bound (E2B's create, a runtime's start) and from Go callers.
const (
	DefaultTimeout = apitypes.CreateSandboxTimeoutDefault
	MaxTimeout     = apitypes.CreateSandboxTimeoutMaximum
	MaxCPU         = apitypes.SandboxResourcesCPUCountMaximum
	MinMemoryMB    = apitypes.SandboxResourcesMemoryMBMinimum
	MaxMemoryMB    = apitypes.SandboxResourcesMemoryMBMaximum
	maxMetadata    = apitypes.CreateSandboxMetadataMaxProperties
	maxMetaValue   = apitypes.CreateSandboxMetadataValuesMaxLength
	maxEnvName     = 256 // OpenAPI 3.0 cannot bound a map's keys: the description says it
	maxEnvValue    = apitypes.CreateSandboxEnvVarsValuesMaxLength
	maxEnvVars     = apitypes.CreateSandboxEnvVarsMaxProperties
	maxMountPath   = apitypes.VolumeMountPathMaxLength
)

// reservedMounts are the sandbox paths a volume may not cover: the kernel's
// and the engine's (/proc, /sys, /dev and below them; the files the engine
// writes for networking), without which the sandbox cannot run.
var (
	reservedTrees = []string{"/proc", "/sys", "/dev"}
	reservedFiles = []string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"}
)

var (
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	metaKey = regexp.MustCompile(`^[A-Za-z0-9_.\-/]{1,64}$`)
	// A template id, an org's template's alias (E2B's "team/alias"
	// accepted), either with ":tag".
	template = regexp.MustCompile(`^([a-z0-9_-]{1,64}/)?[a-z0-9][a-z0-9_.\-]{0,63}(:[a-z0-9_.\-]{1,64})?$`)
	volName  = regexp.MustCompile(`^[a-z0-9][a-z0-9_.\-]{0,63}$`)
	hostname = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9-]{1,63}\.)*[a-zA-Z0-9-]{1,63}$`)
)

// Spec is a sandbox to create, in Go values: the create route's body
// (CreateRequest.Spec) and a runtime's start both build one. Create
// validates it; an error names the field as the create route spells it.
type Spec struct {
	TemplateID string // "" is base
	TimeoutSec int    // seconds the sandbox lives
	// CPUCount and MemoryMB override the template's (nil: its default).
	CPUCount   *int
	MemoryMB   *int
	EnvVars    map[string]string
	Metadata   map[string]string
	AutoPause  bool
	AutoResume bool
	// AutoPauseFilesystem makes the auto-pause at the timeout
	// filesystem-only (create's autoPauseMemory: false).
	AutoPauseFilesystem bool
	Network             compute.Network
	Volumes             []compute.Volume
	// OrgVolumes are the indexes in Volumes of mounts of org volumes,
	// named by Name (API.md §14); Create resolves them to their VolumeID.
	OrgVolumes []int
	Command    []string
	// E2BSecure is store.Spec.E2BSecure: set by the E2B edge alone.
	E2BSecure *bool
	// E2BMaskRequestHost is store.Spec.E2BMaskRequestHost: set by the E2B edge alone.
	E2BMaskRequestHost string
	// AutoResumeTimeoutSec is store.Spec.AutoResumeTimeoutSec: set by the E2B edge alone.
	AutoResumeTimeoutSec int
	// OutputDir is store.Spec.OutputDir: set by the Worlds jobs service.
	OutputDir string
}

// specOf is the sandbox the request asks for, with the defaults filled in.
func specOf(req *CreateRequest) Spec {
	sp := Spec{TemplateID: req.TemplateID, TimeoutSec: DefaultTimeout, EnvVars: req.EnvVars, Metadata: req.Metadata,
		AutoPause: deref(req.AutoPause), AutoResume: deref(req.AutoResume), Network: networkOf(req.Network), Command: req.Command}
	if req.Timeout != nil {
		sp.TimeoutSec = *req.Timeout
	}
	sp.AutoPauseFilesystem = req.AutoPauseMemory != nil && !*req.AutoPauseMemory
	if r := req.Resources; r != nil {
		sp.CPUCount, sp.MemoryMB = r.CPUCount, r.MemoryMB
	}
	for _, v := range req.VolumeMounts {
		sp.Volumes = append(sp.Volumes, compute.Volume{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly})
		if v.Shared {
			sp.OrgVolumes = append(sp.OrgVolumes, len(sp.Volumes)-1)
		}
	}
	return sp
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// validate checks the spec and fills defaults; the error names the field.
func (sp *Spec) validate(minTimeout int) error {
	if sp.TemplateID == "" {
		sp.TemplateID = "base"
	}
	if sp.AutoPauseFilesystem && !sp.AutoPause {
		return domain.Invalid("autoPauseMemory", "false (a filesystem-only auto-pause) applies only to an auto-pause: set autoPause to true, or drop autoPauseMemory")
	}
	if sp.AutoPauseFilesystem && sp.AutoResume {
		return domain.Invalid("autoPauseMemory", "false (a filesystem-only auto-pause) cannot be combined with autoResume: a filesystem-only pause restarts the sandbox's processes, which a request must not do silently; drop one of them")
	}
	if !template.MatchString(sp.TemplateID) {
		return domain.Invalid("templateID", "must be a template id or name such as \"base\" or \"my-template:v1\" (lowercase letters, digits, '.', '_', '-', then an optional \":tag\")")
	}
	if err := checkTimeout("timeout", sp.TimeoutSec, minTimeout); err != nil {
		return err
	}
	if err := checkEnv("envVars", sp.EnvVars); err != nil {
		return err
	}
	if len(sp.Metadata) > maxMetadata {
		return domain.Invalid("metadata", fmt.Sprintf("at most %d entries", maxMetadata))
	}
	for k, v := range sp.Metadata {
		if !metaKey.MatchString(k) {
			return domain.Invalid("metadata."+k, "keys are 1-64 characters of letters, digits, '_', '.', '-', '/'")
		}
		if len(v) > maxMetaValue {
			return domain.Invalid("metadata."+k, fmt.Sprintf("values are at most %d characters", maxMetaValue))
		}
		if strings.ContainsRune(v, 0) {
			return domain.Invalid("metadata."+k, "must not contain NUL")
		}
	}
	if sp.CPUCount != nil && (*sp.CPUCount < apitypes.SandboxResourcesCPUCountMinimum || *sp.CPUCount > MaxCPU) {
		return domain.Invalid("resources.cpuCount", fmt.Sprintf("must be between %d and %d", apitypes.SandboxResourcesCPUCountMinimum, MaxCPU))
	}
	if sp.MemoryMB != nil && (*sp.MemoryMB < MinMemoryMB || *sp.MemoryMB > MaxMemoryMB) {
		return domain.Invalid("resources.memoryMB", fmt.Sprintf("must be between %d and %d", MinMemoryMB, MaxMemoryMB))
	}
	for i, rule := range sp.Network.AllowOut {
		if !validEgress(rule) {
			return domain.Invalid(fmt.Sprintf("network.allowOut.%d", i), "must be an IP address, a CIDR block or a host name")
		}
	}
	for i, rule := range sp.Network.DenyOut {
		if !validEgress(rule) {
			return domain.Invalid(fmt.Sprintf("network.denyOut.%d", i), "must be an IP address, a CIDR block or a host name")
		}
	}
	seen := map[string]bool{}
	for i, m := range sp.Volumes {
		field := fmt.Sprintf("volumeMounts.%d", i)
		if slices.Contains(sp.OrgVolumes, i) {
			if m.Name == "" {
				return domain.Invalid(field+".name", "must name one of the organization's volumes (GET /volumes)")
			}
		} else if !volName.MatchString(m.Name) {
			return domain.Invalid(field+".name", "must be a volume name (lowercase letters, digits, '.', '_', '-')")
		}
		if err := checkMountPath(field+".path", m.Path); err != nil {
			return err
		}
		if seen[m.Path] {
			return domain.Invalid(field+".path", "is mounted twice")
		}
		seen[m.Path] = true
	}
	for i, a := range sp.Command {
		if strings.ContainsRune(a, 0) {
			return domain.Invalid(fmt.Sprintf("command.%d", i), "must not contain NUL")
		}
	}
	return nil
}

// checkEnv refuses what the engine would only refuse at start: names that
// are not variable names, NUL bytes, oversized names or values.
func checkEnv(field string, env map[string]string) error {
	if len(env) > maxEnvVars {
		return domain.Invalid(field, fmt.Sprintf("at most %d variables", maxEnvVars))
	}
	for k, v := range env {
		name := strings.ToValidUTF8(strings.ReplaceAll(k, "\x00", `\0`), "?") // shown in the error
		if len(name) > 64 {
			name = name[:64] + "…"
		}
		switch {
		case len(k) > maxEnvName:
			return domain.Invalid(field+"."+name, fmt.Sprintf("names are at most %d characters", maxEnvName))
		case !envName.MatchString(k):
			return domain.Invalid(field+"."+name, "is not a valid environment variable name (letters, digits and '_', not starting with a digit)")
		case strings.ContainsRune(v, 0):
			return domain.Invalid(field+"."+k, "must not contain NUL")
		case len(v) > maxEnvValue:
			return domain.Invalid(field+"."+k, fmt.Sprintf("values are at most %d bytes", maxEnvValue))
		}
	}
	return nil
}

// checkMountPath accepts a clean absolute path that leaves the sandbox's
// system paths alone.
func checkMountPath(field, p string) error {
	switch {
	case strings.ContainsRune(p, 0):
		return domain.Invalid(field, "must not contain NUL")
	case len(p) > maxMountPath:
		return domain.Invalid(field, fmt.Sprintf("is at most %d characters", maxMountPath))
	case !path.IsAbs(p) || path.Clean(p) == "/":
		return domain.Invalid(field, "must be an absolute path other than /")
	case path.Clean(p) != strings.TrimSuffix(p, "/") || strings.Contains(p, ":"):
		return domain.Invalid(field, "must be a clean absolute path (no '.', '..', '//' or ':'), e.g. /data")
	}
	clean := path.Clean(p)
	for _, t := range reservedTrees {
		if clean == t || strings.HasPrefix(clean, t+"/") {
			return domain.Invalid(field, fmt.Sprintf("must not be %s or under it: the sandbox needs it; mount elsewhere, e.g. /data", t))
		}
	}
	if slices.Contains(reservedFiles, clean) {
		return domain.Invalid(field, fmt.Sprintf("must not be %s: the engine manages it", clean))
	}
	return nil
}

func checkTimeout(field string, v, minTimeout int) error {
	if v < minTimeout || v > MaxTimeout {
		return domain.Invalid(field, fmt.Sprintf("must be between %d and %d seconds", minTimeout, MaxTimeout))
	}
	return nil
}

func validEgress(rule string) bool {
	if net.ParseIP(rule) != nil {
		return true
	}
	if _, _, err := net.ParseCIDR(rule); err == nil {
		return true
	}
	return len(rule) <= 253 && hostname.MatchString(rule)
}

func networkOf(n *NetworkRequest) compute.Network {
	if n == nil {
		return compute.Network{}
	}
	return compute.Network{AllowInternetAccess: n.AllowInternetAccess, AllowPublicTraffic: n.AllowPublicTraffic,
		AllowOut: n.AllowOut, DenyOut: n.DenyOut}
}
