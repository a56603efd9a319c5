package templates

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
)

// Names follow E2B's rules (its packages/shared/pkg/id): an alias is
// lowercase letters, digits, '-' and '_'; a tag also '.', and is never a
// UUID (build ids are); "name:tag" names a tag of a template, "name" its
// default tag. A namespace ("team/alias") is accepted and dropped: an org
// is its own namespace.
var (
	aliasPattern = regexp.MustCompile(`^[a-z0-9-_]+$`)
	tagPattern   = regexp.MustCompile(`^[a-z0-9-_.]+$`)
)

// Name is a parsed "alias[:tag]" (or "id[:tag]").
type Name struct {
	Ref string // the template's id or alias
	Tag string // "" when none was given (the default tag)
}

// TagOrDefault is the tag the name means.
func (n Name) TagOrDefault() string {
	if n.Tag == "" {
		return template.DefaultTag
	}
	return n.Tag
}

// ParseName parses "[namespace/]alias[:tag]", lowercased and trimmed.
// field names the field for errors.
func ParseName(field, s string) (Name, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	ref, tag, hasTag := strings.Cut(s, ":")
	if _, alias, ok := strings.Cut(ref, "/"); ok {
		ref = alias
	}
	if !aliasPattern.MatchString(ref) {
		return Name{}, domain.Invalid(field, fmt.Sprintf("invalid template name %q: use lowercase letters, digits, '-' and '_', optionally followed by ':tag'", s))
	}
	if hasTag {
		t, err := CleanTag(field, tag)
		if err != nil {
			return Name{}, err
		}
		if t != template.DefaultTag {
			return Name{Ref: ref, Tag: t}, nil
		}
	}
	return Name{Ref: ref}, nil
}

// CleanTag validates one tag.
func CleanTag(field, tag string) (string, error) {
	t := strings.ToLower(strings.TrimSpace(tag))
	if !tagPattern.MatchString(t) {
		return "", domain.Invalid(field, fmt.Sprintf("invalid tag %q: use lowercase letters, digits, '-', '_' and '.'", tag))
	}
	if _, err := uuid.Parse(t); err == nil {
		return "", domain.Invalid(field, fmt.Sprintf("invalid tag %q: a tag cannot be a UUID", tag))
	}
	return t, nil
}

// CleanTags validates tags and drops duplicates (sorted).
func CleanTags(field string, tags []string) ([]string, error) {
	seen := map[string]bool{}
	for _, tag := range tags {
		t, err := CleanTag(field, tag)
		if err != nil {
			return nil, err
		}
		seen[t] = true
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// IsBuildID reports whether s has the form of a build id (a UUID).
func IsBuildID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil
}
