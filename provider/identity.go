package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
)

// idIdentitySchema is the resource identity of the provider's resources:
// their API id (Terraform 1.12 or later imports by identity with it).
func idIdentitySchema(description string) identityschema.Schema {
	return identityschema.Schema{
		Attributes: map[string]identityschema.Attribute{
			"id": identityschema.StringAttribute{RequiredForImport: true, Description: description},
		},
	}
}

// setIDIdentity records the resource identity; identity is nil for clients
// older than Terraform 1.12, which have none.
func setIDIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, id string, diags *diag.Diagnostics) {
	if identity != nil {
		diags.Append(identity.SetAttribute(ctx, path.Root("id"), id)...)
	}
}
