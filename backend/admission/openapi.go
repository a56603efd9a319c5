package admission

import _ "embed"

// OpenAPIFragment describes the routes Register and RegisterAdmin add; the
// backend merges it into its OpenAPI document.
//
//go:embed openapi.yaml
var OpenAPIFragment []byte
