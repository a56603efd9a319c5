package main

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func parse(t *testing.T, src string) (map[string]map[string]any, map[string]map[string]any) {
	t.Helper()
	var doc struct {
		Components struct {
			Parameters map[string]map[string]any `yaml:"parameters"`
		} `yaml:"components"`
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Components.Parameters, doc.Paths
}

// Components' parameters and inline ones with x-bounds-name are emitted;
// an inline one without it is not, and one name shared by parameters that
// agree is emitted once.
func TestParamBounds(t *testing.T) {
	c, p := parse(t, `
components:
  parameters:
    EventLimit: {name: limit, in: query, schema: {type: integer, minimum: 1, maximum: 500, default: 50}}
paths:
  /a:
    parameters:
      - {name: depth, in: query, x-bounds-name: Depth, schema: {type: integer, maximum: 64}}
    get:
      parameters:
        - {name: limit, in: query, x-bounds-name: ListLimit, schema: {type: integer, minimum: 1, maximum: 500}}
        - {name: other, in: query, schema: {type: integer, maximum: 9}}
  /b:
    get:
      parameters:
        - {name: limit, in: query, x-bounds-name: ListLimit, schema: {type: integer, minimum: 1, maximum: 500}}
`)
	got, err := paramBounds(c, p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ParamDepthMaximum = 64",
		"ParamEventLimitDefault = 50", "ParamEventLimitMinimum = 1", "ParamEventLimitMaximum = 500",
		"ParamListLimitMinimum = 1", "ParamListLimitMaximum = 500",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Two parameters sharing an x-bounds-name with different bounds fail the
// generator, naming both places.
func TestParamBoundsDisagree(t *testing.T) {
	c, p := parse(t, `
paths:
  /a:
    get:
      parameters:
        - {name: limit, in: query, x-bounds-name: ListLimit, schema: {type: integer, maximum: 500}}
  /b:
    get:
      parameters:
        - {name: limit, in: query, x-bounds-name: ListLimit, schema: {type: integer, maximum: 100}}
`)
	_, err := paramBounds(c, p)
	if err == nil || !strings.Contains(err.Error(), "ListLimit") || !strings.Contains(err.Error(), "/a") || !strings.Contains(err.Error(), "/b") {
		t.Fatalf("err = %v, want one naming ListLimit, /a and /b", err)
	}
}
