package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// Template is a template sandboxes can be created from (the document's).
type Template = apitypes.Template

// Template build shapes (API.md §15): the request, its 202 answer, a build
// with its log, and one of the org's templates as GET /templates lists it.
type (
	TemplateBuildRequest  = apitypes.TemplateBuildRequest
	TemplateStep          = apitypes.TemplateStep
	TemplateBuildAccepted = apitypes.TemplateBuildAccepted
	TemplateBuild         = apitypes.TemplateBuild
	TemplateBuildLogEntry = apitypes.TemplateBuildLogEntry
	TemplateInfo          = apitypes.TemplateInfo
)

// Build statuses (TemplateBuild.status).
const (
	BuildWaiting  = string(apitypes.TemplateBuildStatusWaiting)
	BuildBuilding = string(apitypes.TemplateBuildStatusBuilding)
	BuildReady    = string(apitypes.TemplateBuildStatusReady)
	BuildError    = string(apitypes.TemplateBuildStatusError)
)

// BuildFinal reports whether a build status is final (ready or error).
func BuildFinal(status string) bool { return status == BuildReady || status == BuildError }

func templatePath(id string, rest ...string) string {
	p := "/templates/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// GetTemplate returns a template (GET /templates/{templateID}); an unknown
// template is a 404 whose detail lists the available ones.
func (c *Client) GetTemplate(ctx context.Context, id string) (*Template, error) {
	var out Template
	if err := c.do(ctx, request{method: http.MethodGet, path: templatePath(id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// BuildTemplate requests a template build (POST /templates): the answer
// (202) carries the template's id and the waiting build. The request is not
// retried (the API takes no idempotency key here, and a repeated request
// would be a second build).
func (c *Client) BuildTemplate(ctx context.Context, in TemplateBuildRequest) (*TemplateBuildAccepted, error) {
	var out TemplateBuildAccepted
	if err := c.do(ctx, request{method: http.MethodPost, path: "/templates", body: in, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTemplates lists the org's templates and snapshots, newest first (all
// pages); kind "" is every kind, else "build" or "snapshot".
func (c *Client) ListTemplates(ctx context.Context, kind string) ([]TemplateInfo, error) {
	var all []TemplateInfo
	cursor := ""
	for page := 0; ; page++ {
		q := url.Values{"limit": {"1000"}}
		if kind != "" {
			q.Set("kind", kind)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var out apitypes.TemplateList
		if err := c.do(ctx, request{method: http.MethodGet, path: "/templates", query: q, out: &out}); err != nil {
			return nil, err
		}
		all = append(all, out.Items...)
		if out.NextCursor == "" || out.NextCursor == cursor {
			return all, nil
		}
		if page > 10000 {
			return nil, errors.New("GET /templates: the server kept answering further pages; giving up")
		}
		cursor = out.NextCursor
	}
}

// FindTemplate returns the org's template whose id or name is ref (a
// ":tag" is ignored), from the list; a 404 APIError when none is.
func (c *Client) FindTemplate(ctx context.Context, ref string) (*TemplateInfo, error) {
	name, _, _ := strings.Cut(ref, ":")
	all, err := c.ListTemplates(ctx, "")
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].TemplateID == name {
			return &all[i], nil
		}
		for _, n := range all[i].Names {
			if n == name {
				return &all[i], nil
			}
		}
	}
	return nil, &APIError{Method: http.MethodGet, Path: "/templates", StatusCode: http.StatusNotFound, Body: fmt.Sprintf("template %q is not one of the org's templates", ref)}
}

// DeleteTemplate deletes one of the org's templates (or snapshots) with its
// builds' images (DELETE /templates/{templateID}).
func (c *Client) DeleteTemplate(ctx context.Context, id string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: templatePath(id)})
}

// ListTemplateBuilds lists a template's builds, newest first (without logs).
func (c *Client) ListTemplateBuilds(ctx context.Context, id string) ([]TemplateBuild, error) {
	var out apitypes.TemplateBuildList
	if err := c.do(ctx, request{method: http.MethodGet, path: templatePath(id, "builds"), out: &out}); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// GetTemplateBuild returns a build with its log entries from logsOffset
// (at most 100; NextLogsOffset is where the next ones start).
func (c *Client) GetTemplateBuild(ctx context.Context, id, buildID string, logsOffset int64) (*TemplateBuild, error) {
	var q url.Values
	if logsOffset > 0 {
		q = url.Values{"logsOffset": {strconv.FormatInt(logsOffset, 10)}}
	}
	var out TemplateBuild
	if err := c.do(ctx, request{method: http.MethodGet, path: templatePath(id, "builds", buildID), query: q, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// BuildLogs reads a build's log from offset to its current end, page by
// page; it returns the build as last read (its status) and the offset after
// the last entry.
func (c *Client) BuildLogs(ctx context.Context, id, buildID string, offset int64, each func(TemplateBuildLogEntry)) (*TemplateBuild, int64, error) {
	for {
		b, err := c.GetTemplateBuild(ctx, id, buildID, offset)
		if err != nil {
			return nil, offset, err
		}
		for _, e := range b.Logs {
			if each != nil {
				each(e)
			}
		}
		if len(b.Logs) == 0 || b.NextLogsOffset <= offset {
			return b, offset, nil
		}
		offset = b.NextLogsOffset
	}
}

// WaitTemplateBuild polls a build (its log followed from offset, each entry
// given to each) until it is ready or error, backing off from initial to
// max between polls. It returns the build as last read; the caller judges
// its status. The context bounds the wait.
func (c *Client) WaitTemplateBuild(ctx context.Context, id, buildID string, offset int64, initial, max time.Duration, each func(TemplateBuildLogEntry)) (*TemplateBuild, error) {
	back := Doubling(initial, max)
	var last *TemplateBuild
	for {
		b, next, err := c.BuildLogs(ctx, id, buildID, offset, each)
		if err != nil {
			return last, err
		}
		last, offset = b, next
		if BuildFinal(string(b.Status)) {
			return b, nil
		}
		t := time.NewTimer(back.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return last, ctx.Err()
		case <-t.C:
		}
	}
}

// LogLine is a build log entry as one line of text, safe to print.
func LogLine(e TemplateBuildLogEntry) string {
	var b strings.Builder
	b.WriteString(e.Timestamp.UTC().Format(time.RFC3339))
	if e.Level != "" {
		b.WriteString(" " + strings.ToUpper(e.Level))
	}
	if e.Step != "" {
		b.WriteString(" [" + e.Step + "]")
	}
	b.WriteString(" " + strings.TrimRight(e.Message, "\n"))
	// One entry is one line: a newline inside the message cannot forge
	// the next entry.
	return SafeText(strings.ReplaceAll(b.String(), "\n", `\n`))
}

// SafeText is s with control characters other than newline and tab
// (terminal escapes included) written as \xNN: build logs and errors come
// from the build's containers, which run the user's code, or an attacker's.
func SafeText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case unicode.IsControl(r) || r == unicode.ReplacementChar:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
