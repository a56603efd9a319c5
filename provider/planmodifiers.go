package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// privateImportedKey marks, in the private state, a resource that was
// imported and not yet applied: its arguments the API cannot report are null
// in state until the next apply adopts them from the configuration.
const privateImportedKey = "imported"

// privateGetter is the GetKey half of privatestate.ProviderData.
type privateGetter interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
}

func isImported(ctx context.Context, p privateGetter) bool {
	if p == nil {
		return false
	}
	v, _ := p.GetKey(ctx, privateImportedKey)
	return len(v) > 0
}

// ---------------------------------------------------------------------------
// stateUnlessChanged: UseStateForUnknown, except when one of the named root
// attributes changes in this plan (then the value stays "known after apply").

// stateUnlessChanged returns a plan modifier that copies the prior state
// value into an unknown planned value, unless one of the root attributes
// named in attrs differs between the prior state and the plan.
func stateUnlessChanged(attrs ...string) stateUnlessChangedModifier {
	return stateUnlessChangedModifier{attrs: attrs}
}

type stateUnlessChangedModifier struct {
	attrs []string
	// resumeOnly: a change of "paused" counts only from true to false
	// (a resume), so a pause shows no "known after apply".
	resumeOnly bool
}

// stateUnlessResumed is stateUnlessChanged for values only a resume changes
// (access token, end of lifetime, service URLs): the prior value is kept
// unless paused goes from true to false or one of attrs changes.
func stateUnlessResumed(attrs ...string) stateUnlessChangedModifier {
	return stateUnlessChangedModifier{attrs: attrs, resumeOnly: true}
}

var (
	_ planmodifier.String = stateUnlessChangedModifier{}
	_ planmodifier.Int64  = stateUnlessChangedModifier{}
	_ planmodifier.Map    = stateUnlessChangedModifier{}
	_ planmodifier.Bool   = stateUnlessChangedModifier{}
)

func (m stateUnlessChangedModifier) Description(context.Context) string {
	if m.resumeOnly {
		if len(m.attrs) == 0 {
			return "The value does not change unless the resource is resumed (paused goes from true to false)."
		}
		return fmt.Sprintf("The value does not change unless the resource is resumed or %s changes.", strings.Join(m.attrs, " or "))
	}
	if len(m.attrs) == 0 {
		return "The value does not change after creation."
	}
	return fmt.Sprintf("The value does not change unless %s changes.", strings.Join(m.attrs, " or "))
}

func (m stateUnlessChangedModifier) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

// keep reports whether the prior state value should replace the unknown
// planned value.
func (m stateUnlessChangedModifier) keep(ctx context.Context, state tfsdk.State, plan tfsdk.Plan, stateValue, planValue, configValue attr.Value) bool {
	if state.Raw.IsNull() || plan.Raw.IsNull() { // create or destroy
		return false
	}
	if stateValue.IsNull() || !planValue.IsUnknown() || configValue.IsUnknown() {
		return false
	}
	for _, name := range m.attrs {
		if rootAttributeChanges(state.Raw, plan.Raw, name) {
			return false
		}
	}
	if m.resumeOnly && resumes(state.Raw, plan.Raw) {
		return false
	}
	return true
}

// rootBool returns the root bool attribute name of v (known reports whether
// it is a known, non-null value).
func rootBool(v tftypes.Value, name string) (value, known bool) {
	raw, _, err := tftypes.WalkAttributePath(v, tftypes.NewAttributePath().WithAttributeName(name))
	tv, ok := raw.(tftypes.Value)
	if err != nil || !ok || !tv.IsKnown() || tv.IsNull() {
		return false, false
	}
	var b bool
	if err := tv.As(&b); err != nil {
		return false, false
	}
	return b, true
}

// resumes reports whether the plan resumes the resource: paused goes from
// true to false, or becomes unknown.
func resumes(state, plan tftypes.Value) bool {
	was, ok := rootBool(state, "paused")
	if !ok || !was {
		return false
	}
	now, ok := rootBool(plan, "paused")
	return !ok || !now
}

// pausedState plans the "state" attribute from "paused": pausedValue when
// the plan pauses, runningValue when it resumes, else the prior state. So a
// pause or resume shows the state it will reach instead of "known after
// apply".
func pausedState(pausedValue, runningValue string) pausedStateModifier {
	return pausedStateModifier{paused: pausedValue, running: runningValue}
}

type pausedStateModifier struct{ paused, running string }

var _ planmodifier.String = pausedStateModifier{}

func (m pausedStateModifier) Description(context.Context) string {
	return fmt.Sprintf("Planned from paused: %q when pausing, %q when resuming, else unchanged.", m.paused, m.running)
}

func (m pausedStateModifier) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (m pausedStateModifier) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() || !req.PlanValue.IsUnknown() {
		return
	}
	was, ok1 := rootBool(req.State.Raw, "paused")
	now, ok2 := rootBool(req.Plan.Raw, "paused")
	switch {
	case !ok2:
		return // unknown paused: unknown state
	case ok1 && !was && now:
		resp.PlanValue = types.StringValue(m.paused)
	case ok1 && was && !now:
		resp.PlanValue = types.StringValue(m.running)
	case !req.StateValue.IsNull():
		resp.PlanValue = req.StateValue
	}
}

