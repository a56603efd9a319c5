package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// atLeast validates that an int64 is at least min.
func atLeast(min int64) validator.Int64 { return atLeastValidator{min: min} }

type atLeastValidator struct{ min int64 }

func (v atLeastValidator) Description(context.Context) string {
	return fmt.Sprintf("value must be at least %d", v.min)
}

func (v atLeastValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v atLeastValidator) ValidateInt64(ctx context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if got := req.ConfigValue.ValueInt64(); got < v.min {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value", fmt.Sprintf("%s must be at least %d, got %d.", req.Path, v.min, got))
	}
}
