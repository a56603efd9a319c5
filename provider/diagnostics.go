package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// fieldPaths maps request fields of the API (as the error envelope's loc
// names them, dot-joined without "body") to the attributes that set them.
// A path ending in "{}" takes the next loc element as a map key, "[]" as a
// list index.
type fieldPaths map[string]string

// sandboxFields are the fields of POST /sandboxes.
var sandboxFields = fieldPaths{
	"templateID":         "template",
	"timeout":            "timeout",
	"envVars":            "env_vars{}",
	"metadata":           "metadata{}",
	"autoPause":          "auto_pause",
	"autoResume":         "auto_resume",
	"command":            "command[]",
	"resources.cpuCount": "resources.cpu_count",
	"resources.memoryMB": "resources.memory_mb",
	"network.allowOut":   "network.allow_out[]",
	"network.denyOut":    "network.deny_out[]",
	"volumeMounts":       "volume_mounts[]",
}

// environmentFields are the fields of POST …/environments.
var environmentFields = fieldPaths{
	"task_ref":    "task_ref",
	"inputs":      "inputs{}",
	"timeout_sec": "timeout_sec",
	"project_id":  "project_id",
	"secret_ids":  "secret_ids[]",
}

// with returns a copy of f with field mapped to attr.
func (f fieldPaths) with(field, attr string) fieldPaths {
	out := make(fieldPaths, len(f)+1)
	for k, v := range f {
		out[k] = v
	}
	out[field] = attr
	return out
}

// pathOf returns the attribute a loc names: the longest mapped prefix of
// field, then a map key or list index from the element that follows.
func (f fieldPaths) pathOf(field []string) (path.Path, bool) {
	for n := len(field); n > 0; n-- {
		attr, ok := f[strings.Join(field[:n], ".")]
		if !ok {
			continue
		}
		elem := ""
		switch {
		case strings.HasSuffix(attr, "{}"), strings.HasSuffix(attr, "[]"):
			elem, attr = attr[len(attr)-2:], attr[:len(attr)-2]
		}
		parts := strings.Split(attr, ".")
		p := path.Root(parts[0])
		for _, name := range parts[1:] {
			p = p.AtName(name)
		}
		if n < len(field) {
			switch elem {
			case "{}":
				p = p.AtMapKey(field[n])
			case "[]":
				if i, err := strconv.ParseInt(field[n], 10, 64); err == nil {
					p = p.AtListIndex(int(i))
				}
			}
		}
		return p, true
	}
	return path.Empty(), false
}

// apiError adds an error diagnostic carrying the server's detail.
func apiError(diags *diag.Diagnostics, summary string, err error) {
	diags.AddError(summary, err.Error())
}

// apiErrorAt adds the server's error to the attribute each of its field
// errors names (the envelope's loc), so Terraform shows it on the
// configuration line; errors naming no known attribute stay general.
func apiErrorAt(diags *diag.Diagnostics, summary string, err error, fields fieldPaths) {
	var ae *client.APIError
	if !errors.As(err, &ae) || len(ae.Envelope.Errors) == 0 {
		apiError(diags, summary, err)
		return
	}
	placed := false
	for _, fe := range ae.Envelope.Errors {
		if p, ok := fields.pathOf(client.FieldError(fe).Field()); ok {
			diags.AddAttributeError(p, summary, fmt.Sprintf("Attribute %s %s\n\n%s", p, fe.Msg, err))
			placed = true
		}
	}
	if !placed {
		apiError(diags, summary, err)
	}
}

// planCheckTimeout bounds a plan-time look-up, so an API that does not
// answer delays the plan by at most this much.
const planCheckTimeout = 10 * time.Second

// checkAtPlan looks up (with lookup) the value the plan gives the root
// attribute attr when it is known and new (a create or a replacement), and
// reports the outcome with planCheck.
func checkAtPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, attr, what string, lookup func(context.Context, string) error) {
	if req.Plan.Raw.IsNull() { // destroy
		return
	}
	var planned, prior types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root(attr), &planned)...)
	if !req.State.Raw.IsNull() {
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root(attr), &prior)...)
	}
	if planned.IsNull() || planned.IsUnknown() || planned.Equal(prior) || resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, planCheckTimeout)
	defer cancel()
	planCheck(&resp.Diagnostics, path.Root(attr), what, planned.ValueString(), lookup(ctx, planned.ValueString()))
}

// planCheck turns a plan-time look-up of what (a template, a task) into
// diagnostics on attr: a 4xx answer (it does not exist, or the reference is
// malformed) is an error; no answer or a server error is a warning, since
// the apply will try again.
func planCheck(diags *diag.Diagnostics, attr path.Path, what, value string, err error) {
	if err == nil {
		return
	}
	status := client.StatusOf(err)
	if status >= 400 && status < 500 && status != http.StatusUnauthorized && status != http.StatusForbidden && status != http.StatusTooManyRequests {
		diags.AddAttributeError(attr, "Unknown "+what,
			fmt.Sprintf("The Dreadnode API has no %s %q: %s", what, value, err))
		return
	}
	diags.AddAttributeWarning(attr, "Could not check the "+what+" at plan",
		fmt.Sprintf("The Dreadnode API did not confirm that %s %q exists (%s). The plan goes on; the apply fails if it does not exist.", what, value, err))
}
