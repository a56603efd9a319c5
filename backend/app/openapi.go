package app

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// openAPIDocument is the API reference served at /openapi.json: the one
// document the API types are generated from (apitypes/openapi.yaml, merged
// from backend/app/openapi.yaml and the packages' fragments), converted once
// at start-up.
var openAPIDocument = mustOpenAPIJSON(apitypes.OpenAPIYAML)

func mustOpenAPIJSON(src []byte) []byte {
	doc, err := openapi3.NewLoader().LoadFromData(src)
	if err != nil {
		panic(fmt.Sprintf("openapi: %v", err))
	}
	out, err := doc.MarshalJSON()
	if err != nil {
		panic(fmt.Sprintf("openapi: %v", err))
	}
	return out
}
