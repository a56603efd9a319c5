package agent

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
)

// keepEnded is how many ended processes stay listed for Connect (their
// output replayed, then their end), oldest dropped first.
const keepEnded = 256

// EndedOutputBytes bounds the output kept across all ended processes
// together: past it the oldest ended processes' output is dropped (they
// stay listed, with their exit, and a Connect replays no output). Without
// it keepEnded processes × OutputKeepBytes each could hold 256 MiB in the
// agent. The newest ended process always keeps its own (at most about
// OutputKeepBytes, below this bound).
const EndedOutputBytes = 32 << 20

// proc is one process the agent started.
type proc struct {
	pid     int
	tag     string
	config  *process.ProcessConfig
	started time.Time
	out     *outputLog
	readers sync.WaitGroup // the two output pipes' readers

	mu    sync.Mutex
	stdin *os.File // nil once closed, or when started without stdin
	tty   *os.File // a PTY's master; nil once ended, or when started without one
	pty   bool     // started with a PTY
	// stdinAtEnd: stdin was still open when the process ended.
	stdinAtEnd bool
	status     syscall.WaitStatus
	exited     bool
	endedSeq   int // order of ending, for keepEnded
}

// Processes is the agent's process table.
type Processes struct {
	reaper *Reaper
	env    []string

	mu          sync.Mutex
	byPID       map[int]*proc
	nEnded      int
	listedEnded int // ended processes in byPID (keepEnded)
	endedBytes  int // output they keep (EndedOutputBytes)
}

func newProcesses(r *Reaper, env []string) *Processes {
	return &Processes{reaper: r, env: env, byPID: map[int]*proc{}}
}

var (
	errNotFound = errors.New("not found")
	errStdin    = errors.New("stdin closed")
)

// startSpec is what Start needs, decoded from a StartRequest.
type startSpec struct {
	config *process.ProcessConfig
	tag    string
	stdin  bool
	pty    *termSize // nil: pipes
	user   identity
}

// start runs a process with its output captured into its log.
func (ps *Processes) start(s startSpec) (*proc, error) {
	cwd := s.user.home
	if defaultWorkdir != "" {
		cwd = defaultWorkdir // the template's WORKDIR, as E2B's envd
	}
	if s.config.Cwd != nil && *s.config.Cwd != "" {
		cwd = s.user.resolve(*s.config.Cwd)
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		return nil, &startError{msg: "cwd " + cwd + " is not a directory in the sandbox"}
	}
	path, err := lookPath(s.config.Cmd, ps.env, s.config.Envs)
	if err != nil {
		return nil, &startError{msg: err.Error()}
	}
	var pio *procIO
	if s.pty != nil {
		pio, err = openPTY(*s.pty, s.user)
	} else {
		pio, err = openPipes(s.stdin)
	}
	if err != nil {
		return nil, openError(err)
	}
	p := &proc{tag: s.tag, config: s.config, started: time.Now(), out: newOutputLog(), stdin: pio.stdin, tty: pio.tty, pty: pio.tty != nil}
	sys := pio.sys
	sys.Credential = s.user.credential()
	attr := &os.ProcAttr{
		Dir:   cwd,
		Env:   processEnv(ps.env, s.user, s.config.Envs),
		Files: pio.child,
		Sys:   sys,
	}
	argv := append([]string{s.config.Cmd}, s.config.Args...)
	p.readers.Add(len(pio.outputs)) // before the reaper may call ended, which waits for them
	_, err = ps.reaper.Start(func() (int, error) {
		pr, err := os.StartProcess(path, argv, attr)
		if err != nil {
			return 0, err
		}
		pid := pr.Pid
		_ = pr.Release() // the reaper waits for it, by pid
		ps.mu.Lock()
		p.pid = pid
		ps.byPID[pid] = p
		ps.mu.Unlock()
		return pid, nil
	}, func(st syscall.WaitStatus) { ps.ended(p, st) })
	pio.closeChild()
	if err != nil {
		p.readers.Add(-len(pio.outputs))
		pio.closeParent()
		return nil, forkError(err)
	}
	for _, o := range pio.outputs {
		go p.copy(o)
	}
	return p, nil
}

// procIO is both ends of a process's stdio: pipes, or a PTY.
type procIO struct {
	child      []*os.File // the child's stdin, stdout, stderr
	childOwned []*os.File // those of them the parent closes once it started
	outputs    []output   // read into the output log
	stdin      *os.File   // the write end of a stdin pipe
	tty        *os.File   // a PTY's master
	sys        *syscall.SysProcAttr
}

