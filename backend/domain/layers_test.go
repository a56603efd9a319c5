package domain_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/dreadnode/terraform-provider-dreadnode/"

// The backend's layering (DESIGN.md, Layout): HTTP edge → services → domain ←
// adapters. These rules keep it from eroding one convenient import at a time.
// Each rule names a package (relative to the repository root) and the
// repository packages its non-test files must not import (prefix match).
var forbidden = map[string][]string{
	// The domain knows no SQL, no HTTP and no adapter.
	"backend/domain":          {"backend/", "apitypes", "client"},
	"backend/domain/sandbox":  {"backend/", "apitypes", "client"},
	"backend/domain/taskenv":  {"backend/", "apitypes", "client"},
	"backend/domain/template": {"backend/", "apitypes", "client"},
	// ids makes and hashes secrets for every layer: a leaf.
	"backend/ids": {"backend/", "apitypes", "client"},
	// envd's generated messages and services, and its signed URLs, are
	// shared by the agent (the server) and compute's envd client: leaves.
	"backend/envdpb/process":                      {"backend/", "apitypes", "client"},
	"backend/envdpb/process/processconnect":       {"backend/", "apitypes", "client"},
	"backend/envdpb/filesystem":                   {"backend/", "apitypes", "client"},
	"backend/envdpb/filesystem/filesystemconnect": {"backend/", "apitypes", "client"},
	"backend/envdsign":                            {"backend/", "apitypes", "client"},
	// The in-sandbox agent is a program of its own: it builds on envd's
	// shared code and its configuration, never on the backend's compute,
	// services or store (allowed lists what it may import).
	"backend/agent": {"backend/", "apitypes", "client"},
	// The compute port is plain Go; adapters import it, never the reverse.
	"backend/compute": {"backend/", "apitypes", "client"},
	// Adapters never reach up into services or the HTTP edge.
	"backend/store": {"backend/lifecycle", "backend/tasks", "backend/runtimes", "backend/billing",
		"backend/admission", "backend/keys", "backend/reconciler", "backend/api", "backend/app", "backend/httpx", "apitypes"},
	// The store's fixtures build on the store alone.
	"backend/store/storetest": {"backend/lifecycle", "backend/tasks", "backend/runtimes", "backend/billing",
		"backend/admission", "backend/keys", "backend/reconciler", "backend/api", "backend/app", "backend/httpx", "apitypes"},
	// Services never import the wiring or the server.
	"backend/reconciler": {"backend/app", "backend/api", "backend/lifecycle", "backend/tasks", "backend/billing",
		"backend/runtimes", "backend/admission", "backend/httpx", "apitypes"},
	"backend/billing":   {"backend/app", "backend/api", "backend/lifecycle", "backend/reconciler", "backend/runtimes", "backend/tasks"},
	"backend/admission": {"backend/app", "backend/api", "backend/lifecycle", "backend/reconciler", "backend/runtimes", "backend/tasks", "backend/billing"},
	"backend/runtimes":  {"backend/app", "backend/api", "backend/reconciler", "backend/tasks"},
	"backend/lifecycle": {"backend/app", "backend/api", "backend/billing", "backend/runtimes", "backend/tasks", "backend/e2bapi"},
	// The E2B edge translates shapes over the lifecycle service: no wiring,
	// no provider, no second copy of a service.
	"backend/e2bapi": {"backend/app", "backend/api", "backend/reconciler", "backend/compute/", "backend/billing",
		"backend/runtimes", "backend/tasks", "backend/admission"},
	"backend/tasks": {"backend/app", "backend/api", "backend/billing", "backend/runtimes", "backend/lifecycle"},
	"backend/keys":  {"backend/app", "backend/api", "backend/lifecycle", "backend/reconciler", "backend/runtimes", "backend/tasks"},
	// Worlds jobs build on the lifecycle service, as runtimes do.
	"backend/worlds": {"backend/app", "backend/api", "backend/reconciler", "backend/tasks", "backend/runtimes", "backend/compute/", "backend/e2bapi"},
	// An org's metrics read the ledger only.
	"backend/orgmetrics": {"backend/app", "backend/api", "backend/lifecycle", "backend/reconciler", "backend/runtimes",
		"backend/tasks", "backend/billing", "backend/e2bapi", "backend/compute"},
	"backend/templates": {"backend/app", "backend/api", "backend/billing", "backend/runtimes", "backend/tasks", "backend/lifecycle", "backend/e2bapi"},
}

