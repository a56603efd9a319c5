// Package catalog loads the task catalog: directories holding a manifest
// (task.yaml) and a Docker Compose file with its build contexts. Compose files
// are parsed with compose-spec/compose-go, interpolated with the task's inputs.
package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

// ManifestFile is the manifest's file name inside a task directory.
const ManifestFile = "task.yaml"

// composeNames are tried in order when the manifest does not name the file.
var composeNames = []string{"compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"}

// Input is one input a task accepts. Inputs are strings; they become compose
// interpolation variables (under their own name and upper-cased) and
// instruction placeholders ({{name}}).
//
// A secret input (the flag an agent must find, a generated password) reaches
// the task's services but never a response, a log or the instruction: an
// agent holding the org key could otherwise read the answer instead of
// earning it. Scores compare against it (POST …/check) instead.
type Input struct {
	Default     string `yaml:"default" json:"default"`
	Description string `yaml:"description" json:"description"`
	Required    bool   `yaml:"required" json:"required"`
	Secret      bool   `yaml:"secret" json:"secret"`
}

// Manifest is task.yaml.
type Manifest struct {
	Name        string `yaml:"name"`
	Org         string `yaml:"org"`
	Version     string `yaml:"version"`
	Description string `yaml:"description"`
	Instruction string `yaml:"instruction"`
	// Expose maps a service to the container port published on 127.0.0.1.
	Expose map[string]int `yaml:"expose"`
	// ExecuteService is where POST /execute runs commands (defaults to the
	// only service when there is one).
	ExecuteService string            `yaml:"execute_service"`
	Inputs         map[string]Input  `yaml:"inputs"`
	E2BTemplates   map[string]string `yaml:"e2b_templates"`
	// Compose names the compose file (default: compose.yaml and friends).
	Compose string `yaml:"compose"`
	// Runtime names the engine runtime every service runs on (e.g. runsc
	// for gVisor, kata); "" is the engine's default. An environment of a
	// task whose runtime the engine lacks is refused at create.
	Runtime string `yaml:"runtime"`
	// Network says what the services may reach beyond the environment's
	// own network (by default nothing: they reach each other only).
	Network Network `yaml:"network"`
}

// Network is task.yaml's network: the egress the task declares, named
// like a sandbox's network fields.
type Network struct {
	// AllowOut lists the IP addresses and CIDR blocks the services may
	// reach beyond the environment's network ("0.0.0.0/0" and "::/0": the
	// internet). The host's baseline still holds: link-local, the host's
	// own addresses and private ranges the operator did not allow
	// (DREADNODE_EGRESS_ALLOW_PRIVATE) stay unreachable.
	AllowOut []string `yaml:"allowOut"`
}

// MaxAllowOut bounds network.allowOut.
const MaxAllowOut = 256

// check validates network.allowOut, canonicalising each entry.
func (n *Network) check() error {
	if len(n.AllowOut) > MaxAllowOut {
		return fmt.Errorf("%s: network.allowOut has %d entries, at most %d", ManifestFile, len(n.AllowOut), MaxAllowOut)
	}
	for i, r := range n.AllowOut {
		s := strings.TrimSpace(r)
		if p, err := netip.ParsePrefix(s); err == nil {
			n.AllowOut[i] = p.Masked().String()
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
			n.AllowOut[i] = netip.PrefixFrom(a, a.BitLen()).String()
			continue
		}
		return fmt.Errorf("%s: network.allowOut.%d: %q is not an IP address or a CIDR block (a task environment reaches addresses, not host names)", ManifestFile, i, r)
	}
	return nil
}

// Service describes one compose service of a task.
type Service struct {
	Name string
	// Port is the exposed container port (0 when not exposed).
	Port int
	// Build is true when the image is built from the task's sources.
	Build bool
	// Healthcheck is true when compose declares a healthcheck.
	Healthcheck bool
	DependsOn   []string
}

// Task is one loaded catalog entry.
type Task struct {
	Manifest
	SemVer      *semver.Version
	Dir         string // absolute task directory
	ComposeFile string // absolute compose file
	Services    []Service
}