// output is one end the agent reads a process's output from.
type output struct {
	file *os.File
	from stream
}

// openPipes makes stdout and stderr pipes, and a stdin pipe when asked
// (else stdin reads nothing).
func openPipes(withStdin bool) (*procIO, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	pio := &procIO{
		child:      []*os.File{devNull(), outW, errW},
		childOwned: []*os.File{outW, errW},
		outputs:    []output{{file: outR, from: stdoutStream}, {file: errR, from: stderrStream}},
		// Own process group: a signal reaches the command and what it started.
		sys: &syscall.SysProcAttr{Setpgid: true},
	}
	if withStdin {
		r, w, err := os.Pipe()
		if err != nil {
			pio.closeChild()
			pio.closeParent()
			return nil, err
		}
		pio.child[0], pio.stdin = r, w
		pio.childOwned = append(pio.childOwned, r)
	}
	return pio, nil
}

func (pio *procIO) closeChild() {
	for _, f := range pio.childOwned {
		f.Close()
	}
}

func (pio *procIO) closeParent() {
	for _, o := range pio.outputs {
		o.file.Close()
	}
	if pio.stdin != nil {
		pio.stdin.Close()
	}
}

// ended records the exit; the log ends once the pipes are drained too.
func (ps *Processes) ended(p *proc, st syscall.WaitStatus) {
	p.readers.Wait()
	p.mu.Lock()
	p.status, p.exited = st, true
	if p.tty != nil {
		p.tty.Close()
		p.tty = nil
	}
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
		p.stdinAtEnd = true
	}
	p.mu.Unlock()
	ps.mu.Lock()
	ps.nEnded++
	p.endedSeq = ps.nEnded
	ps.listedEnded++
	ps.endedBytes += p.out.size() // the readers are done: it no longer grows
	ps.pruneLocked()
	ps.mu.Unlock()
	p.out.end()
}

// pruneLocked forgets the oldest ended processes past keepEnded, then
// drops the output of the oldest ended ones while those kept hold more
// than EndedOutputBytes together.
func (ps *Processes) pruneLocked() {
	if ps.endedBytes <= EndedOutputBytes && ps.listedEnded <= keepEnded {
		return
	}
	var ended []*proc
	for _, p := range ps.byPID {
		if p.endedSeq > 0 {
			ended = append(ended, p)
		}
	}
	sort.Slice(ended, func(i, j int) bool { return ended[i].endedSeq < ended[j].endedSeq })
	for len(ended) > keepEnded {
		ps.endedBytes -= ended[0].out.size()
		ps.listedEnded--
		delete(ps.byPID, ended[0].pid)
		ended = ended[1:]
	}
	for _, p := range ended {
		if ps.endedBytes <= EndedOutputBytes {
			break
		}
		ps.endedBytes -= p.out.discard()
	}
}

// readBufs are the output readers' buffers, shared: a reader holds one only
// while its process runs.
var readBufs = sync.Pool{New: func() any { b := make([]byte, chunkBytes); return &b }}

// copy reads one output into the log until every writer closed it (the
// process and whatever it left running with it): a pipe reads EOF, a PTY's
// master EIO. A PTY's master stays open (for input and resizes) until ended.
// Each read is kept in a slice of its own size, so a short output keeps a
// few bytes, not a read buffer.
func (p *proc) copy(o output) {
	defer p.readers.Done()
	if o.from != ptyStream {
		defer o.file.Close()
	}
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	for {
		n, err := o.file.Read(buf)
		if n > 0 {
			p.out.write(o.from, append([]byte(nil), buf[:n]...))
		}
		if err != nil {
			return
		}
	}
}

// find selects a process by pid or tag (the newest with that tag).
func (ps *Processes) find(sel *process.ProcessSelector) (*proc, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		if p, ok := ps.byPID[int(s.Pid)]; ok {
			return p, nil
		}
	case *process.ProcessSelector_Tag:
		var best *proc
		for _, p := range ps.byPID {
			if p.tag == s.Tag && (best == nil || p.started.After(best.started)) {
				best = p
			}
		}
		if best != nil {
			return best, nil
		}
	}
	return nil, errNotFound
}

