package agent

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PUT /archive?path=DIR extracts the tar stream of the body into DIR (our
// route, not envd's: the backend's §6 archive upload). Two rules make a
// hostile archive, or a hostile sandbox that planted symlinks before it
// arrives, land nowhere but DIR:
//   - every name is resolved beneath DIR (openat2 RESOLVE_BENEATH): a
//     symlink of the archive or of the sandbox that leads out of DIR ends
//     the extraction with a 400 naming the entry, before anything is
//     written through it;
//   - everything is written as the sandbox's user (the request's, else the
//     image's USER, as processes run): the kernel checks each write as that
//     user, and files belong to it, not to the tar's owners.
//
// Device, FIFO and socket entries are refused; set-user-ID and set-group-ID
// bits are dropped.

// archiveEntryError is an entry the extraction refuses (a 400).
type archiveEntryError struct {
	name string
	msg  string
}

func (e *archiveEntryError) Error() string { return fmt.Sprintf("entry %q: %s", e.name, e.msg) }

func putArchive(w http.ResponseWriter, r *http.Request) {
	u := processUser(r.Header)
	dir, ok := filePath(w, r, u)
	if !ok {
		return
	}
	if err := extractAs(u, dir, r.Body); err != nil {
		var entry *archiveEntryError
		switch {
		case errors.As(err, &entry):
			writeError(w, http.StatusBadRequest, fmt.Sprintf("the archive cannot be extracted into %s: %v", dir, err))
		case errors.Is(err, tar.ErrHeader), errors.Is(err, io.ErrUnexpectedEOF):
			writeError(w, http.StatusBadRequest, fmt.Sprintf("the body is not a tar archive that can be extracted into %s: %v", dir, err))
		default:
			httpError(w, dir, err)
		}
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// extractAs extracts tar stream body into dir as user u. The work runs on
// an OS thread of its own whose filesystem identity is u's (setfsuid and
// setfsgid act on the calling thread only, and drop root's file
// capabilities with it); the thread is never handed back to the runtime
// (the goroutine ends locked, so the thread ends with it).
func extractAs(u identity, dir string, body io.Reader) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := becomeFS(u); err != nil {
			done <- err
			return
		}
		done <- extract(dir, body)
	}()
	return <-done
}

// becomeFS gives the calling thread u's filesystem identity.
func becomeFS(u identity) error {
	if u.uid == 0 {
		return nil
	}
	groups := u.groups
	if len(groups) == 0 {
		groups = []uint32{u.gid}
	}
	// The raw system call (not syscall.Setgroups, which the runtime applies
	// to every thread): this thread's supplementary groups only.
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&groups[0])), 0); e != 0 {
		return fmt.Errorf("taking the groups of user %s: %w", u.name, e)
	}
	if err := unix.Setfsgid(int(u.gid)); err != nil {
		return err
	}
	if err := unix.Setfsuid(int(u.uid)); err != nil {
		return err
	}
	// setfsuid reports no failure; asking again (-1 changes nothing) tells.
	if got, _ := unix.SetfsuidRetUid(-1); got != int(u.uid) {
		return fmt.Errorf("the agent cannot write as user %s (uid %d): it lacks CAP_SETUID", u.name, u.uid)
	}
	return nil
}

// extract writes the archive's entries beneath dir, which it makes when
// missing.
func extract(dir string, body io.Reader) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(root)
	x := extractor{root: root, dir: dir}
	tr := tar.NewReader(body)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := x.entry(h, tr); err != nil {
			return err
		}
	}
}

type extractor struct {
	root int    // the target directory
	dir  string // its path, for messages
}

