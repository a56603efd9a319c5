package catalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	t.Parallel()
	good := map[string]Ref{
		"web-login":                 {Name: "web-login"},
		"dreadnode/web-login":       {Org: "dreadnode", Name: "web-login"},
		"dreadnode/web-login@1.0.0": {Org: "dreadnode", Name: "web-login", Version: "1.0.0"},
		"web-login@^1":              {Name: "web-login", Version: "^1"},
		"x@>=1.0 <2":                {Name: "x", Version: ">=1.0 <2"},
	}
	for in, want := range good {
		got, err := ParseRef(in)
		if err != nil || got != want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("String() = %q, want %q", got.String(), in)
		}
	}
	for _, in := range []string{"", "Web", "a/b/c", "web@", "web@not a version!", "/web", "org/", "we b", "@1.0.0", strings.Repeat("a", 201)} {
		if _, err := ParseRef(in); err == nil {
			t.Errorf("ParseRef(%q) accepted a malformed ref", in)
		}
	}
}

func openTestCatalog(t *testing.T) *Catalog {
	t.Helper()
	dirs := filepath.Join("..", "..", "..", "tasks") + string(filepath.ListSeparator) + filepath.Join("..", "testdata", "tasks") +
		string(filepath.ListSeparator) + filepath.Join("..", "testdata", "bad-tasks")
	c, err := Open(context.Background(), dirs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCatalogResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := openTestCatalog(t)
	cases := []struct{ ref, org, want string }{
		{"versioned", "x", "dreadnode/versioned@1.2.0"}, // highest stable, not the release candidate
		{"versioned@1.0.0", "x", "dreadnode/versioned@1.0.0"},
		{"versioned@~1.0", "x", "dreadnode/versioned@1.0.0"},
		{"versioned@2.0.0-rc.1", "x", "dreadnode/versioned@2.0.0-rc.1"},
		{"dreadnode/versioned", "x", "dreadnode/versioned@1.2.0"},
		{"web-login", "x", "dreadnode/web-login@1.0.0"},
		{"ssrf-vault", "x", "dreadnode/ssrf-vault@1.0.0"},
		{"private-task", "acme", "acme/private-task@0.1.0"},
		{"acme/private-task", "acme", "acme/private-task@0.1.0"},
	}
	for _, tc := range cases {
		ref, err := ParseRef(tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Resolve(ctx, ref, tc.org)
		if err != nil || got.Ref() != tc.want {
			t.Errorf("Resolve(%q) for %s = %v, %v; want %s", tc.ref, tc.org, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ ref, org string }{
		{"versioned@3.0.0", "x"}, {"nope", "x"}, {"private-task", "other"}, {"acme/private-task", "other"}, {"unsupported", "x"},
	} {
		ref, _ := ParseRef(tc.ref)
		if got, err := c.Resolve(ctx, ref, tc.org); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tc.ref) {
			t.Errorf("Resolve(%q) for %s = %v, %v; want ErrNotFound naming the ref", tc.ref, tc.org, got, err)
		}
	}
	for _, tk := range c.List("other") {
		if tk.Org != DefaultOrg {
			t.Errorf("org other sees %s", tk.Ref())
		}
	}
}

func TestCatalogProblems(t *testing.T) {
	t.Parallel()
	c := openTestCatalog(t)
	var all []string
	for _, p := range c.Problems() {
		all = append(all, p.Error())
	}
	text := strings.Join(all, "\n")
	for _, want := range []string{"privileged is not supported", "volumes is not supported", "field surprise not found",
		"the instruction shows {{flag}}, a secret input"} {
		if !strings.Contains(text, want) {
			t.Errorf("problems do not mention %q:\n%s", want, text)
		}
	}
}

func TestInputsAndRender(t *testing.T) {
	t.Parallel()
	c := openTestCatalog(t)
	ref, _ := ParseRef("web-login")
	tk, err := c.Resolve(context.Background(), ref, "x")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tk.ResolveInputs(map[string]string{"flag": "F"})
	if err != nil || got["flag"] != "F" || got["admin_password"] == "" {
		t.Fatalf("ResolveInputs: %v %v", got, err)
	}
	var ie *InputError
	if _, err := tk.ResolveInputs(map[string]string{"bogus": "1"}); !errors.As(err, &ie) || ie.Input != "bogus" {
		t.Fatalf("unknown input: %v", err)
	}
	ref, _ = ParseRef("nonce-build")
	nb, _ := c.Resolve(context.Background(), ref, "x")
	if _, err := nb.ResolveInputs(nil); !errors.As(err, &ie) || ie.Input != "nonce" || !strings.Contains(ie.Msg, "required") {
		t.Fatalf("missing required input: %v", err)
	}
	vars := Variables(map[string]string{"flag": "a", "FLAG2": "b"})
	if vars["FLAG"] != "a" || vars["flag"] != "a" || vars["FLAG2"] != "b" {
		t.Fatalf("Variables: %v", vars)
	}
	out := Render("at {{web_url}} {{ web_port }} {{unknown}}", map[string]string{"web_url": "http://x", "web_port": "1"})
	if out != "at http://x 1 {{unknown}}" {
		t.Fatalf("Render: %q", out)
	}
}

func TestCatalogRefusesPrivileges(t *testing.T) {
	t.Parallel()
	c := openTestCatalog(t)
	var text string
	for _, p := range c.Problems() {
		if strings.Contains(p.Error(), "capabilities") {
			text += p.Error() + "\n"
		}
	}
	for _, want := range []string{
		`service "box": cap_add: capability "SYS_ADMIN" cannot be added (allowed: NET_RAW)`,
		`service "other": security_opt`, "unconfined is never allowed",
		`service "other": runtime (set runtime in task.yaml`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the capabilities fixture's problems do not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, `"NET_RAW" cannot`) {
		t.Errorf("NET_RAW, which a task service may add back, was refused:\n%s", text)
	}
	ref, _ := ParseRef("raw-scanner")
	if _, err := c.Resolve(context.Background(), ref, "x"); err != nil {
		t.Errorf("a task adding NET_RAW back does not load: %v", err)
	}
	ref, _ = ParseRef("needs-runtime")
	if tk, err := c.Resolve(context.Background(), ref, "x"); err != nil || tk.Runtime != "dn-no-such-runtime" {
		t.Errorf("runtime of needs-runtime: %+v %v", tk, err)
	}
}

// network.allowOut takes IP addresses and CIDR blocks (canonicalised); a
// host name is refused naming the entry.
func TestManifestNetworkAllowOut(t *testing.T) {
	t.Parallel()
	write := func(allow string) string {
		dir := t.TempDir()
		for name, body := range map[string]string{
			ManifestFile:   "name: net\nversion: 1.0.0\nnetwork:\n  allowOut: " + allow + "\n",
			"compose.yaml": "services:\n  box:\n    image: dreadnode/base:latest\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	tk, err := LoadTask(context.Background(), write(`["192.0.2.7", "198.51.100.9/24", "2001:db8::1"]`), "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tk.Network.AllowOut, " "); got != "192.0.2.7/32 198.51.100.0/24 2001:db8::1/128" {
		t.Errorf("allowOut read as %s", got)
	}
	if tk, err := LoadTask(context.Background(), write(`[]`), "x"); err != nil || len(tk.Network.AllowOut) != 0 {
		t.Errorf("an empty allowOut: %v %v", tk, err)
	}
	_, err = LoadTask(context.Background(), write(`["192.0.2.7", "api.example.com"]`), "x")
	if err == nil || !strings.Contains(err.Error(), "network.allowOut.1") || !strings.Contains(err.Error(), `"api.example.com"`) {
		t.Fatalf("a host name must be refused naming the entry, got %v", err)
	}
}

// A depends_on cycle is refused when the task loads (compose-go's loader
// checks it), naming the services in the cycle.
func TestDependsOnCycleRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		ManifestFile: "name: cyc\nversion: 1.0.0\n",
		"compose.yaml": "services:\n  a:\n    image: dreadnode/base:latest\n    depends_on: [b]\n" +
			"  b:\n    image: dreadnode/base:latest\n    depends_on: [a]\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := LoadTask(context.Background(), dir, "x")
	if err == nil || !strings.Contains(err.Error(), "cycle") || !strings.Contains(err.Error(), "a -> b") {
		t.Fatalf("a depends_on cycle must be refused naming it, got %v", err)
	}
}
