package provider

import (
	"fmt"

	"github.com/caarlos0/env/v11"
)

// envConfig is the environment the provider reads, in one typed struct:
// the defaults of its settings (the Env* variables), read once per
// Configure.
type envConfig struct {
	APIURL    string `env:"DREADNODE_API_URL"`
	APIKey    string `env:"DREADNODE_API_KEY"`
	Org       string `env:"DREADNODE_ORG"`
	Workspace string `env:"DREADNODE_WORKSPACE"`
}

func readEnvConfig() (envConfig, error) {
	var c envConfig
	if err := env.Parse(&c); err != nil {
		return c, fmt.Errorf("reading the DREADNODE_* environment: %w", err)
	}
	return c, nil
}
