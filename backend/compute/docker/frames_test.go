package docker

import (
	"fmt"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// The helper's frames become events whatever the chunking of the stream.
func TestFrameWriter(t *testing.T) {
	stream := []byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 'h', 'i', 2, 0, 0, 0, 1, '!', 3, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xf1}
	for chunk := 1; chunk <= len(stream); chunk++ {
		var got []string
		w := &frameWriter{pid: 9, emit: func(ev compute.ProcessEvent) error {
			got = append(got, fmt.Sprintf("%s:%d:%d:%s", ev.Type, ev.PID, ev.ExitCode, ev.Data))
			return nil
		}}
		for i := 0; i < len(stream); i += chunk {
			if _, err := w.Write(stream[i:min(i+chunk, len(stream))]); err != nil {
				t.Fatal(err)
			}
		}
		if want := []string{"start:9:0:", "stdout:0:0:hi", "stderr:0:0:!", "exit:0:-15:"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("chunks of %d: %q, want %q", chunk, got, want)
		}
	}
	if _, err := (&frameWriter{emit: func(compute.ProcessEvent) error { return nil }}).Write([]byte{7, 0, 0, 0, 0}); err == nil {
		t.Fatal("an unknown frame type was accepted")
	}
}
