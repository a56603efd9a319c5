// Package e2btypes holds the request and response types of E2B's
// control-plane API, generated from openapi.yml: a copy of E2B's published
// spec (../shared/e2b/openapi.yml beside the repository), kept here as data
// so the types can be generated in-tree. The E2B provider
// (backend/compute/e2b) sends and reads them, its fake (e2bfake) serves
// them, and the /e2b edge (backend/e2bapi) answers with them; none of the
// three mirrors E2B's shapes by hand.
//
// Update the copy from ../shared/e2b and run `make generate-api`; `make
// api-check` fails when types.gen.go is not what the generator writes.
package e2btypes

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml -o types.gen.go openapi.yml
