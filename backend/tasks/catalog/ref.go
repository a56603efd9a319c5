package catalog

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Ref names a task: [org/]name[@version]. Version is an exact semantic
// version ("1.2.0") or a constraint ("^1", "~1.2", ">=1.0 <2"); empty selects
// the highest version.
type Ref struct {
	Org     string
	Name    string
	Version string
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	orgRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// ParseRef parses s as [org/]name[@version].
func ParseRef(s string) (Ref, error) {
	var r Ref
	if s == "" {
		return r, fmt.Errorf("is empty; use [org/]name[@version], e.g. dreadnode/web-login@1.0.0")
	}
	if len(s) > 200 {
		return r, fmt.Errorf("is longer than 200 characters")
	}
	rest := s
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		r.Version = rest[i+1:]
		rest = rest[:i]
		if r.Version == "" {
			return r, fmt.Errorf("%q has an empty version after '@'", s)
		}
		if _, err := versionMatcher(r.Version); err != nil {
			return r, fmt.Errorf("%q: version %q is neither a semantic version nor a version constraint", s, r.Version)
		}
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		r.Org = rest[:i]
		rest = rest[i+1:]
		if !orgRE.MatchString(r.Org) {
			return r, fmt.Errorf("%q: organization %q is not a valid organization name", s, r.Org)
		}
	}
	r.Name = rest
	if !nameRE.MatchString(r.Name) {
		return r, fmt.Errorf("%q is not [org/]name[@version]: the name must match [a-z0-9][a-z0-9-]*", s)
	}
	return r, nil
}

func (r Ref) String() string {
	s := r.Name
	if r.Org != "" {
		s = r.Org + "/" + s
	}
	if r.Version != "" {
		s += "@" + r.Version
	}
	return s
}

// versionMatcher turns a ref's version into a predicate: exact equality for a
// full semantic version, constraint satisfaction otherwise.
func versionMatcher(v string) (func(*semver.Version) bool, error) {
	if exact, err := semver.StrictNewVersion(strings.TrimPrefix(v, "v")); err == nil {
		return exact.Equal, nil
	}
	c, err := semver.NewConstraint(v)
	if err != nil {
		return nil, err
	}
	return c.Check, nil
}
