package provider

import (
	"context"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

// endpointAttrTypes is the object type of one service URL.
var endpointAttrTypes = map[string]attr.Type{
	"url":  types.StringType,
	"host": types.StringType,
	"port": types.Int64Type,
}

var endpointObjectType = types.ObjectType{AttrTypes: endpointAttrTypes}

// endpointsValue converts service URLs; nil becomes a null map.
func endpointsValue(eps client.Endpoints, diags *diag.Diagnostics) types.Map {
	if eps == nil {
		return types.MapNull(endpointObjectType)
	}
	elems := make(map[string]attr.Value, len(eps))
	for k, ep := range eps {
		obj, d := types.ObjectValue(endpointAttrTypes, map[string]attr.Value{
			"url":  types.StringValue(ep.URL),
			"host": types.StringValue(ep.Host),
			"port": types.Int64Value(int64(ep.Port)),
		})
		diags.Append(d...)
		elems[k] = obj
	}
	m, d := types.MapValue(endpointObjectType, elems)
	diags.Append(d...)
	return m
}

// stringOrNull maps "" to null.
func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// derefString reads an optional string of an answer ("" when absent).
func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// stringMap converts a map of strings to a Go map (nil when null or unknown).
func stringMap(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]string {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	diags.Append(m.ElementsAs(ctx, &out, false)...)
	return out
}

// stringList converts a list of strings to a Go slice (nil when null or unknown).
func stringList(ctx context.Context, l types.List, diags *diag.Diagnostics) []string {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(l.ElementsAs(ctx, &out, false)...)
	return out
}

// mapValueOrNull converts a Go map; empty becomes null.
func mapValueOrNull(m map[string]string, diags *diag.Diagnostics) types.Map {
	if len(m) == 0 {
		return types.MapNull(types.StringType)
	}
	elems := make(map[string]attr.Value, len(m))
	for k, v := range m {
		elems[k] = types.StringValue(v)
	}
	out, d := types.MapValue(types.StringType, elems)
	diags.Append(d...)
	return out
}

// listValueOrNull converts a Go slice; empty becomes null.
func listValueOrNull(l []string, diags *diag.Diagnostics) types.List {
	if len(l) == 0 {
		return types.ListNull(types.StringType)
	}
	elems := make([]attr.Value, len(l))
	for i, v := range l {
		elems[i] = types.StringValue(v)
	}
	out, d := types.ListValue(types.StringType, elems)
	diags.Append(d...)
	return out
}

// intPtr returns nil for null or unknown, else the value as the API types' int.
func intPtr(v types.Int64) *int {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	x := int(v.ValueInt64())
	return &x
}

// int64PtrOf widens an API int for the Terraform types.
func int64PtrOf(p *int) *int64 {
	if p == nil {
		return nil
	}
	x := int64(*p)
	return &x
}

// boolPtr returns nil for null or unknown.
func boolPtr(v types.Bool) *bool {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	x := v.ValueBool()
	return &x
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
