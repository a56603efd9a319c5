package lifecycle

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/provider"
)

// CreateRequest is the body of POST /sandboxes (§1).
type CreateRequest struct {
	TemplateID   string            `json:"templateID"`
	Timeout      *int              `json:"timeout"`
	WaitReady    bool              `json:"waitReady"`
	EnvVars      map[string]string `json:"envVars"`
	Metadata     map[string]string `json:"metadata"`
	AutoPause    bool              `json:"autoPause"`
	AutoResume   bool              `json:"autoResume"`
	Network      *NetworkRequest   `json:"network"`
	VolumeMounts []VolumeMount     `json:"volumeMounts"`
	Resources    *Resources        `json:"resources"`
	Command      []string          `json:"command"`
}

// NetworkRequest is the create option "network".
type NetworkRequest struct {
	AllowPublicTraffic  *bool    `json:"allowPublicTraffic"`
	AllowInternetAccess *bool    `json:"allowInternetAccess"`
	AllowOut            []string `json:"allowOut"`
	DenyOut             []string `json:"denyOut"`
}

// VolumeMount is one request-level mount (camelCase only).
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly"`
}

// Resources is the create option "resources".
type Resources struct {
	CPUCount *int `json:"cpuCount"`
	MemoryMB *int `json:"memoryMB"`
}

// removedFields answers retired create fields with their replacement.
var removedFields = map[string]string{
	"timeoutMs":     "removed; the sandbox lifetime is `timeout` in seconds (only a command run's timeoutMs is in milliseconds)",
	"secure":        "removed; every sandbox is secured by the accessToken returned at create (send it as X-Access-Token); drop the field",
	"mcp":           "removed; MCP servers are no longer configured at create; drop the field and start them with exec",
	"volume_mounts": "renamed; use `volumeMounts` (camelCase)",
}

// Bounds of the create options.
const (
	DefaultTimeout = 300
	MaxTimeout     = 86400
	MaxCPU         = 16
	MinMemoryMB    = 64
	MaxMemoryMB    = 65536
	maxMetadata    = 64
	maxEnvName     = 256
	maxEnvValue    = 32 << 10
	maxEnvVars     = 512
	maxMountPath   = 1024
)

// reservedMounts are the sandbox paths a volume may not cover: the kernel's
// and the engine's (/proc, /sys, /dev and below them; the files the engine
// writes for networking), without which the sandbox cannot run.
var (
	reservedTrees = []string{"/proc", "/sys", "/dev"}
	reservedFiles = []string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"}
)

var (
	envName  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	metaKey  = regexp.MustCompile(`^[A-Za-z0-9_.\-/]{1,64}$`)
	template = regexp.MustCompile(`^[a-z0-9][a-z0-9_.\-]{0,63}$`)
	volName  = regexp.MustCompile(`^[a-z0-9][a-z0-9_.\-]{0,63}$`)
	hostname = regexp.MustCompile(`^(\*\.)?([a-zA-Z0-9-]{1,63}\.)*[a-zA-Z0-9-]{1,63}$`)
)

