package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ndjson"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// files is usable plus the provider's streaming filesystem (nil when the
// provider has none; callers fall back or refuse).
func (s *Service) files(r *http.Request) (*store.Record, compute.Files, error) {
	rec, err := s.usable(r)
	if err != nil {
		return nil, nil, err
	}
	fs, _ := s.prov.(compute.Files)
	return rec, fs, nil
}

func (s *Service) needFiles(r *http.Request) (*store.Record, compute.Files, error) {
	rec, fs, err := s.files(r)
	if err == nil && fs == nil {
		err = httpx.NewError(http.StatusBadRequest, "unsupported", "this deployment's provider has no filesystem API beyond /files")
	}
	return rec, fs, err
}

// byteRange is one parsed "Range: bytes=" value; ok is false when the
// header is absent or not a single range (then the whole file is sent, as
// RFC 9110 allows).
type byteRange struct {
	start, end int64 // end inclusive, -1 for "to the end"
	suffix     int64 // "bytes=-N"
	ok         bool
}

func parseRange(h string) byteRange {
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !found || strings.Contains(spec, ",") {
		return byteRange{}
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return byteRange{}
	}
	if a == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return byteRange{}
		}
		return byteRange{suffix: n, end: -1, ok: true}
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 {
		return byteRange{}
	}
	end := int64(-1)
	if b != "" {
		if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
			return byteRange{}
		}
	}
	return byteRange{start: start, end: end, ok: true}
}

// handleReadFileStream serves GET /files: streamed, with a single Range.
func (s *Service) handleReadFileStream(w http.ResponseWriter, r *http.Request) error {
	p, err := filePath(r)
	if err != nil {
		return err
	}
	rec, fs, err := s.files(r)
	if err != nil {
		return err
	}
	rg := parseRange(r.Header.Get("Range"))
	var (
		rc   io.ReadCloser
		info compute.FileInfo
	)
	if fs != nil {
		length := int64(-1)
		if rg.ok && rg.suffix == 0 && rg.end >= 0 {
			length = rg.end - rg.start + 1
		}
		rc, info, err = fs.OpenFile(r.Context(), rec.Ref(), p, rg.start, length)
	}
	if fs == nil || unsupported(err) {
		var data []byte
		if data, err = s.prov.ReadFile(r.Context(), rec.Ref(), p); err == nil {
			info.Size = int64(len(data))
			rc = io.NopCloser(bytes.NewReader(data))
			if rg.ok && rg.suffix == 0 && rg.start < int64(len(data)) { // the provider's stream above skips itself
				rc = io.NopCloser(bytes.NewReader(data[rg.start:]))
			}
		}
	}
	if err != nil {
		return providerErr("read "+p+" from", err)
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Accept-Ranges", "bytes")
	if !rg.ok {
		w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, rc)
		return nil
	}
	start, end := rg.start, rg.end
	if rg.suffix > 0 {
		start = max(info.Size-rg.suffix, 0)
		if _, err := io.CopyN(io.Discard, rc, start); err != nil && !errors.Is(err, io.EOF) {
			return providerErr("read "+p+" from", err)
		}
	}
	if start >= info.Size {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", info.Size))
		return httpx.NewError(http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable",
			fmt.Sprintf("Range: the file is %d bytes long; ask for bytes before that", info.Size))
	}
	if end < 0 || end >= info.Size {
		end = info.Size - 1
	}
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, info.Size))
	w.Header().Set("Content-Length", strconv.FormatInt(end-start+1, 10))
	w.WriteHeader(http.StatusPartialContent)
	_, _ = io.CopyN(w, rc, end-start+1)
	return nil
}

