package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"golang.org/x/sys/unix"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// loadCheckpoint is the fast checkpoint on an overlay storage driver
// (overlay2, fuse-overlayfs): the container's writable layer is its upper
// directory on the host, tarred as one image layer (overlay's whiteouts
// turned into the image format's .wh. entries) and loaded as a new image on
// top of the container's image, whose layers the engine already holds (a
// load skips the layers it has). The engine's own commit computes the same
// layer by comparing the whole filesystem with the image's on
// fuse-overlayfs (naive diff): minutes for a few bytes under load.
//
// The new image's configuration is the container's image's (its command,
// not the agent wrapping the container runs), with labels added. The
// container is paused only while its layer is read into a file (a paused
// one stays paused): it runs again while the engine loads the copy.
// Everything in the layer is the sandbox's, so hostile: nothing is
// followed (symlinks are written as links), files are opened without
// following links, and only regular files, directories, links and
// whiteouts are kept.
func (p *Provider) loadCheckpoint(ctx context.Context, id, ref string, labels map[string]string) (compute.CommittedImage, error) {
	c, err := p.cli.ContainerInspect(ctx, id)
	if err != nil {
		return compute.CommittedImage{}, err
	}
	img, err := p.cli.ImageInspect(ctx, c.Image)
	if err != nil {
		return compute.CommittedImage{}, err
	}
	return p.loadLayer(ctx, c, img, ref, labels)
}

// loadLayer is loadCheckpoint for container c of image img, both inspected.
func (p *Provider) loadLayer(ctx context.Context, c container.InspectResponse, img image.InspectResponse, ref string, labels map[string]string) (compute.CommittedImage, error) {
	var none compute.CommittedImage
	upper := ""
	if c.GraphDriver.Data != nil {
		upper = c.GraphDriver.Data["UpperDir"]
	}
	if upper == "" || (c.GraphDriver.Name != "overlay2" && c.GraphDriver.Name != "fuse-overlayfs") {
		return none, errors.New("not an overlay writable layer")
	}
	if _, err := os.Stat(upper); err != nil {
		return none, err // the engine runs elsewhere (a remote DOCKER_HOST)
	}
	layer, err := os.CreateTemp("", "dn-checkpoint-*.tar")
	if err != nil {
		return none, err
	}
	defer func() { _ = layer.Close(); _ = os.Remove(layer.Name()) }()
	thaw := func() {}
	if c.State != nil && c.State.Running && !c.State.Paused {
		if err := p.cli.ContainerPause(ctx, c.ID); err != nil {
			return none, err
		}
		var once sync.Once
		thaw = func() {
			once.Do(func() {
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				_ = p.cli.ContainerUnpause(uctx, c.ID)
			})
		}
		defer thaw()
	}
	sum := sha256.New()
	err = tarUpper(upper, io.MultiWriter(layer, sum))
	// The layer is in the file: the sandbox runs on while the engine loads it.
	thaw()
	if err != nil {
		return none, fmt.Errorf("reading the writable layer: %w", err)
	}
	diffID := "sha256:" + hex.EncodeToString(sum.Sum(nil))
	var cfg any = map[string]any{"Labels": labels}
	if img.Config != nil {
		c := *img.Config
		c.Labels = mergeLabels(c.Labels, labels)
		cfg = c
	}
	created := time.Now().UTC()
	config, err := json.Marshal(map[string]any{
		"architecture": img.Architecture, "os": img.Os, "config": cfg, "created": created,
		"rootfs": map[string]any{"type": "layers", "diff_ids": append(append([]string(nil), img.RootFS.Layers...), diffID)},
	})
	if err != nil {
		return none, err
	}
	// The parents' layers are named but not sent: the engine has them.
	layers := make([]string, 0, len(img.RootFS.Layers)+1)
	for i := range img.RootFS.Layers {
		layers = append(layers, fmt.Sprintf("parent%d/layer.tar", i))
	}
	layers = append(layers, "layer.tar")
	tags := []string{}
	if ref != "" {
		tags = append(tags, ref)
	}
	manifest, _ := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": tags, "Layers": layers}})
	imageID := fmt.Sprintf("sha256:%x", sha256.Sum256(config))
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeLoadArchive(pw, manifest, config, layer)) }()
	resp, err := p.cli.ImageLoad(ctx, pr)
	if err != nil {
		_ = pr.CloseWithError(err)
		return none, err
	}
	defer func() { _ = resp.Body.Close() }()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if strings.Contains(string(out), `"error"`) {
		return none, fmt.Errorf("loading the checkpoint: %s", out)
	}
	loaded, err := p.cli.ImageInspect(ctx, imageID)
	if err != nil {
		return none, fmt.Errorf("loading the checkpoint: %s", out)
	}
	return compute.CommittedImage{ID: imageID, Name: ref, SizeBytes: loaded.Size, CreatedAt: created}, nil
}

