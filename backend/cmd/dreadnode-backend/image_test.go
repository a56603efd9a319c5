package main

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The deployment image built by `make image-backend`'s script starts from
// scratch with the Docker socket mounted, and answers /healthz and /readyz.
func TestBackendImageServesHealthAndReadiness(t *testing.T) {
	const image = "dreadnode/backend:imagetest"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, filepath.Join("..", "..", "..", "images", "backend", "build.sh"), image)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("images/backend/build.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })

	// In a container of its own network the backend cannot install its
	// egress rules, so /readyz would rightly fail (TestReadyzFailsWhenEgress…
	// covers that); the image is run as README's container example says.
	out, err := exec.CommandContext(ctx, "docker", "run", "-d", "--label", "dreadnode.test=image-backend", "-e", "DREADNODE_EGRESS=off",
		"-p", "127.0.0.1::8080", "-v", "/var/run/docker.sock:/var/run/docker.sock", image).CombinedOutput()
	if err != nil {
		t.Fatalf("docker run %s: %v\n%s", image, err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "rm", "-f", id).CombinedOutput(); err != nil {
			t.Errorf("remove container %s: %v\n%s", id, err, out)
		}
	})
	out, err = exec.CommandContext(ctx, "docker", "port", id, "8080/tcp").Output()
	if err != nil {
		t.Fatalf("docker port: %v", err)
	}
	addr := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("published address %q is not on 127.0.0.1", addr)
	}

	client := &http.Client{Timeout: 2 * time.Second}
	for _, path := range []string{"/healthz", "/readyz"} {
		deadline := time.Now().Add(60 * time.Second)
		var last string
		for {
			resp, err := client.Get("http://" + addr + path)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				last = resp.Status
			} else {
				last = err.Error()
			}
			if time.Now().After(deadline) {
				logs, _ := exec.Command("docker", "logs", id).CombinedOutput()
				t.Fatalf("GET %s never answered 200 (last: %s); container log:\n%s", path, last, logs)
			}
			time.Sleep(100 * time.Millisecond) // poll interval, bounded by deadline
		}
	}
	logs, _ := exec.Command("docker", "logs", id).CombinedOutput()
	if !strings.Contains(string(logs), "dreadnode-backend listening on http://") {
		t.Errorf("container log has no listen line:\n%s", logs)
	}
}
