package sandbox

import (
	"fmt"
	"slices"
	"strings"
)

// egressPrefix starts the diagnostic's egress line.
const egressPrefix = "egress: "

// egressWords say why packets were dropped, in the order shown; the keys
// are the reasons of the provider's drop counters.
var egressWords = []struct{ reason, words string }{
	{"policy", "by policy (allowOut/denyOut)"},
	{"link_local", "to link-local (cloud metadata)"},
	{"host", "to the host"},
	{"private", "to private ranges"},
	{"offline", "leaving an offline sandbox"},
}

// EgressLine is the diagnostic line of a sandbox whose egress the host's
// rules dropped, e.g. "egress: 15 packets dropped: 12 by policy
// (allowOut/denyOut), 3 to link-local (cloud metadata)"; "" when nothing
// was dropped.
func EgressLine(drops map[string]uint64) string {
	var total uint64
	var parts []string
	known := map[string]bool{}
	for _, w := range egressWords {
		known[w.reason] = true
		if n := drops[w.reason]; n > 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%d %s", n, w.words))
		}
	}
	var other []string
	for r, n := range drops {
		if !known[r] && n > 0 {
			other = append(other, r)
		}
	}
	slices.Sort(other)
	for _, r := range other {
		total += drops[r]
		parts = append(parts, fmt.Sprintf("%d (%s)", drops[r], r))
	}
	if total == 0 {
		return ""
	}
	noun := "packets"
	if total == 1 {
		noun = "packet"
	}
	return fmt.Sprintf("%s%d %s dropped: %s", egressPrefix, total, noun, strings.Join(parts, ", "))
}

// EgressLineOf returns the egress line of a diagnostic ("" when none).
func EgressLineOf(diagnostic string) string {
	for _, l := range strings.Split(diagnostic, "\n") {
		if strings.HasPrefix(l, egressPrefix) {
			return l
		}
	}
	return ""
}

// WithEgress replaces the egress line of diagnostic with line (removing it
// when line is ""), keeping every other line: a failure's reason and the
// sandbox's egress violations are shown together.
func WithEgress(diagnostic, line string) string {
	var keep []string
	for _, l := range strings.Split(diagnostic, "\n") {
		if l != "" && !strings.HasPrefix(l, egressPrefix) {
			keep = append(keep, l)
		}
	}
	if line != "" {
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}