// entry writes one header (and its content from r).
func (x *extractor) entry(h *tar.Header, r io.Reader) error {
	name := path.Clean(strings.TrimLeft(h.Name, "/"))
	if name == ".." || strings.HasPrefix(name, "../") {
		return &archiveEntryError{h.Name, "its name leads out of " + x.dir}
	}
	if name == "." {
		return nil // the target directory itself
	}
	mode := uint32(h.Mode) & 0o1777 // no set-user-ID or set-group-ID bits
	if h.Typeflag == '\x00' {       // old tars' regular file (tar.TypeRegA)
		h.Typeflag = tar.TypeReg
	}
	parent, base := path.Split(name)
	pfd, err := x.dirBeneath(h.Name, strings.TrimSuffix(parent, "/"))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	switch h.Typeflag {
	case tar.TypeDir:
		if err := unix.Mkdirat(pfd, base, mode|0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return x.osErr(h.Name, err)
		}
		fd, err := x.openBeneath(h.Name, name, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_ = unix.Fchmod(fd, mode)
	case tar.TypeReg:
		if err := replaceable(pfd, base); err != nil {
			return x.osErr(h.Name, err)
		}
		fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if err != nil {
			return x.osErr(h.Name, err)
		}
		f := os.NewFile(uintptr(fd), name)
		_, err = io.Copy(f, r)
		if err == nil {
			err = f.Chmod(os.FileMode(mode & 0o777))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return x.osErr(h.Name, err)
		}
	case tar.TypeSymlink:
		// Made as given (a link may point anywhere, as in any tar); what
		// is beneath dir is what later entries may pass through.
		if err := replaceable(pfd, base); err != nil {
			return x.osErr(h.Name, err)
		}
		if err := unix.Symlinkat(h.Linkname, pfd, base); err != nil {
			return x.osErr(h.Name, err)
		}
		return nil
	case tar.TypeLink:
		target := path.Clean(strings.TrimLeft(h.Linkname, "/"))
		tparent, tbase := path.Split(target)
		if target == "." || target == ".." || strings.HasPrefix(target, "../") {
			return &archiveEntryError{h.Name, "it links to " + h.Linkname + ", outside " + x.dir}
		}
		tfd, err := x.dirBeneath(h.Name, strings.TrimSuffix(tparent, "/"))
		if err != nil {
			return err
		}
		defer unix.Close(tfd)
		if err := replaceable(pfd, base); err != nil {
			return x.osErr(h.Name, err)
		}
		if err := unix.Linkat(tfd, tbase, pfd, base, 0); err != nil {
			return x.osErr(h.Name, err)
		}
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return &archiveEntryError{h.Name, fmt.Sprintf("entries of type %q (devices, FIFOs) are not extracted", h.Typeflag)}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(h.AccessTime.UnixNano()), unix.NsecToTimespec(h.ModTime.UnixNano())}
	if h.AccessTime.IsZero() {
		ts[0] = ts[1]
	}
	_ = unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
	return nil
}

// dirBeneath opens directory rel (relative to the target, "" for the
// target itself), making what is missing of it.
func (x *extractor) dirBeneath(entry, rel string) (int, error) {
	if rel == "" || rel == "." {
		fd, err := unix.Dup(x.root)
		return fd, err
	}
	fd, err := x.openBeneath(entry, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err == nil || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	parent, base := path.Split(rel)
	pfd, err := x.dirBeneath(entry, strings.TrimSuffix(parent, "/"))
	if err != nil {
		return -1, err
	}
	err = unix.Mkdirat(pfd, base, 0o755)
	unix.Close(pfd)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, x.osErr(entry, err)
	}
	return x.openBeneath(entry, rel, unix.O_RDONLY|unix.O_DIRECTORY)
}

// openBeneath opens rel beneath the target: any symlink on the way that
// leads out of it (absolute, or up through ..) is refused by the kernel.
func (x *extractor) openBeneath(entry, rel string, flags uint64) (int, error) {
	fd, err := unix.Openat2(x.root, rel, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return -1, &archiveEntryError{entry, "its path passes through a symlink that leads out of " + x.dir}
	case errors.Is(err, unix.ENOTDIR):
		return -1, &archiveEntryError{entry, "a parent of it is not a directory"}
	}
	return -1, x.osErr(entry, err)
}

// replaceable removes what is at base in pfd unless it is a directory, so
// the entry replaces a file or a symlink instead of writing through it.
func replaceable(pfd int, base string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil // a file over a directory fails at open (EISDIR), as it should
	}
	return unix.Unlinkat(pfd, base, 0)
}

// osErr keeps the system's error (httpError maps it) with the entry's name.
func (x *extractor) osErr(entry string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &os.PathError{Op: "extract", Path: path.Join(x.dir, entry), Err: errno}
	}
	return err
}
