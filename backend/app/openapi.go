package app

import (
	_ "embed"
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
)

//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIDocument is the API reference served at /openapi.json, converted
// from the embedded YAML once at start-up.
var openAPIDocument = mustOpenAPIJSON()

func mustOpenAPIJSON() []byte {
	doc, err := openapi3.NewLoader().LoadFromData(openAPIYAML)
	if err != nil {
		panic(fmt.Sprintf("openapi.yaml: %v", err))
	}
	out, err := doc.MarshalJSON()
	if err != nil {
		panic(fmt.Sprintf("openapi.yaml: %v", err))
	}
	return out
}