func mergeLabels(base, add map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(add))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

// writeLoadArchive writes the archive ImageLoad reads: manifest, config,
// the one new layer.
func writeLoadArchive(w io.Writer, manifest, config []byte, layer *os.File) error {
	tw := tar.NewWriter(w)
	for name, b := range map[string][]byte{"manifest.json": manifest, "config.json": config} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	st, err := layer.Stat()
	if err != nil {
		return err
	}
	if _, err := layer.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "layer.tar", Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, layer); err != nil {
		return err
	}
	return tw.Close()
}

// opaqueXattrs mark a directory that hides the lower layers' entries.
var opaqueXattrs = []string{"trusted.overlay.opaque", "user.overlay.opaque", "user.fuseoverlayfs.opaque"}

// tarUpper writes overlay upper directory dir as an image layer.
//
// fuse-overlayfs also keeps its markers as files: ".wh..wh..opq" (already
// the image format's) and ".wh..opq" (its own, written as the former); a
// marker met twice is written once, since a layer cannot hold one path twice.
func tarUpper(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	seen := map[string]bool{}
	marker := func(name string, at time.Time) error {
		if seen[name] {
			return nil
		}
		seen[name] = true
		return tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, ModTime: at})
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		switch mode := fi.Mode(); {
		case mode&fs.ModeCharDevice != 0:
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Rdev == 0 { // overlay's whiteout
				return marker(whiteout(name), fi.ModTime())
			}
			return nil
		case mode.IsDir():
			hdr, err := tar.FileInfoHeader(fi, "")
			if err != nil {
				return err
			}
			hdr.Name = name + "/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if opaque(path) {
				return marker(name+"/.wh..wh..opq", fi.ModTime())
			}
			return nil
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			hdr, err := tar.FileInfoHeader(fi, target)
			if err != nil {
				return err
			}
			hdr.Name = name
			return tw.WriteHeader(hdr)
		case mode.IsRegular() && (d.Name() == ".wh..opq" || d.Name() == ".wh..wh..opq"):
			return marker(filepath.ToSlash(filepath.Join(filepath.Dir(rel), ".wh..wh..opq")), fi.ModTime())
		case mode.IsRegular() && strings.HasPrefix(d.Name(), ".wh."):
			return marker(name, fi.ModTime())
		case mode.IsRegular():
			return tarFile(tw, path, name, fi)
		}
		return nil // fifos, sockets, devices: not part of a checkpoint
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func whiteout(name string) string {
	dir, base := filepath.Split(name)
	return dir + ".wh." + base
}

func opaque(path string) bool {
	buf := make([]byte, 8)
	for _, x := range opaqueXattrs {
		if n, err := unix.Lgetxattr(path, x, buf); err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// tarFile writes one regular file, opened without following a link (the
// container is paused: nothing swaps it meanwhile) and copied for exactly
// the size stated.
func tarFile(tw *tar.Writer, path, name string, fi fs.FileInfo) error {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	hdr, err := tar.FileInfoHeader(fi, "")
	if err != nil {
		return err
	}
	hdr.Name = name
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, fi.Size()))
	if err == nil && n < fi.Size() {
		_, err = io.CopyN(tw, zeroReader{}, fi.Size()-n) // shrank meanwhile: keep the archive whole
	}
	return err
}

type zeroReader struct{}

func (zeroReader) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}