// Ref is the task's canonical reference, org/name@version.
func (t *Task) Ref() string { return t.Org + "/" + t.Name + "@" + t.Version }

var (
	inputRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	runtimeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// LoadTask reads and validates the task in dir. defaultOrg is used when the
// manifest names none.
func LoadTask(ctx context.Context, dir, defaultOrg string) (*Task, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestFile, err)
	}
	t := &Task{Manifest: m, Dir: dir}
	if t.Org == "" {
		t.Org = defaultOrg
	}
	if !nameRE.MatchString(t.Name) {
		return nil, fmt.Errorf("%s: name %q must match [a-z0-9][a-z0-9-]*", ManifestFile, t.Name)
	}
	if !orgRE.MatchString(t.Org) {
		return nil, fmt.Errorf("%s: org %q is not a valid organization name", ManifestFile, t.Org)
	}
	if t.SemVer, err = semver.StrictNewVersion(t.Version); err != nil {
		return nil, fmt.Errorf("%s: version %q is not a semantic version (MAJOR.MINOR.PATCH): %v", ManifestFile, t.Version, err)
	}
	if t.Runtime != "" && !runtimeRE.MatchString(t.Runtime) {
		return nil, fmt.Errorf("%s: runtime %q is not a runtime name (letters, digits, '.', '_', '-')", ManifestFile, t.Runtime)
	}
	if err := t.Network.check(); err != nil {
		return nil, err
	}
	for name, in := range t.Inputs {
		if !inputRE.MatchString(name) {
			return nil, fmt.Errorf("%s: input %q must match [A-Za-z_][A-Za-z0-9_]*", ManifestFile, name)
		}
		if in.Secret && slices.ContainsFunc(placeholderRE.FindAllStringSubmatch(t.Instruction, -1), func(m []string) bool { return m[1] == name }) {
			return nil, fmt.Errorf("%s: the instruction shows {{%s}}, a secret input: secret inputs never appear in responses; "+
				"remove the placeholder or the input's secret flag", ManifestFile, name)
		}
	}
	if t.ComposeFile, err = findCompose(dir, m.Compose); err != nil {
		return nil, err
	}
	// Load once with the defaults: validates the compose file and the
	// manifest's references to its services.
	defaults := map[string]string{}
	for name, in := range t.Inputs {
		defaults[name] = in.Default
	}
	p, err := t.Project(ctx, "dn-validate-"+t.Name, defaults)
	if err != nil {
		return nil, err
	}
	if len(p.Services) == 0 {
		return nil, fmt.Errorf("%s: no services", filepath.Base(t.ComposeFile))
	}
	for svc, port := range t.Expose {
		if _, ok := p.Services[svc]; !ok {
			return nil, fmt.Errorf("%s: expose names service %q, which %s does not define", ManifestFile, svc, filepath.Base(t.ComposeFile))
		}
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("%s: expose.%s: port %d is not in 1..65535", ManifestFile, svc, port)
		}
	}
	for svc := range t.E2BTemplates {
		if _, ok := p.Services[svc]; !ok {
			return nil, fmt.Errorf("%s: e2b_templates names service %q, which %s does not define", ManifestFile, svc, filepath.Base(t.ComposeFile))
		}
	}
	if t.ExecuteService == "" && len(p.Services) == 1 {
		for name := range p.Services {
			t.ExecuteService = name
		}
	}
	if t.ExecuteService == "" {
		return nil, fmt.Errorf("%s: execute_service is required when the task has more than one service", ManifestFile)
	}
	if _, ok := p.Services[t.ExecuteService]; !ok {
		return nil, fmt.Errorf("%s: execute_service %q is not a service of %s", ManifestFile, t.ExecuteService, filepath.Base(t.ComposeFile))
	}
	for name, s := range p.Services {
		svc := Service{Name: name, Port: t.Expose[name], Build: s.Build != nil,
			Healthcheck: s.HealthCheck != nil && !s.HealthCheck.Disable}
		for dep := range s.DependsOn {
			svc.DependsOn = append(svc.DependsOn, dep)
		}
		sort.Strings(svc.DependsOn)
		t.Services = append(t.Services, svc)
	}
	sort.Slice(t.Services, func(i, j int) bool { return t.Services[i].Name < t.Services[j].Name })
	return t, nil
}

