package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/config"
)

// Environment of the agent itself; none of it reaches the processes it starts.
const (
	// EnvToken is the access token (the Docker provider's way: it shows in
	// /proc/1/environ, which only the sandbox's root reads, as it would a
	// root-only EnvTokenFile).
	EnvToken = "DN_AGENT_TOKEN"
	// EnvTokenFile names a file holding the access token.
	EnvTokenFile = "DN_AGENT_TOKEN_FILE"
	// EnvTokenSHA256 is the hex SHA-256 of the access token: the Docker
	// provider's way, so that the container's environment (which `docker
	// inspect` shows) does not give the token away.
	EnvTokenSHA256 = "DN_AGENT_TOKEN_SHA256"
	// EnvListen is the listen address (default ":49983").
	EnvListen = "DN_AGENT_LISTEN"
	// EnvReadyFile names a file the agent creates once it listens and the
	// main command started: the Docker provider waits for it through the
	// engine (no network needed), so a main command that cannot start
	// fails the create, as it did when it was the container's own entrypoint.
	EnvReadyFile = "DN_AGENT_READY_FILE"
	// EnvMainUser is the user ("name", "uid", "name:group", "uid:gid") the
	// main command runs as: the image's USER, when the agent itself runs
	// as root so it can read its token and start processes as any user.
	EnvMainUser = "DN_AGENT_MAIN_USER"
)

// ownEnv reads the agent's variables (package config; text only, so
// reading them cannot fail).
func ownEnv() config.Agent {
	e, _ := config.Parse[config.Agent]()
	return e
}

// DefaultTokenFile is read when neither variable is set and it exists.
const DefaultTokenFile = "/.dreadnode/token"

// Main runs the agent: `dn-agent [-- command args...]`. With a command it is
// the sandbox's init: it starts the command with the agent's stdio (so the
// engine's logs still hold its output), forwards the signals it receives to
// it, and exits with its exit code (128+N after signal N), so the sandbox
// ends when the command does. It returns the exit code.
func Main(args []string) int {
	var mainCmd []string
	for i, a := range args {
		if a == "--" {
			mainCmd = args[i+1:]
			args = args[:i]
			break
		}
	}
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "dn-agent: unexpected arguments %q; usage: dn-agent [-- command args...]\n", args)
		return 2
	}
	token, err := readToken()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dn-agent:", err)
		return 2
	}
	tokenSum, err := tokenSHA256(ownEnv().TokenSHA256)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dn-agent:", err)
		return 2
	}
	if token == "" && tokenSum == nil {
		// envd serves everyone until /init gives it a token; the agent is
		// reachable by every process of the sandbox (as root, it would run
		// their commands and write their files), so it refuses to start.
		fmt.Fprintf(os.Stderr, "dn-agent: no access token: set %s, %s or %s, or put the token in %s; refusing to serve without one\n",
			EnvToken, EnvTokenFile, EnvTokenSHA256, DefaultTokenFile)
		return 2
	}
	env := childEnv(os.Environ())
	if spec := ownEnv().MainUser; spec != "" {
		if id, err := userSpec(spec); err == nil {
			mainUser = &id // processes started without a user run as the image's USER
		}
	}
	if name := ownEnv().DefaultUser; name != "" {
		if id := lookupUser(name); id.uid != 0 { // root: the image has no such account
			defaultUser = &id
		}
	}
	defaultWorkdir = ownEnv().DefaultWorkdir
	reaper := NewReaper(true)
	srv := New(Config{Token: token, TokenSHA256: tokenSum, Env: env}, reaper)
	addr := ownEnv().Listen
	if addr == "" {
		addr = ":" + strconv.Itoa(Port)
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dn-agent: cannot listen:", err)
		return 2
	}
	if ownEnv().ExposeLoopback == "1" {
		go NewLoopbackForwarder().Run(context.Background()) // ends with the agent
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "dn-agent: serving stopped:", err)
		}
	}()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	// The template's start command, once the agent serves (its ready
	// command may talk to it) and the main command runs.
	templateUp := func() bool {
		if raw := ownEnv().Start; raw != "" {
			if err := runTemplateStart(reaper, env, raw, StartReadyTime); err != nil {
				fmt.Fprintln(os.Stderr, "dn-agent:", err)
				return false
			}
		}
		markReady()
		return true
	}
	if len(mainCmd) == 0 {
		if !templateUp() {
			return 1
		}
		<-sigs
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		return 0
	}
	exited := make(chan int, 1)
	pid, err := startMain(reaper, mainCmd, env, func(st syscall.WaitStatus) { exited <- exitCode(st) })
	if err != nil {
		fmt.Fprintf(os.Stderr, "dn-agent: the main command %q could not start: %v\n", strings.Join(mainCmd, " "), err)
		return 127
	}
	if !templateUp() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return 1
	}
	for {
		select {
		case sig := <-sigs:
			_ = syscall.Kill(pid, sig.(syscall.Signal))
		case code := <-exited:
			return code
		}
	}
}

// startMain starts the sandbox's own command with the agent's stdio.
func startMain(r *Reaper, cmd, env []string, done func(syscall.WaitStatus)) (int, error) {
	var sys *syscall.SysProcAttr
	if spec := ownEnv().MainUser; spec != "" {
		id, err := userSpec(spec)
		if err != nil {
			return 0, err
		}
		sys = &syscall.SysProcAttr{Credential: id.credential()}
		env = dedupEnv(append(append([]string(nil), env...), "HOME="+id.home))
	}
	path, err := lookPath(cmd[0], env, nil)
	if err != nil {
		return 0, err
	}
	return r.Start(func() (int, error) {
		p, err := os.StartProcess(path, cmd, &os.ProcAttr{Env: env, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}, Sys: sys})
		if err != nil {
			return 0, err
		}
		pid := p.Pid
		_ = p.Release()
		return pid, nil
	}, done)
}

func readToken() (string, error) {
	if t := ownEnv().Token; t != "" {
		return t, nil
	}
	file := ownEnv().TokenFile
	if file == "" {
		if _, err := os.Stat(DefaultTokenFile); err != nil {
			return "", nil // none here: Main then needs EnvTokenSHA256
		}
		file = DefaultTokenFile
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("cannot read the access token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("the access token file %s is empty", file)
	}
	return t, nil
}

// tokenSHA256 decodes EnvTokenSHA256 (nil when unset).
func tokenSHA256(v string) ([]byte, error) {
	if v == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(v)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%s must be 64 hex digits (a SHA-256)", EnvTokenSHA256)
	}
	return b, nil
}

// childEnv is the agent's environment without its own variables.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "DN_AGENT_") {
			out = append(out, kv)
		}
	}
	return out
}

// markReady creates the ready file, if one is asked for.
func markReady() {
	if f := ownEnv().ReadyFile; f != "" {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "dn-agent: cannot write the ready file:", err)
		}
	}
}
