package tasks

import _ "embed"

// OpenAPIFragment is the OpenAPI 3.0.3 description of the routes Register
// adds (paths, tags and components). It refers to the main document's Error
// schema, IdempotencyKey parameter and standard responses.
//
//go:embed openapi.yaml
var OpenAPIFragment []byte
