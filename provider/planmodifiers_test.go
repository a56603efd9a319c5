package provider

import (
	"context"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// A small resource schema: paused and timeout change in place, token is computed.
var pmSchema = schema.Schema{Attributes: map[string]schema.Attribute{
	"paused":  schema.BoolAttribute{Optional: true},
	"timeout": schema.Int64Attribute{Optional: true},
	"token":   schema.StringAttribute{Computed: true},
}}

var pmType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
	"paused": tftypes.Bool, "timeout": tftypes.Number, "token": tftypes.String,
}}

// obj builds an object value; a nil map is the null object (create/destroy).
func obj(vals map[string]any) tftypes.Value {
	if vals == nil {
		return tftypes.NewValue(pmType, nil)
	}
	attrs := map[string]tftypes.Value{
		"paused":  tftypes.NewValue(tftypes.Bool, nil),
		"timeout": tftypes.NewValue(tftypes.Number, nil),
		"token":   tftypes.NewValue(tftypes.String, nil),
	}
	for k, v := range vals {
		typ := pmType.AttributeTypes[k]
		if v == tftypes.UnknownValue {
			attrs[k] = tftypes.NewValue(typ, tftypes.UnknownValue)
			continue
		}
		if i, ok := v.(int); ok {
			attrs[k] = tftypes.NewValue(typ, int64(i))
			continue
		}
		attrs[k] = tftypes.NewValue(typ, v)
	}
	return tftypes.NewValue(pmType, attrs)
}

func TestStateUnlessChanged(t *testing.T) {
	ctx := context.Background()
	unknown := types.StringUnknown()
	cases := []struct {
		name      string
		state     map[string]any
		plan      map[string]any
		config    types.String
		planValue types.String
		attrs     []string
		want      types.String
	}{
		{"create keeps unknown", nil, map[string]any{"paused": false}, types.StringNull(), unknown, []string{"paused"}, unknown},
		{"destroy untouched", map[string]any{"paused": false, "token": "t1"}, nil, types.StringNull(), types.StringNull(), []string{"paused"}, types.StringNull()},
		{"paused unchanged uses state", map[string]any{"paused": false, "token": "t1"}, map[string]any{"paused": false, "token": tftypes.UnknownValue}, types.StringNull(), unknown, []string{"paused"}, types.StringValue("t1")},
		{"paused changes stays unknown", map[string]any{"paused": true, "token": "t1"}, map[string]any{"paused": false, "token": tftypes.UnknownValue}, types.StringNull(), unknown, []string{"paused"}, unknown},
		{"paused unknown in plan stays unknown", map[string]any{"paused": true, "token": "t1"}, map[string]any{"paused": tftypes.UnknownValue, "token": tftypes.UnknownValue}, types.StringNull(), unknown, []string{"paused"}, unknown},
		{"other attribute changes uses state", map[string]any{"paused": false, "timeout": 60, "token": "t1"}, map[string]any{"paused": false, "timeout": 120, "token": tftypes.UnknownValue}, types.StringNull(), unknown, []string{"paused"}, types.StringValue("t1")},
		{"second watched attribute changes stays unknown", map[string]any{"paused": false, "timeout": 60, "token": "t1"}, map[string]any{"paused": false, "timeout": 120, "token": tftypes.UnknownValue}, types.StringNull(), unknown, []string{"paused", "timeout"}, unknown},
		{"null prior value stays unknown", map[string]any{"paused": false}, map[string]any{"paused": false, "token": tftypes.UnknownValue}, types.StringNull(), unknown, []string{"paused"}, unknown},
		{"known plan value untouched", map[string]any{"paused": false, "token": "t1"}, map[string]any{"paused": false, "token": "t2"}, types.StringNull(), types.StringValue("t2"), []string{"paused"}, types.StringValue("t2")},
		{"unknown config untouched", map[string]any{"paused": false, "token": "t1"}, map[string]any{"paused": false, "token": tftypes.UnknownValue}, unknown, unknown, []string{"paused"}, unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := tfsdk.State{Schema: pmSchema, Raw: obj(tc.state)}
			plan := tfsdk.Plan{Schema: pmSchema, Raw: obj(tc.plan)}
			stateValue := types.StringNull()
			if tc.state != nil {
				if s, ok := tc.state["token"].(string); ok {
					stateValue = types.StringValue(s)
				}
			}
			req := planmodifier.StringRequest{State: state, Plan: plan, StateValue: stateValue, PlanValue: tc.planValue, ConfigValue: tc.config}
			resp := &planmodifier.StringResponse{PlanValue: tc.planValue}
			stateUnlessChanged(tc.attrs...).PlanModifyString(ctx, req, resp)
			if !resp.PlanValue.Equal(tc.want) {
				t.Fatalf("plan value %s, want %s", resp.PlanValue, tc.want)
			}
		})
	}
}

