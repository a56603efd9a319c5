package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// printJSON writes v as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.io.Out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// withoutEmpty renders v as a JSON object without the named keys when
// they are empty strings (secrets the API showed only once, absent here).
func withoutEmpty(v any, keys ...string) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range keys {
		if m[k] == "" {
			delete(m, k)
		}
	}
	return m
}

func sandboxJSON(sb *client.Sandbox) map[string]any { return withoutEmpty(sb, "accessToken") }

// printSecret prints a secret the API shows once, and where it is kept.
func (a *app) printSecret(label, token, kept, usage string) {
	if token == "" {
		return
	}
	fmt.Fprintf(a.io.Out, "%s: %s\n", label, token)
	if kept != "" {
		fmt.Fprintf(a.io.Out, "  kept in %s (mode 0600); %s.\n", kept, usage)
	}
}

// table writes rows under a header, aligned for people.
func (a *app) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(a.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fields writes "key: value" lines, aligned, skipping empty values.
func (a *app) fields(kv ...string) error {
	tw := tabwriter.NewWriter(a.io.Out, 0, 4, 1, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s\n", kv[i], kv[i+1])
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sortedKeys returns m's keys in order, so output is stable.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func kvList(m map[string]string) string {
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// printEndpoints writes one line per service: name and URL.
func printEndpoints(w io.Writer, eps client.Endpoints) {
	names := sortedKeys(eps)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", n, eps[n].URL)
	}
	_ = tw.Flush()
}

// positive rejects a flag that was given but is not positive.
func positive(cmd *cobra.Command, name string, v int64) error {
	if cmd.Flags().Changed(name) && v <= 0 {
		return usageErr("--%s must be a positive number, not %d", name, v)
	}
	return nil
}

// optional is &v for a positive v, else nil (a flag left unset).
// optionalInt is optional for the API types' int fields.
func optionalInt(v int64) *int {
	if v > 0 {
		n := int(v)
		return &n
	}
	return nil
}

// parsePairs reads repeated K=V flag values.
func parsePairs(flag string, vals []string) (map[string]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usageErr("--%s %q: expected KEY=VALUE", flag, v)
		}
		out[k] = val
	}
	return out, nil
}

// elapsed renders a duration for state lines: 0.4s, 12.3s, 2m5s.
func elapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Truncate(time.Second).String()
}

// progress is the one-line "still waiting" indicator, drawn on stderr only
// when stderr is a terminal, and cleared before any other line is printed.
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	on     bool
	label  string
	start  time.Time
	drawn  bool
	stopCh chan struct{}
	done   chan struct{}
}

func (a *app) newProgress(start time.Time) *progress {
	p := &progress{w: a.io.Err, on: a.io.ErrIsTerminal, start: start}
	if p.on {
		p.stopCh, p.done = make(chan struct{}), make(chan struct{})
		go p.loop()
	}
	return p
}

func (p *progress) loop() {
	defer close(p.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stopCh:
			return
		case <-t.C:
			p.mu.Lock()
			if p.label != "" {
				fmt.Fprintf(p.w, "\r\033[K%s… %s", p.label, elapsed(time.Since(p.start)))
				p.drawn = true
			}
			p.mu.Unlock()
		}
	}
}

// set changes what is being waited for.
func (p *progress) set(label string) {
	p.mu.Lock()
	p.label = label
	p.mu.Unlock()
}

// println prints a line to w, clearing the progress line first.
func (p *progress) println(w io.Writer, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintln(w, line)
}

func (p *progress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

func (p *progress) stop() {
	if !p.on {
		return
	}
	close(p.stopCh)
	<-p.done
	p.mu.Lock()
	p.clear()
	p.mu.Unlock()
}
