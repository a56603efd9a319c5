//go:build tools

// Package tools pins the versions of the tools the build uses (go run).
package tools

import (
	// Documentation generation.
	_ "github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs"
)
