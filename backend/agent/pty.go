package agent

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/creack/pty"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
)

// A process started with a PTY (envd's StartRequest.pty) runs as the leader
// of its own session with the terminal's slave as stdin, stdout, stderr and
// controlling terminal; the agent keeps the master: what the process prints
// is read from it (sent as pty data events), SendInput's pty input is
// written to it, and Update resizes it (the process gets SIGWINCH).

// Default size of a PTY whose StartRequest gives none.
const (
	defaultCols = 80
	defaultRows = 24
)

// termSize is a PTY's size, checked (a winsize holds 16 bits each).
type termSize struct{ cols, rows uint16 }

// ptySize reads a request's PTY size; field names the request field for
// the error.
func ptySize(p *process.PTY, field string) (termSize, error) {
	s := p.GetSize()
	if s == nil {
		return termSize{cols: defaultCols, rows: defaultRows}, nil
	}
	if s.GetCols() < 1 || s.GetCols() > 0xffff {
		return termSize{}, fmt.Errorf("%s.size.cols must be from 1 to 65535, got %d", field, s.GetCols())
	}
	if s.GetRows() < 1 || s.GetRows() > 0xffff {
		return termSize{}, fmt.Errorf("%s.size.rows must be from 1 to 65535, got %d", field, s.GetRows())
	}
	return termSize{cols: uint16(s.GetCols()), rows: uint16(s.GetRows())}, nil
}

func (t termSize) winsize() *pty.Winsize { return &pty.Winsize{Cols: t.cols, Rows: t.rows} }

// openPTY opens a terminal of size for a process run as user.
func openPTY(size termSize, user identity) (*procIO, error) {
	master, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("opening a PTY: %w", err)
	}
	if err := pty.Setsize(master, size.winsize()); err != nil {
		master.Close()
		slave.Close()
		return nil, fmt.Errorf("sizing the PTY: %w", err)
	}
	if c := user.credential(); c != nil {
		// Its terminal is the user's, as login makes it (so it may reopen
		// /dev/pts/N, e.g. for a password prompt).
		_ = slave.Chown(int(c.Uid), int(c.Gid))
	}
	return &procIO{
		child:      []*os.File{slave, slave, slave},
		childOwned: []*os.File{slave},
		outputs:    []output{{file: master, from: ptyStream}},
		tty:        master,
		sys:        &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0},
	}, nil
}

var errNoPTY = errors.New("no PTY")

// writePTY writes input to the process's terminal, as typed.
func (p *proc) writePTY(data []byte) error {
	p.mu.Lock()
	tty := p.tty
	p.mu.Unlock()
	if tty == nil {
		return errNoPTY
	}
	_, err := tty.Write(data)
	return err
}

// resize sets the terminal's size; the kernel sends SIGWINCH to its
// foreground process group.
func (p *proc) resize(size termSize) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty == nil {
		return errNoPTY
	}
	return pty.Setsize(p.tty, size.winsize())
}

func (p *proc) hasPTY() bool { return p.pty }