func findCompose(dir, named string) (string, error) {
	if named != "" {
		p := filepath.Join(dir, filepath.Clean("/"+named))
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: compose file %q: %w", ManifestFile, named, err)
		}
		return p, nil
	}
	for _, n := range composeNames {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no compose file (%s) beside %s", strings.Join(composeNames, ", "), ManifestFile)
}

// Variables returns the compose interpolation variables for inputs: each
// input under its own name and upper-cased (an input declared in upper case
// wins over an upper-cased one).
func Variables(inputs map[string]string) map[string]string {
	vars := make(map[string]string, 2*len(inputs))
	for k, v := range inputs {
		if u := strings.ToUpper(k); u != k {
			if _, declared := inputs[u]; !declared {
				vars[u] = v
			}
		}
		vars[k] = v
	}
	return vars
}

// Project loads the task's compose file with compose-go under projectName,
// interpolating inputs (which must already include the defaults), and checks
// it only uses what the task runner supports.
func (t *Task) Project(ctx context.Context, projectName string, inputs map[string]string) (*types.Project, error) {
	details := types.ConfigDetails{
		WorkingDir:  t.Dir,
		ConfigFiles: []types.ConfigFile{{Filename: t.ComposeFile}},
		Environment: Variables(inputs),
	}
	p, err := loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName(loader.NormalizeProjectName(projectName), true)
		o.ResolvePaths = true
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(t.ComposeFile), err)
	}
	if err := checkSupported(p); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(t.ComposeFile), err)
	}
	if err := checkBuildPaths(p, t.Dir); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(t.ComposeFile), err)
	}
	return p, nil
}

// checkSupported rejects compose features a task environment does not
// honour: anything reaching outside the environment's private network and
// containers (host mounts, host namespaces, devices, privileges) and objects
// the runner does not create (volumes, secrets, configs, extra networks).
// Host `ports` are ignored: the manifest's expose publishes on 127.0.0.1.
func checkSupported(p *types.Project) error {
	var errs []error
	bad := func(svc, what string) {
		errs = append(errs, fmt.Errorf("service %q: %s is not supported in a task", svc, what))
	}
	if len(p.Jobs) > 0 {
		errs = append(errs, errors.New("jobs are not supported in a task"))
	}
	for _, n := range []struct {
		what string
		n    int
	}{{"volumes", len(p.Volumes)}, {"secrets", len(p.Secrets)}, {"configs", len(p.Configs)}, {"models", len(p.Models)}} {
		if n.n > 0 {
			errs = append(errs, fmt.Errorf("top-level %s are not supported in a task", n.what))
		}
	}
	for name := range p.Networks {
		if name != "default" {
			errs = append(errs, fmt.Errorf("network %q: only the default network is supported (each environment gets its own private network)", name))
		}
	}
	names := make([]string, 0, len(p.Services))
	for name := range p.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := p.Services[name]
		if s.Build == nil && s.Image == "" {
			bad(name, "a service without build or image")
		}
		if s.Privileged {
			bad(name, "privileged")
		}
		if s.NetworkMode != "" {
			bad(name, "network_mode")
		}
		if s.Pid != "" || s.Ipc != "" || s.UserNSMode != "" || s.Uts != "" || s.Cgroup != "" {
			bad(name, "sharing host namespaces (pid, ipc, userns_mode, uts, cgroup)")
		}
		if len(s.Volumes) > 0 || len(s.VolumesFrom) > 0 {
			bad(name, "volumes")
		}
		if len(s.Devices) > 0 || len(s.DeviceCgroupRules) > 0 || len(s.Gpus) > 0 {
			bad(name, "devices")
		}
		for _, c := range s.CapAdd {
			// Allowed ones stay inside the environment's own network.
			if err := hardening.CheckCapAdd(c); err != nil {
				errs = append(errs, fmt.Errorf("service %q: cap_add: %w", name, err))
			}
		}
		if len(s.SecurityOpt) > 0 {
			bad(name, "security_opt (every service runs with no-new-privileges and the engine's default seccomp and AppArmor profiles; unconfined is never allowed)")
		}
		if len(s.Secrets) > 0 || len(s.Configs) > 0 {
			bad(name, "secrets and configs")
		}
		if s.CgroupParent != "" {
			bad(name, "cgroup_parent")
		}
		if s.Runtime != "" {
			bad(name, "runtime (set runtime in task.yaml: it applies to every service)")
		}
		if s.UseAPISocket {
			bad(name, "use_api_socket")
		}
		if len(s.PreStart) > 0 || len(s.PostStart) > 0 || len(s.PreStop) > 0 {
			bad(name, "lifecycle hooks")
		}
		if s.Scale != nil && *s.Scale != 1 {
			bad(name, "scale other than 1")
		}
		if s.Deploy != nil && s.Deploy.Replicas != nil && *s.Deploy.Replicas != 1 {
			bad(name, "replicas other than 1")
		}
		if s.Build != nil {
			if len(s.Build.AdditionalContexts) > 0 || len(s.Build.Secrets) > 0 || len(s.Build.SSH) > 0 {
				bad(name, "build.additional_contexts, build.secrets and build.ssh")
			}
			if s.Build.Privileged || len(s.Build.Entitlements) > 0 {
				bad(name, "privileged builds")
			}
			if strings.Contains(s.Build.Context, "://") {
				bad(name, "a remote build context")
			}
		}
		for netName := range s.Networks {
			if netName != "default" {
				bad(name, fmt.Sprintf("network %q", netName))
			}
		}
		for dep, d := range s.DependsOn {
			if _, ok := p.Services[dep]; !ok && d.Required {
				bad(name, fmt.Sprintf("depends_on %q (not a service of the task)", dep))
			}
			if d.Condition == types.ServiceConditionHealthy {
				if t, ok := p.Services[dep]; ok && (t.HealthCheck == nil || t.HealthCheck.Disable) {
					bad(name, fmt.Sprintf("depends_on %q with condition service_healthy, but %q has no healthcheck", dep, dep))
				}
			}
		}
	}
	// A depends_on cycle never gets here: the loader's consistency check
	// (compose-go's graph.CheckCycle) refuses the project.
	return errors.Join(errs...)
}

