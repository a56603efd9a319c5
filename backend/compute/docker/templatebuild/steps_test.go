package templatebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

func TestExpandIsDockerfileENV(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PATH": "/bin", "A": "x"}
	look := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for in, want := range map[string]string{
		"${PATH}:/my/path":     "/bin:/my/path",
		"$A-$A":                "x-x",
		"$(echo pwned)":        "$(echo pwned)",
		"`echo pwned`":         "`echo pwned`",
		`path\to\file`:         `path\to\file`,
		`\$A`:                  "$A",
		"-----BEGIN DATA-----": "-----BEGIN DATA-----",
		`say "hello"`:          `say "hello"`,
		"$UNSET.":              ".",
		"${bad name}":          "${bad name}",
		"cost $5":              "cost $5",
	} {
		if got := expand(in, look); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizeNamesTheField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		steps []compute.TemplateStep
		field string
	}{
		{[]compute.TemplateStep{{Type: "FROB"}}, "steps.0.type"},
		{[]compute.TemplateStep{{Type: "RUN"}}, "steps.0.args"},
		{[]compute.TemplateStep{{Type: "ENV", Args: []string{"1X", "v"}}}, "steps.0.args"},
		{[]compute.TemplateStep{{Type: "ENV", Args: []string{"X"}}}, "steps.0.args"},
		{[]compute.TemplateStep{{Type: "RUN", Args: []string{"true"}}, {Type: "COPY", Args: []string{".", "/x"}}}, "steps.1.filesHash"},
		{[]compute.TemplateStep{{Type: "COPY", Args: []string{".", "/x", "u", "999"}, FilesHash: "h"}}, "steps.0.args"},
		{[]compute.TemplateStep{{Type: "USER", Args: []string{"a b"}}}, "steps.0.args"},
	}
	for _, tc := range cases {
		req := compute.TemplateBuild{FromImage: "x", Steps: tc.steps}
		err := normalize(&req)
		var be *compute.TemplateBuildError
		if !errors.As(err, &be) || be.Field != tc.field || be.Kind != compute.KindInvalid {
			t.Errorf("%+v: want a refusal naming %s, got %v", tc.steps, tc.field, err)
		}
	}
	req := compute.TemplateBuild{FromImage: "x", FromTemplate: "y"}
	if err := normalize(&req); err == nil {
		t.Error("fromImage and fromTemplate together were accepted")
	}
}

func tarOf(t *testing.T, names ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, n := range names {
		if strings.HasSuffix(n, "/") {
			_ = tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeDir, Mode: 0o755})
			continue
		}
		_ = tw.WriteHeader(&tar.Header{Name: n, Mode: 0o600, Size: 1, Uid: 501})
		_, _ = tw.Write([]byte("x"))
	}
	_ = tw.Close()
	return b.Bytes()
}

func entries(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 1000 || (h.Typeflag == tar.TypeReg && h.Mode != 0o640) {
			t.Errorf("%s: uid %d mode %o, want 1000 and 0640", h.Name, h.Uid, h.Mode)
		}
		out = append(out, h.Name)
	}
	sort.Strings(out)
	return out
}

func TestCopyRewrite(t *testing.T) {
	t.Parallel()
	src := tarOf(t, "./", "hello.txt", "dir/", "dir/a", "other")
	for _, tc := range []struct {
		src, dest string
		want      string
	}{
		{".", "/app/", "app/,app/dir/,app/dir/a,app/hello.txt,app/other"},
		{"hello.txt", "/app/", "app/hello.txt"},
		{"hello.txt", "/app/renamed", "app/renamed"},
		{"dir", "/d", "d/,d/a"},
	} {
		var out bytes.Buffer
		if _, err := rewrite(bytes.NewReader(src), &out, tc.src, tc.dest, strings.HasSuffix(tc.dest, "/"), 1000, 1000, 0o640, 1<<20); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(entries(t, out.Bytes()), ","); got != tc.want {
			t.Errorf("COPY %s %s = %s, want %s", tc.src, tc.dest, got, tc.want)
		}
	}
	// After WORKDIR /app (its directory already in the layer), the
	// archive's root is not written again: the engine refuses a layer
	// naming a path twice.
	var after bytes.Buffer
	if _, err := rewrite(bytes.NewReader(src), &after, ".", "/app/", true, 1000, 1000, 0o640, 1<<20, "/app"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(entries(t, after.Bytes()), ","); got != "app/dir/,app/dir/a,app/hello.txt,app/other" {
		t.Errorf("COPY . /app/ after WORKDIR /app = %s", got)
	}
	var out bytes.Buffer
	_, err := rewrite(bytes.NewReader(tarOf(t, "../escape")), &out, ".", "/app/", true, 0, 0, -1, 1<<20)
	var be *compute.TemplateBuildError
	if !errors.As(err, &be) || be.Kind != compute.KindInvalid {
		t.Errorf("an entry leaving the archive: %v", err)
	}
	_, err = rewrite(bytes.NewReader(tarOf(t, "a", "b", "c")), io.Discard, ".", "/app/", true, 0, 0, -1, 2)
	if !errors.As(err, &be) || be.Limit != compute.LimitFiles {
		t.Errorf("past the files limit: %v", err)
	}
}
