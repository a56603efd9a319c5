package main

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
)

// agentName is the name the sandbox agent runs under: the Docker provider
// mounts it as /.dreadnode/dn-agent. When this binary is the one injected
// (see findAgent), main runs the agent instead of the backend.
const agentName = "dn-agent"

// findAgent locates the sandbox agent when DREADNODE_AGENT_BINARY is
// unset: a dn-agent beside this binary (the backend image ships
// /dn-agent beside /dreadnode-backend), else this binary itself when it is
// static (built with CGO_ENABLED=0, as `make run` and the image do), since
// it runs as the agent when called dn-agent. "" when neither is found.
func findAgent() (path, how string) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Sprintf("cannot locate this binary: %v", err)
	}
	beside := filepath.Join(filepath.Dir(self), agentName)
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() {
		return beside, "the dn-agent beside the backend"
	}
	if static, err := isStatic(self); err != nil || !static {
		return "", "the backend is not a static build and no dn-agent is beside it: build it with CGO_ENABLED=0, run `make agent` and set DREADNODE_AGENT_BINARY=bin/dn-agent, or build the image with `make image-backend`"
	}
	return self, "the backend binary itself (static)"
}

// isStatic reports whether the ELF file at path needs no dynamic loader.
func isStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// usesDocker reports whether any template runs on the Docker provider.
func usesDocker(cfg app.Config) bool {
	if cfg.Provider == "docker" {
		return true
	}
	for _, p := range cfg.TemplateProviders {
		if p == "docker" {
			return true
		}
	}
	return false
}