func TestStateUnlessChangedMapAndInt64(t *testing.T) {
	ctx := context.Background()
	state := tfsdk.State{Schema: pmSchema, Raw: obj(map[string]any{"paused": false, "token": "t"})}
	plan := tfsdk.Plan{Schema: pmSchema, Raw: obj(map[string]any{"paused": false, "token": tftypes.UnknownValue})}
	m := types.MapValueMust(types.StringType, map[string]attr.Value{"a": types.StringValue("b")})
	mreq := planmodifier.MapRequest{State: state, Plan: plan, StateValue: m, PlanValue: types.MapUnknown(types.StringType), ConfigValue: types.MapNull(types.StringType)}
	mresp := &planmodifier.MapResponse{PlanValue: mreq.PlanValue}
	stateUnlessChanged("paused").PlanModifyMap(ctx, mreq, mresp)
	if !mresp.PlanValue.Equal(m) {
		t.Fatalf("map plan %s", mresp.PlanValue)
	}
	ireq := planmodifier.Int64Request{State: state, Plan: plan, StateValue: types.Int64Value(3), PlanValue: types.Int64Unknown(), ConfigValue: types.Int64Null()}
	iresp := &planmodifier.Int64Response{PlanValue: ireq.PlanValue}
	stateUnlessChanged("paused").PlanModifyInt64(ctx, ireq, iresp)
	if !iresp.PlanValue.Equal(types.Int64Value(3)) {
		t.Fatalf("int64 plan %s", iresp.PlanValue)
	}
}

// withPrivate gives req (a pointer to a plan modifier request) fresh
// private state, imported or not. The private state type is internal to the
// framework, so it is made by reflection.
func withPrivate(t *testing.T, req any, imported bool) {
	t.Helper()
	f := reflect.ValueOf(req).Elem().FieldByName("Private")
	f.Set(reflect.New(f.Type().Elem()))
	if imported {
		setKey := f.MethodByName("SetKey")
		out := setKey.Call([]reflect.Value{reflect.ValueOf(context.Background()), reflect.ValueOf(privateImportedKey), reflect.ValueOf([]byte("true"))})
		if !out[0].IsNil() && out[0].Len() > 0 {
			t.Fatalf("SetKey: %v", out[0].Interface())
		}
	}
}

