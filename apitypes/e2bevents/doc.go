// Package e2bevents holds the shapes of E2B's lifecycle events API (events,
// webhooks, their deliveries), generated from events.yml: E2B documents that
// API on its site but leaves it out of openapi.yml, so events.yml is written
// here from E2B's pages (see its header). The /e2b edge (backend/e2bapi)
// answers with these types, the E2B provider (backend/compute/e2b) registers
// its webhook and reads deliveries with them, and its fake (e2bfake) serves
// and sends them: one declaration of each shape instead of one per package.
//
// Edit events.yml and run `make generate-api`; `make api-check` fails when
// types.gen.go is not what the generator writes.
package e2bevents

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml -o types.gen.go events.yml
