package templatebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/docker/docker/client"
)

// Images made without a container. ContainerCommit diffs the container's
// filesystem against its image, which on storage drivers without a native
// diff (fuse-overlayfs, vfs) walks the whole root filesystem: a minute per
// commit on a loaded host. A configuration change (ENV, WORKDIR, USER, the
// start label) adds no layer, and a COPY's layer is the tar the step
// writes anyway: both are loaded as an image archive whose manifest lists
// the parent's layers (present in the engine, so the archive leaves them
// out: the engine only reads a layer it lacks) plus the new one, if any.

// imageConfig is what a loaded image changes of its parent's configuration.
type imageConfig struct {
	st     state
	labels map[string]string
}

// loadImage makes the image parentID plus layer (a tar; nil: none) with
// cfg, and returns its id.
func (r *run) loadImage(ctx context.Context, parentID string, cfg imageConfig, layer *os.File) (string, error) {
	ins, err := r.b.h.Client.ImageInspect(ctx, parentID)
	if err != nil {
		return "", err
	}
	raw, err := json.Marshal(ins.Config)
	if err != nil {
		return "", err
	}
	conf := map[string]any{}
	if err := json.Unmarshal(raw, &conf); err != nil {
		return "", err
	}
	conf["Env"] = cfg.st.Env
	conf["WorkingDir"] = cfg.st.Dir
	conf["User"] = cfg.st.User
	labels := map[string]string{}
	if ins.Config != nil {
		for k, v := range ins.Config.Labels {
			labels[k] = v
		}
	}
	for k, v := range r.labels(cfg.labels) {
		labels[k] = v
	}
	conf["Labels"] = labels
	diffIDs := append([]string(nil), ins.RootFS.Layers...)
	var layerName string
	if layer != nil {
		h := sha256.New()
		if _, err := layer.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
		if _, err := io.Copy(h, layer); err != nil {
			return "", err
		}
		diffIDs = append(diffIDs, "sha256:"+hex.EncodeToString(h.Sum(nil)))
	}
	image := map[string]any{
		"architecture": ins.Architecture, "os": ins.Os, "created": time.Now().UTC().Format(time.RFC3339Nano),
		"config": conf, "rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	}
	cfgJSON, err := json.Marshal(image)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(cfgJSON)
	id := hex.EncodeToString(sum[:])
	layers := make([]string, len(diffIDs))
	for i := range diffIDs {
		layers[i] = strconv.Itoa(i) + "/layer.tar" // absent but the last new one: the engine has them
	}
	if layer != nil {
		layerName = layers[len(layers)-1]
	}
	manifest, _ := json.Marshal([]map[string]any{{"Config": id + ".json", "RepoTags": nil, "Layers": layers}})

	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := addFile(tw, id+".json", bytes.NewReader(cfgJSON), int64(len(cfgJSON)))
		if err == nil {
			err = addFile(tw, "manifest.json", bytes.NewReader(manifest), int64(len(manifest)))
		}
		if err == nil && layer != nil {
			var st os.FileInfo
			if st, err = layer.Stat(); err == nil {
				if _, err = layer.Seek(0, io.SeekStart); err == nil {
					err = addFile(tw, layerName, layer, st.Size())
				}
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	qctx, cancel := quiet(ctx)
	defer cancel()
	resp, err := r.b.h.Client.ImageLoad(qctx, pr, client.ImageLoadWithQuiet(true))
	if err != nil {
		pr.CloseWithError(err)
		return "", err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", err
		}
		if m.Error != "" {
			return "", fmt.Errorf("loading the image: %s", m.Error)
		}
	}
	r.mu.Lock()
	r.images = append(r.images, "sha256:"+id)
	r.mu.Unlock()
	return "sha256:" + id, nil
}

func addFile(tw *tar.Writer, name string, rd io.Reader, size int64) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := io.CopyN(tw, rd, size)
	return err
}
