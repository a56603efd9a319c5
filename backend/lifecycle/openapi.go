package lifecycle

import _ "embed"

// OpenAPIFragment describes the §6 routes registerStreams adds (paths and
// components); backend/app merges it into the served document.
//
//go:embed openapi.yaml
var OpenAPIFragment []byte
