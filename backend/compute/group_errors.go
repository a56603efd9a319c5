package compute

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotRunning is returned by GroupProvider.Exec when the service's
// instance is not running.
var ErrNotRunning = errors.New("the service is not running")

// ProviderError is a failure of a group's provider, worded for the task
// environment's error.
type ProviderError struct {
	Op  string // what was being done, e.g. `starting service "web"`
	Err error
	// Provider names the runtime that failed; "" means docker.
	Provider string
}

func (e *ProviderError) Error() string {
	name := e.Provider
	if name == "" {
		name = "docker"
	}
	// The Docker SDK prefixes every daemon answer; the user reads the answer.
	return "provider error (" + name + "): " + e.Op + ": " + strings.TrimPrefix(e.Err.Error(), "Error response from daemon: ")
}

func (e *ProviderError) Unwrap() error { return e.Err }

// BuildError is a failed image build (or a service without an image or
// template), worded for the environment's error.
type BuildError struct {
	Service string
	Step    string // e.g. "Step 3/4 : RUN make"
	Msg     string
	Output  []string // last lines of build output
}

func (e *BuildError) Error() string {
	s := fmt.Sprintf("service %q", e.Service)
	if e.Step != "" {
		s += ": " + e.Step
	}
	s += ": " + e.Msg
	if len(e.Output) > 0 {
		s += "\nlast build output:\n" + strings.Join(e.Output, "\n")
	}
	return s
}

// ServiceError says why a service did not come up, with its last log lines.
type ServiceError struct {
	Service string
	Msg     string
	Logs    []string
}

func (e *ServiceError) Error() string {
	s := fmt.Sprintf("service %q %s", e.Service, e.Msg)
	if len(e.Logs) > 0 {
		s += "; last log lines:\n" + strings.Join(e.Logs, "\n")
	} else {
		s += "; it wrote no log output"
	}
	return s
}

// DeadlineError is a *ServiceError caused by the deadline of Bring's
// context.
type DeadlineError struct {
	*ServiceError
	Cause error
}

func (e *DeadlineError) Unwrap() []error { return []error{e.ServiceError, e.Cause} }
