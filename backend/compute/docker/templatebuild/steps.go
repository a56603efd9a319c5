package templatebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Step types (E2B's).
const (
	stepRUN     = "RUN"
	stepENV     = "ENV"
	stepWORKDIR = "WORKDIR"
	stepUSER    = "USER"
	stepCOPY    = "COPY"
)

// maxSteps bounds one build's steps (each may commit a layer; the engine
// refuses images of more than 127 layers anyway).
const maxSteps = 100

// Defaults of a request's zero fields.
const (
	DefaultCPUCount   = 2
	DefaultMemoryMB   = 1024
	DefaultPids       = 1024
	DefaultStepTime   = 10 * time.Minute
	DefaultBuildTime  = 30 * time.Minute
	DefaultReadyTime  = 2 * time.Minute
	DefaultLogBytes   = 1 << 20
	DefaultFilesBytes = 1 << 30
)

var (
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	userName  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,63})?$`)
	filesHash = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	refPart   = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*$`)
	tagPart   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// invalid is a 400 naming the field.
func invalid(step int, field, format string, a ...any) *compute.TemplateBuildError {
	return &compute.TemplateBuildError{Kind: compute.KindInvalid, Step: step, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// normalize fills the request's defaults and checks it, before anything runs.
func normalize(req *compute.TemplateBuild) error {
	if (req.FromImage == "") == (req.FromTemplate == "") {
		return invalid(0, "fromImage", "give exactly one of fromImage and fromTemplate")
	}
	if req.CPUCount < 0 || req.MemoryMB < 0 {
		return invalid(0, "cpuCount", "cpuCount and memoryMB must be positive")
	}
	if req.CPUCount == 0 {
		req.CPUCount = DefaultCPUCount
	}
	if req.MemoryMB == 0 {
		req.MemoryMB = DefaultMemoryMB
	}
	l := &req.Limits
	l.Pids = orDefault(l.Pids, DefaultPids)
	l.StepTime = orDefault(l.StepTime, DefaultStepTime)
	l.BuildTime = orDefault(l.BuildTime, DefaultBuildTime)
	l.ReadyTime = orDefault(l.ReadyTime, DefaultReadyTime)
	l.LogBytes = orDefault(l.LogBytes, DefaultLogBytes)
	l.FilesBytes = orDefault(l.FilesBytes, DefaultFilesBytes)
	if len(req.Steps) > maxSteps {
		return invalid(0, "steps", "%d steps; a template has at most %d (join RUN commands with &&)", len(req.Steps), maxSteps)
	}
	for i := range req.Steps {
		if err := checkStep(i, &req.Steps[i], req.Files != nil); err != nil {
			return err
		}
	}
	return nil
}

func orDefault[T int | int64 | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// checkStep validates step i (0-based) and upper-cases its type.
func checkStep(i int, s *compute.TemplateStep, haveFiles bool) error {
	n := i + 1
	field := func(f string) string { return fmt.Sprintf("steps.%d.%s", i, f) }
	s.Type = strings.ToUpper(strings.TrimSpace(s.Type))
	args := s.Args
	switch s.Type {
	case stepRUN:
		if len(args) < 1 || len(args) > 2 || strings.TrimSpace(args[0]) == "" {
			return invalid(n, field("args"), "RUN takes [command] or [command, user]")
		}
		if len(args) == 2 && !userName.MatchString(args[1]) {
			return invalid(n, field("args"), "RUN's user %q is not a user name or uid", args[1])
		}
	case stepENV:
		if len(args) == 0 || len(args)%2 != 0 {
			return invalid(n, field("args"), "ENV takes [name, value, name, value…]")
		}
		for j := 0; j < len(args); j += 2 {
			if !envName.MatchString(args[j]) {
				return invalid(n, field("args"), "%q is not an environment variable name (letters, digits and _, not starting with a digit)", args[j])
			}
		}
	case stepWORKDIR:
		if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
			return invalid(n, field("args"), "WORKDIR takes [path]")
		}
	case stepUSER:
		if len(args) != 1 || !userName.MatchString(args[0]) {
			return invalid(n, field("args"), "USER takes [user] (a user name or uid, optionally :group)")
		}
	case stepCOPY:
		if len(args) < 2 || len(args) > 4 || args[0] == "" || args[1] == "" {
			return invalid(n, field("args"), "COPY takes [src, dest], [src, dest, user] or [src, dest, user, mode]")
		}
		if len(args) >= 3 && args[2] != "" && !userName.MatchString(args[2]) {
			return invalid(n, field("args"), "COPY's user %q is not a user name or uid", args[2])
		}
		if len(args) == 4 && args[3] != "" {
			if m, err := strconv.ParseUint(args[3], 8, 32); err != nil || m > 0o7777 {
				return invalid(n, field("args"), "COPY's mode %q is not an octal file mode (e.g. 0644)", args[3])
			}
		}
		if !filesHash.MatchString(s.FilesHash) {
			return invalid(n, field("filesHash"), "COPY needs the hash of its uploaded files")
		}
		if !haveFiles {
			return invalid(n, field("filesHash"), "this build has no uploaded files to copy from")
		}
	case "":
		return invalid(n, field("type"), "a step needs a type: RUN, ENV, WORKDIR, USER or COPY")
	default:
		return invalid(n, field("type"), "unknown step type %q (RUN, ENV, WORKDIR, USER or COPY)", s.Type)
	}
	return nil
}

// makesLayer says whether a step runs a container (RUN, COPY); ENV,
// WORKDIR and USER only change the image's configuration.
func makesLayer(s compute.TemplateStep) bool { return s.Type == stepRUN || s.Type == stepCOPY }

// describe is a step as the log shows it: "ENV ENV_VAR Hello, World!".
func describe(s compute.TemplateStep) string {
	return strings.TrimSpace(s.Type + " " + strings.Join(s.Args, " "))
}

// state is the image configuration the steps build up.
type state struct {
	Env  []string // KEY=value, in order
	Dir  string
	User string
}

func (s *state) lookup(k string) (string, bool) {
	for i := len(s.Env) - 1; i >= 0; i-- {
		if name, v, _ := strings.Cut(s.Env[i], "="); name == k {
			return v, true
		}
	}
	return "", false
}

func (s *state) set(k, v string) {
	for i, kv := range s.Env {
		if name, _, _ := strings.Cut(kv, "="); name == k {
			s.Env[i] = k + "=" + v
			return
		}
	}
	s.Env = append(s.Env, k+"="+v)
}

// apply folds a configuration step (ENV, WORKDIR, USER) into s.
func (s *state) apply(step compute.TemplateStep) {
	switch step.Type {
	case stepENV:
		vals := make([]string, 0, len(step.Args)/2)
		for j := 0; j < len(step.Args); j += 2 {
			vals = append(vals, expand(step.Args[j+1], s.lookup)) // from the env before the step, as a Dockerfile
		}
		for j := 0; j < len(step.Args); j += 2 {
			s.set(step.Args[j], vals[j/2])
		}
	case stepWORKDIR:
		s.Dir = s.resolve(expand(step.Args[0], s.lookup))
	case stepUSER:
		s.User = step.Args[0]
	}
}

// resolve makes p absolute against the current directory.
func (s *state) resolve(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join("/", s.Dir, p)
}

// expand replaces $NAME and ${NAME} with their values (empty when unset),
// as a Dockerfile's ENV does; nothing else is interpreted: no command
// substitution, no quotes, backslashes kept (only \$ escapes a dollar).
func expand(v string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' && i+1 < len(v) && v[i+1] == '$':
			b.WriteByte('$')
			i++
		case c == '$' && i+1 < len(v) && v[i+1] == '{':
			end := strings.IndexByte(v[i+2:], '}')
			if end < 0 || !envName.MatchString(v[i+2:i+2+end]) {
				b.WriteByte(c)
				continue
			}
			val, _ := lookup(v[i+2 : i+2+end])
			b.WriteString(val)
			i += 2 + end
		case c == '$' && i+1 < len(v) && (v[i+1] == '_' || isLetter(v[i+1])):
			j := i + 1
			for j < len(v) && (v[j] == '_' || isLetter(v[j]) || (v[j] >= '0' && v[j] <= '9')) {
				j++
			}
			val, _ := lookup(v[i+1 : j])
			b.WriteString(val)
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// cacheKey is the key of the image made by steps on parent (with extra
// for the final image's start command).
func cacheKey(parentID string, steps []compute.TemplateStep, extra string) string {
	type canon struct {
		Type      string   `json:"t"`
		Args      []string `json:"a"`
		FilesHash string   `json:"f,omitempty"`
	}
	cs := make([]canon, len(steps))
	for i, s := range steps {
		cs[i] = canon{s.Type, s.Args, s.FilesHash}
	}
	b, _ := json.Marshal(struct {
		V      int     `json:"v"`
		Parent string  `json:"p"`
		Steps  []canon `json:"s"`
		Extra  string  `json:"x,omitempty"`
	}{1, parentID, cs, extra})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Ref is the image reference of a template's build.
func Ref(templateID, buildID string) string {
	repo := strings.ToLower(templateID)
	if !refPart.MatchString(repo) || len(repo) > 128 {
		sum := sha256.Sum256([]byte(templateID))
		repo = "h" + hex.EncodeToString(sum[:8])
	}
	tag := buildID
	if !tagPart.MatchString(tag) {
		sum := sha256.Sum256([]byte(buildID))
		tag = "h" + hex.EncodeToString(sum[:8])
	}
	return RefRepo + "/" + repo + ":" + tag
}
