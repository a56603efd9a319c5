package sandbox

import "testing"

// A kind's properties are declared once: runtimes and Worlds jobs are
// sandboxes of their own instance; a task environment's records are neither.
func TestKindProperties(t *testing.T) {
	for _, k := range Kinds {
		want := k != KindTask
		if AddressedAsSandbox(k) != want || OwnInstance(k) != want {
			t.Errorf("kind %s: addressed as a sandbox %v, own instance %v; want %v", k, AddressedAsSandbox(k), OwnInstance(k), want)
		}
	}
}
