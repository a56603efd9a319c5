#!/bin/sh
# Regenerates the Go code for envd's connect-RPC services from E2B's published
# .proto files, which live outside this repository at ../shared/e2b (relative
# to the repository root) and are deliberately not copied in.
#
# Tools (versions used for the committed code):
#   apt-get install protobuf-compiler            # protoc 3.21.12 (Debian bookworm)
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
#
# Run from this directory (go generate does that): ./gen.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$here
while [ ! -f "$root/go.mod" ]; do
	parent=$(dirname "$root")
	if [ "$parent" = "$root" ]; then echo "gen.sh: go.mod not found above $here" >&2; exit 1; fi
	root=$parent
done
spec=$(cd "$root/.." && pwd)/shared/e2b
if [ ! -f "$spec/process.proto" ] || [ ! -f "$spec/filesystem.proto" ]; then
	echo "gen.sh: E2B specs not found in $spec (expected ../shared/e2b beside the repository)" >&2
	exit 1
fi
mod=$(sed -n 's/^module //p' "$root/go.mod")
pkg=$mod/backend/envdpb
M="Mprocess.proto=$pkg/process;process,Mfilesystem.proto=$pkg/filesystem;filesystem"
protoc -I "$spec" \
	--go_out="$here" --go_opt=paths=source_relative --go_opt="$M" \
	--connect-go_out="$here" --connect-go_opt=paths=source_relative --connect-go_opt="$M" \
	process.proto filesystem.proto
# paths=source_relative puts files beside their .proto name; move them into
# one directory per package.
mkdir -p "$here/process" "$here/filesystem"
mv "$here/process.pb.go" "$here/process/"
mv "$here/filesystem.pb.go" "$here/filesystem/"
rm -rf "$here/process/processconnect" "$here/filesystem/filesystemconnect"
mv "$here/processconnect" "$here/process/"
mv "$here/filesystemconnect" "$here/filesystem/"
