// Package envdpb holds Go code generated from E2B's envd .proto files
// (process.proto, filesystem.proto in ../shared/e2b): the message types in
// envdpb/process and envdpb/filesystem and the connect-go clients and handlers
// in their processconnect and filesystemconnect subpackages.
package envdpb

//go:generate ./gen.sh
