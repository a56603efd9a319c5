// Package config holds what dn keeps on disk under its configuration
// directory ($XDG_CONFIG_HOME/dreadnode, else ~/.config/dreadnode): the
// profiles written by `dn login` and the secrets shown only once by the API
// (execute tokens, sandbox access tokens). It also resolves the settings of
// one run: flags, then DREADNODE_* variables, then the profile.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// Defaults of the settings nothing else sets.
const (
	DefaultAPIURL    = "http://127.0.0.1:8080"
	DefaultWorkspace = "main"
	DefaultProfile   = "default"
)

// Environment variables, overridden by flags and overriding the profile.
const (
	EnvAPIURL    = "DREADNODE_API_URL"
	EnvAPIKey    = "DREADNODE_API_KEY"
	EnvOrg       = "DREADNODE_ORG"
	EnvWorkspace = "DREADNODE_WORKSPACE"
	EnvProfile   = "DREADNODE_PROFILE"
)

// Profile is one named set of connection settings.
type Profile struct {
	APIURL    string `yaml:"api_url,omitempty" json:"api_url,omitempty"`
	APIKey    string `yaml:"api_key,omitempty" json:"api_key,omitempty"`
	Org       string `yaml:"org,omitempty" json:"org,omitempty"`
	Workspace string `yaml:"workspace,omitempty" json:"workspace,omitempty"`
}

// file is the profile file (config.yaml).
type file struct {
	Profiles map[string]Profile `yaml:"profiles"`
}

// Dir is dn's configuration directory: $XDG_CONFIG_HOME/dreadnode, else
// ~/.config/dreadnode.
func Dir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "dreadnode"), nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("cannot find the configuration directory: set HOME or XDG_CONFIG_HOME (%w)", err)
		}
	}
	return filepath.Join(home, ".config", "dreadnode"), nil
}

// ProfilePath is the profile file inside dir.
func ProfilePath(dir string) string { return filepath.Join(dir, "config.yaml") }

var profileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// CheckProfileName rejects names that are not simple slugs.
func CheckProfileName(name string) error {
	if !profileName.MatchString(name) {
		return fmt.Errorf("profile name %q: use 1-64 letters, digits, '.', '_' or '-'", name)
	}
	return nil
}

func readFile(dir string) (*file, error) {
	f := &file{Profiles: map[string]Profile{}}
	b, err := os.ReadFile(ProfilePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the profile file: %w", err)
	}
	if err := yaml.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("the profile file %s is not valid YAML (fix it or run dn login again): %w", ProfilePath(dir), err)
	}
	if f.Profiles == nil {
		f.Profiles = map[string]Profile{}
	}
	return f, nil
}

// Load reads profile name from dir; a missing file or profile is empty.
func Load(dir, name string) (Profile, bool, error) {
	f, err := readFile(dir)
	if err != nil {
		return Profile{}, false, err
	}
	p, ok := f.Profiles[name]
	return p, ok, nil
}

// Save writes profile name into dir's profile file, keeping the other
// profiles. The directory is 0700 and the file 0600: it holds an API key.
func Save(dir, name string, p Profile) error {
	if err := CheckProfileName(name); err != nil {
		return err
	}
	f, err := readFile(dir)
	if err != nil {
		return err
	}
	f.Profiles[name] = p
	b, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	return writeSecret(dir, ProfilePath(dir), b)
}

// writeSecret writes b to path atomically with mode 0600, creating dir 0700.
func writeSecret(dir, path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	_ = os.Chmod(dir, 0o700)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Settings are the resolved settings of one run, with where each came from
// ("flag", "env", "profile" or "default"), for messages that say what to fix.
type Settings struct {
	Profile
	Source map[string]string
}

// Resolve applies the precedence flags > environment > profile > defaults.
func Resolve(flags Profile, getenv func(string) string, prof Profile) Settings {
	s := Settings{Source: map[string]string{}}
	pick := func(name string, flag, env, fromProfile, def string) string {
		switch {
		case strings.TrimSpace(flag) != "":
			s.Source[name] = "flag"
			return strings.TrimSpace(flag)
		case strings.TrimSpace(getenv(env)) != "":
			s.Source[name] = "env"
			return strings.TrimSpace(getenv(env))
		case fromProfile != "":
			s.Source[name] = "profile"
			return fromProfile
		case def != "":
			s.Source[name] = "default"
		}
		return def
	}
	s.APIURL = pick("api_url", flags.APIURL, EnvAPIURL, prof.APIURL, DefaultAPIURL)
	s.APIKey = pick("api_key", flags.APIKey, EnvAPIKey, prof.APIKey, "")
	s.Org = pick("org", flags.Org, EnvOrg, prof.Org, "")
	s.Workspace = pick("workspace", flags.Workspace, EnvWorkspace, prof.Workspace, DefaultWorkspace)
	return s
}