// InputError names the input a request got wrong.
type InputError struct {
	Input string
	Msg   string
}

func (e *InputError) Error() string { return e.Input + ": " + e.Msg }

// MaxInputLen bounds one input value.
const MaxInputLen = 4096

// ResolveInputs checks given against the task's declared inputs and merges
// the defaults in.
func (t *Task) ResolveInputs(given map[string]string) (map[string]string, error) {
	names := make([]string, 0, len(given))
	for k := range given {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if _, ok := t.Inputs[k]; !ok {
			return nil, &InputError{Input: k, Msg: fmt.Sprintf("task %s accepts no input %q (allowed: %s)", t.Ref(), k, t.allowed())}
		}
		if len(given[k]) > MaxInputLen {
			return nil, &InputError{Input: k, Msg: fmt.Sprintf("longer than %d bytes", MaxInputLen)}
		}
		if strings.ContainsRune(given[k], 0) {
			return nil, &InputError{Input: k, Msg: "contains a NUL byte"}
		}
	}
	out := make(map[string]string, len(t.Inputs))
	for k, in := range t.Inputs {
		v, ok := given[k]
		if !ok {
			if in.Required {
				return nil, &InputError{Input: k, Msg: fmt.Sprintf("required by task %s", t.Ref())}
			}
			v = in.Default
		}
		out[k] = v
	}
	return out, nil
}

func (t *Task) allowed() string {
	if len(t.Inputs) == 0 {
		return "none"
	}
	names := make([]string, 0, len(t.Inputs))
	for k := range t.Inputs {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

var placeholderRE = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}`)

// SecretInput reports whether the task declares name as a secret input.
func (t *Task) SecretInput(name string) bool { return t.Inputs[name].Secret }

// Render fills {{name}} placeholders of text from vars; unknown placeholders
// are left as they are.
func Render(text string, vars map[string]string) string {
	return placeholderRE.ReplaceAllStringFunc(text, func(m string) string {
		name := placeholderRE.FindStringSubmatch(m)[1]
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}
