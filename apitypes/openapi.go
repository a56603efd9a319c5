package apitypes

import _ "embed"

// OpenAPIYAML is the merged OpenAPI document the types are generated from.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte
