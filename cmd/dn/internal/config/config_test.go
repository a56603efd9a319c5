package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolvePrecedence(t *testing.T) {
	prof := Profile{APIURL: "http://profile:1", APIKey: "k-profile", Org: "o-profile", Workspace: "w-profile"}
	env := map[string]string{EnvAPIURL: "http://env:2", EnvAPIKey: "k-env", EnvOrg: "o-env"}
	flags := Profile{APIKey: "k-flag"}

	s := Resolve(flags, envOf(env), prof)
	want := Profile{APIURL: "http://env:2", APIKey: "k-flag", Org: "o-env", Workspace: "w-profile"}
	if s.Profile != want {
		t.Fatalf("resolved %+v, want %+v", s.Profile, want)
	}
	for k, src := range map[string]string{"api_url": "env", "api_key": "flag", "org": "env", "workspace": "profile"} {
		if s.Source[k] != src {
			t.Errorf("source of %s = %q, want %q", k, s.Source[k], src)
		}
	}

	// Nothing set: the defaults, and no key or org.
	s = Resolve(Profile{}, envOf(nil), Profile{})
	if s.APIURL != DefaultAPIURL || s.Workspace != DefaultWorkspace || s.APIKey != "" || s.Org != "" {
		t.Fatalf("defaults %+v", s.Profile)
	}
	if s.Source["api_url"] != "default" || s.Source["api_key"] != "" {
		t.Fatalf("sources %v", s.Source)
	}

	// Blank values do not override: a flag of spaces falls through to the env.
	s = Resolve(Profile{Org: "  "}, envOf(map[string]string{EnvOrg: " o-env "}), prof)
	if s.Org != "o-env" || s.Source["org"] != "env" {
		t.Fatalf("org %q from %q", s.Org, s.Source["org"])
	}
}

func TestDirHonoursXDG(t *testing.T) {
	d, err := Dir(envOf(map[string]string{"XDG_CONFIG_HOME": "/x/cfg", "HOME": "/home/u"}))
	if err != nil || d != "/x/cfg/dreadnode" {
		t.Fatalf("Dir = %q, %v", d, err)
	}
	d, err = Dir(envOf(map[string]string{"HOME": "/home/u"}))
	if err != nil || d != "/home/u/.config/dreadnode" {
		t.Fatalf("Dir = %q, %v", d, err)
	}
	// A relative XDG_CONFIG_HOME is invalid per the spec and ignored.
	d, _ = Dir(envOf(map[string]string{"XDG_CONFIG_HOME": "rel", "HOME": "/home/u"}))
	if d != "/home/u/.config/dreadnode" {
		t.Fatalf("Dir = %q", d)
	}
}

func TestSaveLoadKeepsOtherProfilesAndIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dreadnode")
	a := Profile{APIURL: "http://a", APIKey: "ka", Org: "oa", Workspace: "main"}
	b := Profile{APIURL: "http://b", APIKey: "kb", Org: "ob"}
	if err := Save(dir, "default", a); err != nil {
		t.Fatal(err)
	}
	if err := Save(dir, "staging", b); err != nil {
		t.Fatal(err)
	}
	got, ok, err := Load(dir, "default")
	if err != nil || !ok || got != a {
		t.Fatalf("Load default = %+v %v %v", got, ok, err)
	}
	got, ok, err = Load(dir, "staging")
	if err != nil || !ok || got != b {
		t.Fatalf("Load staging = %+v %v %v", got, ok, err)
	}
	if _, ok, err := Load(dir, "absent"); ok || err != nil {
		t.Fatalf("absent profile: %v %v", ok, err)
	}
	fi, err := os.Stat(ProfilePath(dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("profile file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	di, err := os.Stat(dir)
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("config dir mode %v (%v), want 0700", di.Mode().Perm(), err)
	}
	if err := Save(dir, "../evil", a); err == nil {
		t.Fatal("a profile name with a path was accepted")
	}
	if err := os.WriteFile(ProfilePath(dir), []byte("profiles: [unclosed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(dir, "default"); err == nil {
		t.Fatal("a broken profile file was read without error")
	}
}

func TestTokens(t *testing.T) {
	tk := Tokens{Dir: filepath.Join(t.TempDir(), "dreadnode")}
	if _, err := tk.Get(KindEnvironment, "e1"); !errors.Is(err, ErrNoToken) {
		t.Fatalf("Get before Put: %v", err)
	}
	p, err := tk.Put(KindEnvironment, "e1", "det_secret")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v (%v)", fi.Mode().Perm(), err)
	}
	if got, err := tk.Get(KindEnvironment, "e1"); err != nil || got != "det_secret" {
		t.Fatalf("Get = %q %v", got, err)
	}
	if _, err := tk.Get(KindSandbox, "e1"); !errors.Is(err, ErrNoToken) {
		t.Fatalf("kinds are separate: %v", err)
	}
	if err := tk.Delete(KindEnvironment, "e1"); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Get(KindEnvironment, "e1"); !errors.Is(err, ErrNoToken) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if err := tk.Delete(KindEnvironment, "e1"); err != nil {
		t.Fatalf("Delete twice: %v", err)
	}
	for _, bad := range []string{"", "..", "a/b", "../x"} {
		if _, err := tk.Put(KindEnvironment, bad, "x"); err == nil {
			t.Errorf("Put(%q) accepted", bad)
		}
	}
}