// validate checks the request and fills defaults; the error names the field.
func (req *CreateRequest) validate(minTimeout int) error {
	if req.TemplateID == "" {
		req.TemplateID = "base"
	}
	if !template.MatchString(req.TemplateID) {
		return httpx.Invalid("templateID", "must be a template id such as \"base\" (lowercase letters, digits, '.', '_', '-')")
	}
	if req.Timeout == nil {
		t := DefaultTimeout
		req.Timeout = &t
	}
	if err := checkTimeout("timeout", *req.Timeout, minTimeout); err != nil {
		return err
	}
	if err := checkEnv("envVars", req.EnvVars); err != nil {
		return err
	}
	if len(req.Metadata) > maxMetadata {
		return httpx.Invalid("metadata", fmt.Sprintf("at most %d entries", maxMetadata))
	}
	for k, v := range req.Metadata {
		if !metaKey.MatchString(k) {
			return httpx.Invalid("metadata."+k, "keys are 1-64 characters of letters, digits, '_', '.', '-', '/'")
		}
		if len(v) > 512 {
			return httpx.Invalid("metadata."+k, "values are at most 512 characters")
		}
		if strings.ContainsRune(v, 0) {
			return httpx.Invalid("metadata."+k, "must not contain NUL")
		}
	}
	if r := req.Resources; r != nil {
		if r.CPUCount != nil && (*r.CPUCount < 1 || *r.CPUCount > MaxCPU) {
			return httpx.Invalid("resources.cpuCount", fmt.Sprintf("must be between 1 and %d", MaxCPU))
		}
		if r.MemoryMB != nil && (*r.MemoryMB < MinMemoryMB || *r.MemoryMB > MaxMemoryMB) {
			return httpx.Invalid("resources.memoryMB", fmt.Sprintf("must be between %d and %d", MinMemoryMB, MaxMemoryMB))
		}
	}
	if n := req.Network; n != nil {
		for i, rule := range n.AllowOut {
			if !validEgress(rule) {
				return httpx.Invalid(fmt.Sprintf("network.allowOut.%d", i), "must be an IP address, a CIDR block or a host name")
			}
		}
		for i, rule := range n.DenyOut {
			if !validEgress(rule) {
				return httpx.Invalid(fmt.Sprintf("network.denyOut.%d", i), "must be an IP address, a CIDR block or a host name")
			}
		}
	}
	seen := map[string]bool{}
	for i, m := range req.VolumeMounts {
		field := fmt.Sprintf("volumeMounts.%d", i)
		if !volName.MatchString(m.Name) {
			return httpx.Invalid(field+".name", "must be a volume name (lowercase letters, digits, '.', '_', '-')")
		}
		if err := checkMountPath(field+".path", m.Path); err != nil {
			return err
		}
		if seen[m.Path] {
			return httpx.Invalid(field+".path", "is mounted twice")
		}
		seen[m.Path] = true
	}
	for i, a := range req.Command {
		if strings.ContainsRune(a, 0) {
			return httpx.Invalid(fmt.Sprintf("command.%d", i), "must not contain NUL")
		}
	}
	return nil
}

// checkEnv refuses what the engine would only refuse at start: names that
// are not variable names, NUL bytes, oversized names or values.
func checkEnv(field string, env map[string]string) error {
	if len(env) > maxEnvVars {
		return httpx.Invalid(field, fmt.Sprintf("at most %d variables", maxEnvVars))
	}
	for k, v := range env {
		name := strings.ToValidUTF8(strings.ReplaceAll(k, "\x00", `\0`), "?") // shown in the error
		if len(name) > 64 {
			name = name[:64] + "…"
		}
		switch {
		case len(k) > maxEnvName:
			return httpx.Invalid(field+"."+name, fmt.Sprintf("names are at most %d characters", maxEnvName))
		case !envName.MatchString(k):
			return httpx.Invalid(field+"."+name, "is not a valid environment variable name (letters, digits and '_', not starting with a digit)")
		case strings.ContainsRune(v, 0):
			return httpx.Invalid(field+"."+k, "must not contain NUL")
		case len(v) > maxEnvValue:
			return httpx.Invalid(field+"."+k, fmt.Sprintf("values are at most %d bytes", maxEnvValue))
		}
	}
	return nil
}

// checkMountPath accepts a clean absolute path that leaves the sandbox's
// system paths alone.
func checkMountPath(field, p string) error {
	switch {
	case strings.ContainsRune(p, 0):
		return httpx.Invalid(field, "must not contain NUL")
	case len(p) > maxMountPath:
		return httpx.Invalid(field, fmt.Sprintf("is at most %d characters", maxMountPath))
	case !path.IsAbs(p) || path.Clean(p) == "/":
		return httpx.Invalid(field, "must be an absolute path other than /")
	case path.Clean(p) != strings.TrimSuffix(p, "/") || strings.Contains(p, ":"):
		return httpx.Invalid(field, "must be a clean absolute path (no '.', '..', '//' or ':'), e.g. /data")
	}
	clean := path.Clean(p)
	for _, t := range reservedTrees {
		if clean == t || strings.HasPrefix(clean, t+"/") {
			return httpx.Invalid(field, fmt.Sprintf("must not be %s or under it: the sandbox needs it; mount elsewhere, e.g. /data", t))
		}
	}
	if slices.Contains(reservedFiles, clean) {
		return httpx.Invalid(field, fmt.Sprintf("must not be %s: the engine manages it", clean))
	}
	return nil
}

func checkTimeout(field string, v, minTimeout int) error {
	if v < minTimeout || v > MaxTimeout {
		return httpx.Invalid(field, fmt.Sprintf("must be between %d and %d seconds", minTimeout, MaxTimeout))
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

func (n *NetworkRequest) toProvider() provider.Network {
	if n == nil {
		return provider.Network{}
	}
	return provider.Network{AllowInternetAccess: n.AllowInternetAccess, AllowPublicTraffic: n.AllowPublicTraffic,
		AllowOut: n.AllowOut, DenyOut: n.DenyOut}
}