// list lists the processes by pid: those that have not ended, and with
// ended the ended ones kept too.
func (ps *Processes) list(ended bool) []*proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []*proc
	for _, p := range ps.byPID {
		if ended || p.endedSeq == 0 {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

func (p *proc) writeStdin(data []byte) error {
	p.mu.Lock()
	w := p.stdin
	p.mu.Unlock()
	if w == nil {
		return errStdin
	}
	_, err := w.Write(data)
	return err
}

func (p *proc) closeStdin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdin == nil && p.stdinAtEnd {
		// It ended with its stdin open (often right after reading the
		// input just sent): closing it now is done, not an error.
		return nil
	}
	if p.stdin == nil {
		return errStdin
	}
	err := p.stdin.Close()
	p.stdin = nil
	return err
}

// signal sends sig to the process's group (it leads one), or to the
// process alone if it left it.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited {
		return errNotFound
	}
	if err := syscall.Kill(-p.pid, sig); err == nil {
		return nil
	}
	return syscall.Kill(p.pid, sig)
}

func (p *proc) end() (syscall.WaitStatus, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.exited
}

// startError is a process that could not start (the caller's input).
type startError struct{ msg string }

func (e *startError) Error() string { return e.msg }

// limitError is a process that could not start because the sandbox is out
// of something: processes (its pids limit), memory or file descriptors.
// Not the caller's input: the same request may work once processes end.
type limitError struct{ err error }

func (e *limitError) Error() string {
	switch {
	case errors.Is(e.err, syscall.EAGAIN):
		return "the sandbox hit its process limit (fork: " + e.err.Error() + "); end some of its processes and try again"
	case errors.Is(e.err, syscall.ENOMEM):
		return "the sandbox is out of memory (" + e.err.Error() + ")"
	}
	return "the sandbox is out of file descriptors (" + e.err.Error() + ")"
}

func (e *limitError) Unwrap() error { return e.err }

// forkError classifies a failed os.StartProcess: EAGAIN is the pids limit
// (or RLIMIT_NPROC), ENOMEM memory; the rest (not executable, bad format)
// is the caller's.
func forkError(err error) error {
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		return &limitError{err: err}
	}
	return &startError{msg: err.Error()}
}

// openError classifies a failure to open a process's pipes or PTY: out of
// file descriptors is a limit, the rest the agent's own.
func openError(err error) error {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM) {
		return &limitError{err: err}
	}
	return err
}

var (
	nullOnce sync.Once
	null     *os.File
)

// devNull is stdin for processes started without one; a scratch image may
// lack /dev/null, then an empty pipe (closed at once) stands in.
func devNull() *os.File {
	nullOnce.Do(func() {
		f, err := os.Open(os.DevNull)
		if err != nil {
			r, w, perr := os.Pipe()
			if perr != nil {
				return
			}
			w.Close()
			f = r
		}
		null = f
	})
	return null
}

// lookPath finds cmd on the PATH the process will have (its own envs win).
func lookPath(cmd string, base []string, envs map[string]string) (string, error) {
	if cmd == "" {
		return "", errors.New("cmd must not be empty")
	}
	if strings.Contains(cmd, "/") {
		return cmd, nil
	}
	path := envs["PATH"]
	if path == "" {
		path = getenv(base, "PATH")
	}
	if path == "" {
		path = defaultPath
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		f := filepath.Join(dir, cmd)
		if fi, err := os.Stat(f); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return f, nil
		}
	}
	return "", errors.New("executable " + cmd + " not found in PATH " + path)
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func getenv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// processEnv is the agent's environment, the user's HOME, USER and a PATH,
// then the request's envs.
func processEnv(base []string, id identity, envs map[string]string) []string {
	out := append([]string(nil), base...)
	out = append(out, "HOME="+id.home, "USER="+id.name, "LOGNAME="+id.name)
	if getenv(base, "PATH") == "" {
		out = append(out, "PATH="+defaultPath)
	}
	for k, v := range envs {
		out = append(out, k+"="+v)
	}
	return dedupEnv(out)
}

// dedupEnv keeps the last value of each key (execve passes duplicates on,
// and libc's getenv would read the first).
func dedupEnv(env []string) []string {
	seen := map[string]int{}
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if j, ok := seen[k]; ok {
			out[j] = kv
			continue
		}
		seen[k] = len(out)
		out = append(out, kv)
	}
	return out
}
