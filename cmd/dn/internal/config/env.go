package config

import (
	"fmt"

	"github.com/caarlos0/env/v11"
)

// Env is the environment dn reads, in one typed struct (the Env* variables
// and where the configuration directory is).
type Env struct {
	APIURL        string `env:"DREADNODE_API_URL"`
	APIKey        string `env:"DREADNODE_API_KEY"`
	Org           string `env:"DREADNODE_ORG"`
	Workspace     string `env:"DREADNODE_WORKSPACE"`
	Profile       string `env:"DREADNODE_PROFILE"`
	XDGConfigHome string `env:"XDG_CONFIG_HOME"`
	Home          string `env:"HOME"`
}

// ReadEnv reads the process's environment.
func ReadEnv() (Env, error) {
	var e Env
	if err := env.Parse(&e); err != nil {
		return e, fmt.Errorf("reading the environment: %w", err)
	}
	return e, nil
}

// Getenv is e as a lookup by variable name, the form Resolve and Dir take
// (tests give them a map's); a variable dn does not read is "".
func (e Env) Getenv(name string) string {
	switch name {
	case EnvAPIURL:
		return e.APIURL
	case EnvAPIKey:
		return e.APIKey
	case EnvOrg:
		return e.Org
	case EnvWorkspace:
		return e.Workspace
	case EnvProfile:
		return e.Profile
	case "XDG_CONFIG_HOME":
		return e.XDGConfigHome
	case "HOME":
		return e.Home
	}
	return ""
}
