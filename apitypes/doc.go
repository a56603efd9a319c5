// Package apitypes is the backend's API contract in one place: openapi.yaml,
// the one OpenAPI document (served by the backend at /openapi.json), and the
// request and response types generated from it (types.gen.go, by
// oapi-codegen, models only).
//
// It sits at the repository root, apart from backend/, because four
// programs share it: the backend encodes its answers with these types, and
// client/ decodes them for the Terraform provider (provider/) and the dn
// command line (cmd/dn); a field added to the document reaches all of them by
// `make generate-api`, and `make lint` fails when the committed files are not
// what the generators would write. The package imports nothing but the
// standard library, so the provider does not carry the backend's
// dependencies.
//
// The document is written in parts that stay beside the handlers they
// describe: backend/app/openapi.yaml (health and the sandbox lifecycle) and
// each package's backend/<pkg>/openapi.yaml fragment. internal/mergespec
// merges them into openapi.yaml here; edit the parts, never the merged file.
package apitypes

// The pinned generators: mergespec writes openapi.yaml, oapi-codegen the
// types from it (its own go.mod, fetched from the module proxy, so the
// generator's dependencies stay out of ours), boundsgen the document's
// numeric bounds as constants (bounds.gen.go).
//go:generate go run ./internal/mergespec -root .. -o openapi.yaml
//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml -o types.gen.go openapi.yaml
//go:generate go run ./internal/boundsgen -i openapi.yaml -o bounds.gen.go
