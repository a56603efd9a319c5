package app

import (
	_ "embed"
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ledger"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
)

//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIDocument is the API reference served at /openapi.json: the core
// document plus each domain package's fragment, converted once at start-up.
var openAPIDocument = mustOpenAPIJSON(openAPIYAML, ledger.OpenAPIFragment, tasks.OpenAPIFragment, lifecycle.OpenAPIFragment, admission.OpenAPIFragment)

func mustOpenAPIJSON(base []byte, fragments ...[]byte) []byte {
	merged, err := mergeOpenAPI(base, fragments...)
	if err != nil {
		panic(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(merged)
	if err != nil {
		panic(fmt.Sprintf("openapi: %v", err))
	}
	out, err := doc.MarshalJSON()
	if err != nil {
		panic(fmt.Sprintf("openapi: %v", err))
	}
	return out
}

// mergeOpenAPI adds the fragments' tags, paths and components to base. A
// path or component defined twice is an error, so fragments cannot silently
// override each other.
func mergeOpenAPI(base []byte, fragments ...[]byte) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(base, &doc); err != nil {
		return nil, fmt.Errorf("openapi: main document: %w", err)
	}
	for i, f := range fragments {
		var frag map[string]any
		if err := yaml.Unmarshal(f, &frag); err != nil {
			return nil, fmt.Errorf("openapi: fragment %d: %w", i, err)
		}
		if err := mergeSection(doc, "paths", frag["paths"]); err != nil {
			return nil, err
		}
		fc, _ := frag["components"].(map[string]any)
		for section, v := range fc {
			comps, _ := doc["components"].(map[string]any)
			if err := mergeSection(comps, section, v); err != nil {
				return nil, err
			}
		}
		if tags, ok := frag["tags"].([]any); ok {
			existing, _ := doc["tags"].([]any)
			doc["tags"] = append(existing, tags...)
		}
	}
	return yaml.Marshal(doc)
}

func mergeSection(parent map[string]any, key string, add any) error {
	am, ok := add.(map[string]any)
	if !ok {
		return nil
	}
	cur, _ := parent[key].(map[string]any)
	if cur == nil {
		cur = map[string]any{}
		parent[key] = cur
	}
	for k, v := range am {
		if _, dup := cur[k]; dup {
			return fmt.Errorf("openapi: %s %q is defined twice", key, k)
		}
		cur[k] = v
	}
	return nil
}
