package app

import _ "embed"

//go:embed openapi.json
var openAPIDocument []byte
