package app

import (
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// openAPIDocument is the one document the API types are generated from
// (apitypes/openapi.yaml, merged from backend/app/openapi.yaml and the
// packages' fragments) as JSON, converted once at start-up. /openapi.json
// serves the request contract's copy of it (requestContract.served), whose
// timeout minimums are the deployment's.
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
