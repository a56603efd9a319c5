// Package agent is the in-sandbox agent (dn-agent): one static binary that
// speaks E2B envd's wire contract (../shared/e2b: process.proto,
// filesystem.proto, envd.yaml) on port 49983, so the backend reaches every
// sandbox, Docker or E2B, with the same Connect clients (envdpb).
//
// It keeps each process's output in a ring buffer (the last OutputKeepBytes;
// the ended ones' together at most EndedOutputBytes), so a later Connect,
// from any backend replica, replays it; it reaps the
// orphans of the sandbox when it runs as PID 1 (see Reaper), and it needs
// nothing from the image: no shell, no python, no libc.
//
// Everything that reaches it comes from the backend, but everything it runs
// belongs to the sandbox: its bounds (output kept, watch events queued,
// listing size) keep a process that floods it from growing it without end.
package agent

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"os"
	"strings"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/filesystem/filesystemconnect"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdsign"
)

// Port is envd's port, which E2B's SDKs and the router dial.
const Port = 49983

// EnvdVersion is the envd version this agent answers to: only as high as
// the features it implements (recursive watch 0.1.4, the stdin flag and
// CloseStdin 0.3.0). E2B's SDKs turn features on by it.
const EnvdVersion = "0.3.0"

// TokenHeader carries the access token (envd.yaml AccessTokenAuth).
const TokenHeader = "X-Access-Token"

// compressMin leaves messages under 4 KiB uncompressed. Connect compresses
// every message a client accepts gzip for by default: each small event (a
// start, a line of output, an end) then cost a flate writer's reset (its
// tables, about 100 µs of the sandbox's CPU on a streamed exec's path to
// its first byte) and kept a pooled writer of about a MiB resident, for a
// few bytes saved.
var compressMin = connect.WithCompressMinBytes(4 << 10)

// Config configures a Server.
type Config struct {
	// Token is the access token every request but /health must carry in
	// X-Access-Token; with neither it nor TokenSHA256 every request but
	// /health is refused (envd before /init accepts every request; an
	// agent reachable by the sandbox's own processes must not).
	Token string
	// TokenSHA256, when set, is the SHA-256 of the token instead (Token is
	// then ignored): the agent need not know the token to check it.
	TokenSHA256 []byte
	// Env is the environment every process starts with (before its own
	// envs); nil takes the agent's own environment.
	Env []string
}

// Server serves envd's Connect services and HTTP routes.
type Server struct {
	cfg   Config
	procs *Processes
	fs    *Filesystem
	mux   *http.ServeMux
	trim  idleTrim // memory handed back once quiet (memory.go)
}

// New returns a server whose processes are waited for by reaper.
func New(cfg Config, reaper *Reaper) *Server {
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	s := &Server{cfg: cfg, procs: newProcesses(reaper, cfg.Env), fs: newFilesystem(), mux: http.NewServeMux()}
	s.mux.Handle(processconnect.NewProcessHandler(&processService{s.procs}, compressMin))
	s.mux.Handle(filesystemconnect.NewFilesystemHandler(s.fs, compressMin))
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Envd-Version", EnvdVersion)
		w.WriteHeader(http.StatusNoContent)
	})
	s.mux.HandleFunc("GET /envs", s.envs)
	s.mux.HandleFunc("GET /files", s.signed(envdsign.Read, getFile))
	s.mux.HandleFunc("POST /files", s.signed(envdsign.Write, postFile))
	s.mux.HandleFunc("PUT /archive", putArchive) // ours, not envd's: archive.go
	return s
}

// Close stops the server's watchers (processes go on: they belong to the sandbox).
func (s *Server) Close() { s.fs.close(); s.trim.stop() }

// ServeHTTP checks the token, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/health" && !fileRoute(r) && !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "the access token in "+TokenHeader+" is missing or wrong")
		return
	}
	defer s.trim.ended()
	guardEnvelopes(r)
	s.mux.ServeHTTP(w, r)
}

// authorized compares the token in constant time, so its bytes cannot be
// guessed one at a time from the answer's timing.
func (s *Server) authorized(r *http.Request) bool {
	got := r.Header.Get(TokenHeader)
	if s.cfg.TokenSHA256 != nil {
		sum := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(sum[:], s.cfg.TokenSHA256) == 1
	}
	if s.cfg.Token == "" {
		return false // no token configured: nothing is authorized (fail closed)
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1
}

func (s *Server) envs(w http.ResponseWriter, _ *http.Request) {
	out := map[string]string{}
	for _, kv := range s.cfg.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// writeError answers envd's error body {"message", "code"}.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"message": msg, "code": code})
}