// handleWriteFileStream serves PUT /files: the body streams into the
// sandbox, with no size cap when the provider streams.
func (s *Service) handleWriteFileStream(w http.ResponseWriter, r *http.Request) error {
	p, err := filePath(r)
	if err != nil {
		return err
	}
	rec, fs, err := s.files(r)
	if err != nil {
		return err
	}
	err = errUnsupportedFiles
	if fs != nil {
		err = fs.CreateFile(r.Context(), rec.Ref(), p, r.Body, r.ContentLength)
	}
	if unsupported(err) {
		data, rerr := io.ReadAll(io.LimitReader(r.Body, MaxFileBytes+1))
		if rerr != nil {
			return httpx.NewError(400, "invalid_body", "could not read the file body: "+rerr.Error())
		}
		if len(data) > MaxFileBytes {
			return httpx.NewError(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("this provider takes files of at most %d bytes", MaxFileBytes))
		}
		err = s.prov.WriteFile(r.Context(), rec.Ref(), p, data)
	}
	if err != nil {
		return providerErr("write "+p+" in", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

var errUnsupportedFiles = fmt.Errorf("no streaming filesystem: %w", errors.ErrUnsupported)

func (s *Service) handleRemove(w http.ResponseWriter, r *http.Request) error {
	p, err := filePath(r)
	if err != nil {
		return err
	}
	return s.fsDo(w, r, "remove "+p+" in", func(ctx context.Context, fs compute.Files, ref compute.Ref) error {
		return fs.Remove(ctx, ref, p)
	})
}

// fsDo runs one filesystem operation whose success is a 204.
func (s *Service) fsDo(w http.ResponseWriter, r *http.Request, what string, op func(context.Context, compute.Files, compute.Ref) error) error {
	rec, fs, err := s.needFiles(r)
	if err != nil {
		return err
	}
	if err := op(r.Context(), fs, rec.Ref()); err != nil {
		return providerErr(what, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Service) handleListFS(w http.ResponseWriter, r *http.Request) error {
	p, err := filePath(r)
	if err != nil {
		return err
	}
	depth := apitypes.ParamFSDepthDefault
	if v := r.URL.Query().Get("depth"); v != "" {
		if depth, err = strconv.Atoi(v); err != nil || depth < apitypes.ParamFSDepthMinimum || depth > apitypes.ParamFSDepthMaximum {
			return httpx.InvalidQuery("depth", fmt.Sprintf("must be an integer between %d and %d", apitypes.ParamFSDepthMinimum, apitypes.ParamFSDepthMaximum))
		}
	}
	rec, fs, err := s.needFiles(r)
	if err != nil {
		return err
	}
	list, err := fs.ListDir(r.Context(), rec.Ref(), p, depth)
	if err != nil {
		return providerErr("list "+p+" in", err)
	}
	out := make([]apitypes.FileInfo, len(list))
	for i, f := range list {
		out[i] = apitypes.FileInfo(f)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func absField(field, v string) error {
	if v == "" || !strings.HasPrefix(v, "/") || strings.ContainsRune(v, 0) {
		return httpx.Invalid(field, "must be an absolute path, e.g. /home/user/dir")
	}
	if msg := pathTooLong(v); msg != "" {
		return httpx.Invalid(field, msg)
	}
	return nil
}

// Linux's bounds on a path (PATH_MAX, with its NUL) and on each of its
// names (NAME_MAX). Checked here so every route answers a longer path the
// same way, with a 400 naming the field: the agent would say ENAMETOOLONG,
// but the archive routes go through the engine, which answers a 500.
const (
	maxPathBytes = 4095
	maxNameBytes = 255
)

// pathTooLong says what is wrong with a path past Linux's bounds ("" when
// it is within them).
func pathTooLong(p string) string {
	if len(p) > maxPathBytes {
		return fmt.Sprintf("is %d bytes long; a path must be at most %d bytes (Linux's PATH_MAX)", len(p), maxPathBytes)
	}
	for name := range strings.SplitSeq(p, "/") {
		if len(name) > maxNameBytes {
			return fmt.Sprintf("has a name of %d bytes (%.20q...); each name in a path must be at most %d bytes (Linux's NAME_MAX)", len(name), name, maxNameBytes)
		}
	}
	return ""
}

func (s *Service) handleMkdir(w http.ResponseWriter, r *http.Request) error {
	var req apitypes.MakeDirectory
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	if err := absField("path", req.Path); err != nil {
		return err
	}
	return s.fsDo(w, r, "make directory "+req.Path+" in", func(ctx context.Context, fs compute.Files, ref compute.Ref) error {
		return fs.MakeDir(ctx, ref, req.Path)
	})
}

func (s *Service) handleMove(w http.ResponseWriter, r *http.Request) error {
	var req apitypes.MovePath
	if err := httpx.Decode(r, &req, nil); err != nil {
		return err
	}
	if err := absField("from", req.From); err != nil {
		return err
	}
	if err := absField("to", req.To); err != nil {
		return err
	}
	return s.fsDo(w, r, "move "+req.From+" to "+req.To+" in", func(ctx context.Context, fs compute.Files, ref compute.Ref) error {
		return fs.Move(ctx, ref, req.From, req.To)
	})
}

func (s *Service) handleGetArchive(w http.ResponseWriter, r *http.Request) error {
	p, err := filePath(r)
	if err != nil {
		return err
	}
	rec, fs, err := s.needFiles(r)
	if err != nil {
		return err
	}
	rc, err := fs.ReadArchive(r.Context(), rec.Ref(), p)
	if err != nil {
		return providerErr("download "+p+" from", err)
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
	return nil
}

func (s *Service) handlePutArchive(w http.ResponseWriter, r *http.Request) error {
	p, err := filePath(r)
	if err != nil {
		return err
	}
	return s.fsDo(w, r, "upload an archive to "+p+" in", func(ctx context.Context, fs compute.Files, ref compute.Ref) error {
		return fs.WriteArchive(ctx, ref, p, r.Body)
	})
}

// handleWatch streams a directory's changes as NDJSON until the client
// leaves. The first line, {"type":"ready"}, says the watch is in place.
func (s *Service) handleWatch(w http.ResponseWriter, r *http.Request) error {
	p, err := filePath(r)
	if err != nil {
		return err
	}
	rec, fs, err := s.needFiles(r)
	if err != nil {
		return err
	}
	out := ndjson.New(w, r)
	kctx, kcancel := httpx.KeyContext(r) // the watch ends with the key
	defer kcancel()
	g := s.guardStream(kctx, rec.ID)
	defer g.stop()
	err = fs.WatchDir(g.ctx, rec.Ref(), p, func(ev compute.FileEvent) error { return out.Line(ev) })
	if end, ok := g.ended(); ok {
		return out.End(end) // the sandbox was paused or deleted under the watch
	}
	if kerr := httpx.KeyEnded(kctx); kerr != nil {
		return out.EndKey(kerr)
	}
	if err == nil || r.Context().Err() != nil {
		return nil
	}
	return out.Finish(providerErr("watch "+p+" in", err))
}