func TestReplaceUnlessAdopting(t *testing.T) {
	ctx := context.Background()
	exists := obj(map[string]any{"paused": false})
	cases := []struct {
		name        string
		state, plan tftypes.Value
		stateValue  types.String
		planValue   types.String
		imported    bool
		want        bool
	}{
		{"create", obj(nil), exists, types.StringNull(), types.StringValue("a"), false, false},
		{"destroy", exists, obj(nil), types.StringValue("a"), types.StringNull(), false, false},
		{"unchanged", exists, exists, types.StringValue("a"), types.StringValue("a"), false, false},
		{"changed", exists, exists, types.StringValue("a"), types.StringValue("b"), false, true},
		{"set from null", exists, exists, types.StringNull(), types.StringValue("b"), false, true},
		{"removed", exists, exists, types.StringValue("a"), types.StringNull(), false, true},
		{"adopted after import", exists, exists, types.StringNull(), types.StringValue("b"), true, false},
		{"changed after import", exists, exists, types.StringValue("a"), types.StringValue("b"), true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := planmodifier.StringRequest{
				State: tfsdk.State{Schema: pmSchema, Raw: tc.state}, Plan: tfsdk.Plan{Schema: pmSchema, Raw: tc.plan},
				StateValue: tc.stateValue, PlanValue: tc.planValue, ConfigValue: tc.planValue,
			}
			withPrivate(t, &req, tc.imported)
			resp := &planmodifier.StringResponse{PlanValue: tc.planValue}
			replaceUnlessAdopting().PlanModifyString(ctx, req, resp)
			if resp.RequiresReplace != tc.want {
				t.Fatalf("RequiresReplace = %v, want %v", resp.RequiresReplace, tc.want)
			}
		})
	}

	// The other attribute kinds share the logic.
	st := tfsdk.State{Schema: pmSchema, Raw: exists}
	pl := tfsdk.Plan{Schema: pmSchema, Raw: exists}
	breq := planmodifier.BoolRequest{State: st, Plan: pl, StateValue: types.BoolValue(false), PlanValue: types.BoolValue(true)}
	withPrivate(t, &breq, false)
	bresp := &planmodifier.BoolResponse{}
	replaceUnlessAdopting().PlanModifyBool(ctx, breq, bresp)
	if !bresp.RequiresReplace {
		t.Error("bool change does not replace")
	}
	lreq := planmodifier.ListRequest{State: st, Plan: pl, StateValue: types.ListNull(types.StringType), PlanValue: types.ListValueMust(types.StringType, []attr.Value{types.StringValue("x")})}
	withPrivate(t, &lreq, true)
	lresp := &planmodifier.ListResponse{}
	replaceUnlessAdopting().PlanModifyList(ctx, lreq, lresp)
	if lresp.RequiresReplace {
		t.Error("list adopted after import replaces")
	}
}

func TestBackoff(t *testing.T) {
	b := client.Doubling(envPollInitial, envPollMax)
	var got []int
	for i := 0; i < 6; i++ {
		got = append(got, int(b.NextBackOff().Seconds()))
	}
	want := []int{1, 2, 4, 5, 5, 5}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("backoff %v, want %v", got, want)
	}
}

// Pausing shows no unknown: values only a resume changes keep their state,
// and the state attribute is planned as the state the change reaches.
func TestResumeOnlyAndPausedState(t *testing.T) {
	ctx := context.Background()
	unknown := types.StringUnknown()
	cases := []struct {
		name               string
		state, plan        map[string]any
		wantToken, wantSta types.String
	}{
		{"pause keeps token, plans paused", map[string]any{"paused": false, "token": "t1"}, map[string]any{"paused": true, "token": tftypes.UnknownValue}, types.StringValue("t1"), types.StringValue("paused")},
		{"resume: token unknown, plans running", map[string]any{"paused": true, "token": "t1"}, map[string]any{"paused": false, "token": tftypes.UnknownValue}, unknown, types.StringValue("running")},
		{"unchanged keeps both", map[string]any{"paused": false, "token": "t1"}, map[string]any{"paused": false, "token": tftypes.UnknownValue}, types.StringValue("t1"), types.StringValue("prior")},
		{"unknown paused: unknown", map[string]any{"paused": true, "token": "t1"}, map[string]any{"paused": tftypes.UnknownValue, "token": tftypes.UnknownValue}, unknown, unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := tfsdk.State{Schema: pmSchema, Raw: obj(tc.state)}
			plan := tfsdk.Plan{Schema: pmSchema, Raw: obj(tc.plan)}
			req := planmodifier.StringRequest{State: state, Plan: plan, StateValue: types.StringValue(tc.state["token"].(string)), PlanValue: unknown, ConfigValue: types.StringNull()}
			resp := &planmodifier.StringResponse{PlanValue: unknown}
			stateUnlessResumed().PlanModifyString(ctx, req, resp)
			if !resp.PlanValue.Equal(tc.wantToken) {
				t.Fatalf("token planned %s, want %s", resp.PlanValue, tc.wantToken)
			}
			req.StateValue = types.StringValue("prior")
			resp = &planmodifier.StringResponse{PlanValue: unknown}
			pausedState("paused", "running").PlanModifyString(ctx, req, resp)
			if !resp.PlanValue.Equal(tc.wantSta) {
				t.Fatalf("state planned %s, want %s", resp.PlanValue, tc.wantSta)
			}
		})
	}
}