// allowed are the exceptions to forbidden's prefixes: the domain's packages
// may build on one another (an environment's state is a projection of its
// record's phase), never on anything outside the domain.
var allowed = map[string][]string{
	"backend/domain/taskenv":                      {"backend/domain/sandbox"},
	"backend/envdpb/process/processconnect":       {"backend/envdpb/process"},
	"backend/envdpb/filesystem/filesystemconnect": {"backend/envdpb/filesystem"},
	"backend/agent": {"backend/config", "backend/envdsign", "backend/envdpb/process", "backend/envdpb/process/processconnect",
		"backend/envdpb/filesystem", "backend/envdpb/filesystem/filesystemconnect"},
}

// services hold the packages whose non-handler files must not speak HTTP:
// only files named handlers*.go (the HTTP edge of the package) import
// net/http, so a service method can be called from anywhere with Go values.
var services = []string{"backend/lifecycle", "backend/tasks", "backend/runtimes", "backend/billing",
	"backend/admission", "backend/reconciler", "backend/keys", "backend/store", "backend/domain", "backend/domain/sandbox",
	"backend/domain/taskenv", "backend/worlds", "backend/orgmetrics", "backend/domain/template", "backend/templates"}

func imports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("..", "..", dir))
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join("..", "..", dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = nil // a file without imports still counts as one
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			out[name] = append(out[name], p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no Go files: update the layering rules with the layout", dir)
	}
	return out
}

func TestImportsRunOneWay(t *testing.T) {
	for pkg, bad := range forbidden {
		for file, ims := range imports(t, pkg) {
			for _, im := range ims {
				rel, ok := strings.CutPrefix(im, module)
				if !ok || slices.Contains(allowed[pkg], rel) {
					continue
				}
				for _, b := range bad {
					if rel == b || strings.HasPrefix(rel, strings.TrimSuffix(b, "/")+"/") || (strings.HasSuffix(b, "/") && strings.HasPrefix(rel, b)) {
						t.Errorf("%s/%s imports %s: %s may not depend on %s (DESIGN.md, Layout)", pkg, file, rel, pkg, b)
					}
				}
			}
		}
	}
}

func TestOnlyHandlerFilesSpeakHTTP(t *testing.T) {
	for _, pkg := range services {
		for file, ims := range imports(t, pkg) {
			for _, im := range ims {
				if im == "net/http" && !strings.HasPrefix(file, "handlers") {
					t.Errorf("%s/%s imports net/http: only the package's handlers*.go files are its HTTP edge; take Go values in the service and read the request in a handler", pkg, file)
				}
			}
		}
	}
}

// readers are the only files that read the environment through package
// config: the backend's configuration (read once at start and passed down
// as Go values), the binaries' mains and the in-sandbox agent's own start.
// A library that reads it finds values the backend's tests never set and
// re-reads them on every call.
var readers = []string{"backend/app/config.go", "backend/agent/run.go", "backend/cmd/"}

func TestConfigurationIsReadOnce(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(filepath.Join(root, "backend"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "backend/config/") || slices.ContainsFunc(readers, func(r string) bool { return strings.HasPrefix(rel, r) }) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, call := range []string{"config.Parse[", "config.Load("} {
			if strings.Contains(string(b), call) {
				t.Errorf("%s calls %s: configuration is read once by backend/app/config.go (ConfigFromEnv) and passed down; add a field to app.Config instead", rel, call)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
