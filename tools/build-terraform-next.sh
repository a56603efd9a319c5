#!/usr/bin/env bash
# Builds a Terraform CLI newer than the CI's v1.5.7 from the Go module proxy
# (never a downloaded binary), for the acceptance tests of ephemeral resources
# (>= 1.10), write-only attributes (>= 1.11) and resource identity (>= 1.12).
#
# `go install github.com/hashicorp/terraform@v1.12.x` fails: its go.mod
# replaces ten nested modules (remote-state backends, internal/legacy) by
# ./paths that the module zip does not contain. So the module is copied, those
# requires/replaces are dropped, and the remote-state backends that need them
# (azurerm, consul, cos, gcs, kubernetes, oss, pg, s3, oci) are left out of the
# backend registry. The local, http and inmem backends, which the tests use,
# are unchanged.
#
# usage: build-terraform-next.sh VERSION OUTPUT
set -euo pipefail
version=$1 out=$2
src=$(go mod download -json "github.com/hashicorp/terraform@v${version}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -n "$src" ] || { echo "go mod download github.com/hashicorp/terraform@v${version} gave no directory" >&2; exit 1; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src/." "$work/"
chmod -R u+w "$work"
cd "$work"
nested='internal/(backend/remote-state/(azure|consul|cos|gcs|kubernetes|oci|oss|pg|s3)|legacy)'
sed -E -i "\#github.com/hashicorp/terraform/${nested}( |\$)#d" go.mod
init=internal/backend/init/init.go
sed -E -i '/backend(Azure|Consul|Cos|GCS|Kubernetes|OCI|OSS|Pg|S3)[ .]/d' "$init"
if grep -Eq "terraform/${nested}\"" $(grep -rl --include='*.go' 'hashicorp/terraform/internal' . | grep -v _test.go); then
	echo "terraform v${version} imports a nested module this script does not handle" >&2; exit 1
fi
# The go.sum of the module covers every remaining dependency.
# version.dev=no: a release build, reporting v${version} (not v${version}-dev).
GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" -o "$out.tmp" .
mv "$out.tmp" "$out"
"$out" version