// rootAttributeChanges reports whether the root attribute name differs
// between prior state and plan (an unknown planned value counts as a change).
func rootAttributeChanges(state, plan tftypes.Value, name string) bool {
	p := tftypes.NewAttributePath().WithAttributeName(name)
	sv, _, err1 := tftypes.WalkAttributePath(state, p)
	pv, _, err2 := tftypes.WalkAttributePath(plan, p)
	if err1 != nil || err2 != nil {
		return true
	}
	s, ok1 := sv.(tftypes.Value)
	q, ok2 := pv.(tftypes.Value)
	if !ok1 || !ok2 || !q.IsKnown() {
		return true
	}
	return !s.Equal(q)
}

func (m stateUnlessChangedModifier) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if m.keep(ctx, req.State, req.Plan, req.StateValue, req.PlanValue, req.ConfigValue) {
		resp.PlanValue = req.StateValue
	}
}

func (m stateUnlessChangedModifier) PlanModifyInt64(ctx context.Context, req planmodifier.Int64Request, resp *planmodifier.Int64Response) {
	if m.keep(ctx, req.State, req.Plan, req.StateValue, req.PlanValue, req.ConfigValue) {
		resp.PlanValue = req.StateValue
	}
}

func (m stateUnlessChangedModifier) PlanModifyMap(ctx context.Context, req planmodifier.MapRequest, resp *planmodifier.MapResponse) {
	if m.keep(ctx, req.State, req.Plan, req.StateValue, req.PlanValue, req.ConfigValue) {
		resp.PlanValue = req.StateValue
	}
}

func (m stateUnlessChangedModifier) PlanModifyBool(ctx context.Context, req planmodifier.BoolRequest, resp *planmodifier.BoolResponse) {
	if m.keep(ctx, req.State, req.Plan, req.StateValue, req.PlanValue, req.ConfigValue) {
		resp.PlanValue = req.StateValue
	}
}

// ---------------------------------------------------------------------------
// replaceUnlessAdopting: RequiresReplace, except right after an import when
// the prior value is null because the API cannot report it; then the plan
// adopts the configured value in place.

// replaceUnlessAdopting returns a plan modifier that requires replacement
// when the value changes, except when the prior value is null on a resource
// imported and not yet applied (the value is adopted without replacement).
func replaceUnlessAdopting() replaceUnlessAdoptingModifier { return replaceUnlessAdoptingModifier{} }

type replaceUnlessAdoptingModifier struct{}

var (
	_ planmodifier.String = replaceUnlessAdoptingModifier{}
	_ planmodifier.Int64  = replaceUnlessAdoptingModifier{}
	_ planmodifier.Bool   = replaceUnlessAdoptingModifier{}
	_ planmodifier.Map    = replaceUnlessAdoptingModifier{}
	_ planmodifier.List   = replaceUnlessAdoptingModifier{}
	_ planmodifier.Object = replaceUnlessAdoptingModifier{}
)

func (replaceUnlessAdoptingModifier) Description(context.Context) string {
	return "Changing the value replaces the resource (after an import, a value the API does not report is adopted from the configuration without replacement)."
}

func (m replaceUnlessAdoptingModifier) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (replaceUnlessAdoptingModifier) replace(ctx context.Context, state tfsdk.State, plan tfsdk.Plan, private privateGetter, stateValue, planValue attr.Value) bool {
	if state.Raw.IsNull() || plan.Raw.IsNull() { // create or destroy
		return false
	}
	if planValue.Equal(stateValue) {
		return false
	}
	if stateValue.IsNull() && isImported(ctx, private) {
		return false
	}
	return true
}

func (m replaceUnlessAdoptingModifier) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	resp.RequiresReplace = m.replace(ctx, req.State, req.Plan, req.Private, req.StateValue, req.PlanValue)
}

func (m replaceUnlessAdoptingModifier) PlanModifyInt64(ctx context.Context, req planmodifier.Int64Request, resp *planmodifier.Int64Response) {
	resp.RequiresReplace = m.replace(ctx, req.State, req.Plan, req.Private, req.StateValue, req.PlanValue)
}

func (m replaceUnlessAdoptingModifier) PlanModifyBool(ctx context.Context, req planmodifier.BoolRequest, resp *planmodifier.BoolResponse) {
	resp.RequiresReplace = m.replace(ctx, req.State, req.Plan, req.Private, req.StateValue, req.PlanValue)
}

func (m replaceUnlessAdoptingModifier) PlanModifyMap(ctx context.Context, req planmodifier.MapRequest, resp *planmodifier.MapResponse) {
	resp.RequiresReplace = m.replace(ctx, req.State, req.Plan, req.Private, req.StateValue, req.PlanValue)
}

func (m replaceUnlessAdoptingModifier) PlanModifyList(ctx context.Context, req planmodifier.ListRequest, resp *planmodifier.ListResponse) {
	resp.RequiresReplace = m.replace(ctx, req.State, req.Plan, req.Private, req.StateValue, req.PlanValue)
}

func (m replaceUnlessAdoptingModifier) PlanModifyObject(ctx context.Context, req planmodifier.ObjectRequest, resp *planmodifier.ObjectResponse) {
	resp.RequiresReplace = m.replace(ctx, req.State, req.Plan, req.Private, req.StateValue, req.PlanValue)
}
