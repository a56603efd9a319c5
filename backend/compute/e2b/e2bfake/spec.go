package e2bfake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// SpecDir returns ../shared/e2b relative to the repository root (the nearest
// directory above the working directory holding go.mod). It errors, naming
// what it looked for, when the directory or a spec file is missing.
func SpecDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	dir := wd
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("e2bfake: no go.mod above %s; cannot find the repository root and ../shared/e2b", wd)
		}
		dir = parent
	}
	spec := filepath.Join(filepath.Dir(dir), "shared", "e2b")
	for _, f := range []string{"openapi.yml", "envd.yaml", "process.proto", "filesystem.proto"} {
		if _, err := os.Stat(filepath.Join(spec, f)); err != nil {
			return "", fmt.Errorf("e2bfake: E2B's published spec %s is missing (expected the E2B specs in %s, i.e. ../shared/e2b beside the repository root %s): %w",
				f, spec, dir, err)
		}
	}
	return spec, nil
}

// Spec is a loaded, validated OpenAPI document with a router that ignores
// the document's servers (the fake answers on 127.0.0.1).
type Spec struct {
	Doc    *openapi3.T
	Router routers.Router
}

var (
	specMu    sync.Mutex
	specCache = map[string]*Spec{}
)

// LoadSpec loads and validates one of the E2B OpenAPI documents
// ("openapi.yml" or "envd.yaml") from SpecDir. Loaded documents are cached
// and must be treated as read-only.
func LoadSpec(name string) (*Spec, error) {
	specMu.Lock()
	defer specMu.Unlock()
	if s, ok := specCache[name]; ok {
		return s, nil
	}
	dir, err := SpecDir()
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("e2bfake: loading %s: %w", name, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("e2bfake: %s is not a valid OpenAPI document: %w", name, err)
	}
	doc.Servers = nil // match any host: the fake is on 127.0.0.1
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("e2bfake: routing %s: %w", name, err)
	}
	s := &Spec{Doc: doc, Router: router}
	specCache[name] = s
	return s, nil
}

// strictFields reports JSON object keys of value the schema does not declare,
// where the schema has no additionalProperties. OpenAPI lets such keys pass,
// but for a client of E2B an undeclared key is a misspelt field that E2B
// silently ignores (e.g. "allowInternetAccess" for "allow_internet_access"),
// so the fake treats it as a violation.
func strictFields(schema *openapi3.SchemaRef, value any, at string) []string {
	if schema == nil || schema.Value == nil {
		return nil
	}
	s := schema.Value
	var out []string
	if len(s.AllOf)+len(s.OneOf)+len(s.AnyOf) > 0 {
		return nil // composed schemas: too loose to judge key by key
	}
	switch v := value.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, ok := s.Properties[k]; ok {
				out = append(out, strictFields(p, v[k], at+"."+k)...)
				continue
			}
			if ap := s.AdditionalProperties.Schema; ap != nil {
				out = append(out, strictFields(ap, v[k], at+"."+k)...)
				continue
			}
			if has := s.AdditionalProperties.Has; has != nil && *has {
				continue
			}
			out = append(out, fmt.Sprintf("%s.%s is not a field of the schema (declared: %s)", at, k, declared(s)))
		}
	case []any:
		if s.Items != nil {
			for i, item := range v {
				out = append(out, strictFields(s.Items, item, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return out
}

func declared(s *openapi3.Schema) string {
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// errorSchema returns components.schemas.Error of a document.
func errorSchema(doc *openapi3.T) (*openapi3.SchemaRef, error) {
	if doc.Components == nil || doc.Components.Schemas["Error"] == nil {
		return nil, errors.New("the document has no components.schemas.Error")
	}
	return doc.Components.Schemas["Error"], nil
}
