package agent

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The /files routes of envd.yaml: download and upload one file, streamed.

// fileUser is the user of a /files request: ?username=, else basic auth.
func fileUser(r *http.Request) identity {
	if u := r.URL.Query().Get("username"); u != "" {
		return lookupUser(u)
	}
	return requestUser(r.Header)
}

// filePath resolves ?path= for a /files request, answering 400 itself
// when no file can have it.
func filePath(w http.ResponseWriter, r *http.Request, u identity) (string, bool) {
	p := r.URL.Query().Get("path")
	if len(p) > maxPathBytes || strings.IndexByte(p, 0) >= 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path is not a usable path (over %d bytes, or holding a NUL byte)", maxPathBytes))
		return "", false
	}
	p = filepath.Clean(u.resolve(p))
	if msg := agentOwn(p); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return "", false
	}
	return p, true
}

// httpError answers an OS error with envd's codes, naming the path.
func httpError(w http.ResponseWriter, path string, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", path))
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.EINVAL):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' cannot be used: %v", path, errno(err)))
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.EXDEV):
		// The write lands by rename: a file the runtime mounts (/etc/hostname,
		// /etc/resolv.conf, /etc/hosts) cannot be replaced that way.
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a mount point (as /etc/hostname, /etc/hosts and /etc/resolv.conf are) and cannot be replaced: %v", path, errno(err)))
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		writeError(w, http.StatusForbidden, fmt.Sprintf("path '%s': %v", path, errno(err)))
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		writeError(w, http.StatusInsufficientStorage, "not enough disk space available")
	default:
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("path '%s': %v", path, errno(err)))
	}
}

func errno(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

func getFile(w http.ResponseWriter, r *http.Request) {
	p, ok := filePath(w, r, fileUser(r))
	if !ok {
		return
	}
	// Non-blocking: opening a named pipe for reading otherwise waits for a
	// writer, holding a thread of the agent past the request for good.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		httpError(w, p, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		httpError(w, p, err)
		return
	}
	if fi.IsDir() {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
		return
	}
	if fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a named pipe or a socket, which has no contents to download; read it with a command (POST /exec)", p))
		return
	}
	// A device may block in a read (a terminal) or never end (/dev/zero):
	// the read ends with the request. SetReadDeadline fails, harmlessly, on
	// a file the poller cannot wait on, whose reads never block.
	stop := context.AfterFunc(r.Context(), func() { _ = f.SetReadDeadline(time.Now()) })
	defer stop()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(p)}))
	if acceptsGzip(r) && r.Header.Get("Range") == "" {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Vary", "Accept-Encoding")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // the CPU is the sandbox's: spend little of it
		_, _ = io.Copy(gz, f)
		_ = gz.Close()
		return
	}
	if fi.Mode().IsRegular() && fi.Size() > 0 {
		http.ServeContent(w, r, "", fi.ModTime(), f) // Range, If-Modified-Since
		return
	}
	_, _ = io.Copy(w, f) // a device, or a /proc file (its size says 0): no size to announce
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}

type uploaded struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// postFile writes the body (octet-stream, or the multipart "file" parts) to
// a temporary name beside the target and renames it on completion, so a
// body cut short leaves nothing behind.
func postFile(w http.ResponseWriter, r *http.Request) {
	u := fileUser(r)
	p, ok := filePath(w, r, u)
	if !ok {
		return
	}
	hasPath := r.URL.Query().Get("path") != ""
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []uploaded
	switch mt {
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, "the multipart body is malformed: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				continue
			}
			target := p
			if !hasPath {
				name := rawFileName(part)
				if name == "" {
					writeError(w, http.StatusBadRequest, "a multipart file part without a filename needs the path query parameter")
					return
				}
				target = filepath.Clean(u.resolve(name))
			} else if len(out) > 0 {
				writeError(w, http.StatusBadRequest, "path names one file; send several files without path, each part's filename naming its file")
				return
			}
			if !writeFile(w, target, part, u) {
				return
			}
			out = append(out, uploaded{Path: target, Name: filepath.Base(target), Type: "file"})
		}
		if len(out) == 0 {
			writeError(w, http.StatusBadRequest, `the multipart body has no part named "file"`)
			return
		}
	default:
		if !hasPath {
			writeError(w, http.StatusBadRequest, "path is required for an application/octet-stream upload")
			return
		}
		if !writeFile(w, p, r.Body, u) {
			return
		}
		out = append(out, uploaded{Path: p, Name: filepath.Base(p), Type: "file"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// writeFile streams body into target; on failure it has answered.
func writeFile(w http.ResponseWriter, target string, body io.Reader, u identity) bool {
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", target))
		return false
	}
	dir := filepath.Dir(target)
	if err := mkdirAllAs(dir, u); err != nil {
		httpError(w, dir, err)
		return false
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+uploadTempInfix+"*")
	if err != nil {
		httpError(w, dir, err)
		return false
	}
	_, err = copyInChunks(tmp, body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		chownNew(tmp.Name(), u)
		err = os.Rename(tmp.Name(), target)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		var pe *fs.PathError
		var le *os.LinkError
		if !errors.As(err, &pe) && !errors.As(err, &le) && !errors.Is(err, syscall.ENOSPC) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("the upload of '%s' was cut short: %v", target, err))
			return false
		}
		httpError(w, target, err)
		return false
	}
	return true
}

// mkdirAllAs makes dir and its missing parents, owned by u.
func mkdirAllAs(dir string, u identity) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if err := mkdirAllAs(filepath.Dir(dir), u); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	chownNew(dir, u)
	return nil
}

// rawFileName is the part's filename as sent: a path (part.FileName keeps
// only its last element).
func rawFileName(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// writeChunk is the size of each write of an upload. A multipart part
// reads 4 KiB at a time, and a write on the container's filesystem can be
// a round trip to a FUSE daemon (fuse-overlayfs): gathered into large
// writes, an upload costs a few hundred of them, not tens of thousands.
const writeChunk = 1 << 20

var chunks = sync.Pool{New: func() any { b := make([]byte, writeChunk); return &b }}

// copyInChunks copies src to dst in writes of writeChunk bytes (the last
// one shorter), returning the bytes written and the first error of either.
func copyInChunks(dst io.Writer, src io.Reader) (int64, error) {
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	buf := *bp
	var total int64
	for {
		// Fill buf by hand: io.ReadFull would turn a body's own
		// io.ErrUnexpectedEOF (cut short) into a clean end.
		n := 0
		var err error
		for n < len(buf) && err == nil {
			var m int
			m, err = src.Read(buf[n:])
			n += m
		}
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			total += int64(w)
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// uploadTempInfix marks the file an upload is written to before it is
// renamed into place (so a reader never sees half a file): the watchers
// leave these out, as envd's clients see only the file itself appear.
const uploadTempInfix = ".dn-upload-"

// isUploadTemp reports whether p names an upload's temporary file.
func isUploadTemp(p string) bool {
	base := filepath.Base(p)
	return strings.HasPrefix(base, ".") && strings.Contains(base, uploadTempInfix)
}
