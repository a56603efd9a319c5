package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// A template built by API (E2B's startCmd and readyCmd) starts a process
// and is ready once a check succeeds. On E2B the sandbox resumes from a
// snapshot taken with that process running; a container has no such
// snapshot, so the agent runs the start command again at every start of
// the container (a create, a restart after a filesystem-only pause) and
// reports itself ready (the ready file the Docker provider waits for) only
// once the ready command has succeeded.
const (
	// EnvStart is the template's start command: JSON of
	// {"cmd","readyCmd","dir","user","env"} (compute.StartCommand). Empty:
	// none.
	EnvStart = "DN_AGENT_START"
	// EnvDefaultWorkdir is the directory processes start in when the
	// request names none (E2B's envd takes its template's WORKDIR as its
	// default workdir); empty: the user's home.
	EnvDefaultWorkdir = "DN_AGENT_DEFAULT_WORKDIR"
)

// StartReadyTime bounds the wait for a template's ready command at a
// sandbox's start (the build engine's default ready time limit: a
// template whose build passed its check has come up within it once).
const StartReadyTime = 2 * time.Minute

// defaultWorkdir is EnvDefaultWorkdir ("" when unset).
var defaultWorkdir string

// templateStart is EnvStart decoded.
type templateStart struct {
	Cmd      string   `json:"cmd,omitempty"`
	ReadyCmd string   `json:"readyCmd,omitempty"`
	Dir      string   `json:"dir,omitempty"`
	User     string   `json:"user,omitempty"`
	Env      []string `json:"env,omitempty"`
}

// startShell runs cmd with bash where the image has it, else sh (as the
// build engine ran it).
func startShell(cmd string) []string {
	return []string{"/bin/sh", "-c", `if [ -x /bin/bash ]; then exec /bin/bash -c "$1"; else exec /bin/sh -c "$1"; fi`, "sh", cmd}
}

// readyEvery is how often the ready command is tried until it succeeds.
const readyEvery = time.Second

// runTemplateStart starts raw's start command in the background and waits
// (up to limit) for its ready command to succeed. An error says why the
// template did not come up: the sandbox then must not be reported ready.
func runTemplateStart(r *Reaper, base []string, raw string, limit time.Duration) error {
	var s templateStart
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return fmt.Errorf("%s is not a start command: %v", EnvStart, err)
	}
	if s.Cmd == "" && s.ReadyCmd == "" {
		return nil
	}
	id := root
	switch {
	case s.User != "":
		u, err := userSpec(s.User)
		if err != nil {
			return fmt.Errorf("the template's start command cannot run: %v", err)
		}
		id = u
	case mainUser != nil:
		id = *mainUser
	}
	env := dedupEnv(append(processEnv(base, id, nil), s.Env...))
	dir := s.Dir
	if dir == "" {
		dir = "/"
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	run := func(cmd string, done func(syscall.WaitStatus)) (int, error) {
		argv := startShell(cmd)
		return r.Start(func() (int, error) {
			p, err := os.StartProcess(argv[0], argv, &os.ProcAttr{Dir: dir, Env: env,
				Files: []*os.File{null, os.Stdout, os.Stderr}, Sys: &syscall.SysProcAttr{Credential: id.credential(), Setpgid: true}})
			if err != nil {
				return 0, err
			}
			pid := p.Pid
			_ = p.Release()
			return pid, nil
		}, done)
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	startDone := make(chan int, 1)
	if s.Cmd != "" {
		if _, err := run(s.Cmd, func(st syscall.WaitStatus) { startDone <- exitCode(st) }); err != nil {
			return fmt.Errorf("the template's start command could not start: %v", err)
		}
	}
	failed := func(code int) error {
		return fmt.Errorf("the template's start command exited with code %d before the template was ready", code)
	}
	if s.ReadyCmd != "" {
		for {
			done := make(chan int, 1)
			pid, err := run(s.ReadyCmd, func(st syscall.WaitStatus) { done <- exitCode(st) })
			if err != nil {
				return fmt.Errorf("the template's ready command could not start: %v", err)
			}
			select {
			case code := <-done:
				if code == 0 {
					return startedOK(startDone, failed)
				}
			case <-deadline.C:
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				return fmt.Errorf("the template's ready command %q did not succeed within %s", shortCmd(s.ReadyCmd), limit)
			}
			select {
			case code := <-startDone:
				if code != 0 {
					return failed(code)
				}
				startDone <- code // seen; checked again once ready
			default:
			}
			select {
			case <-deadline.C:
				return fmt.Errorf("the template's ready command %q did not succeed within %s", shortCmd(s.ReadyCmd), limit)
			case <-time.After(readyEvery):
			}
		}
	}
	// No ready command: a start command that fails at once fails the
	// start; one still running after a moment is the template's process.
	select {
	case code := <-startDone:
		if code != 0 {
			return failed(code)
		}
	case <-time.After(readyEvery):
	}
	return nil
}

// startedOK fails when the start command already ended non-zero.
func startedOK(startDone chan int, failed func(int) error) error {
	select {
	case code := <-startDone:
		if code != 0 {
			return failed(code)
		}
	default:
	}
	return nil
}

func shortCmd(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
