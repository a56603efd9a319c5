// Command dn-agent is the in-sandbox agent (see package backend/agent): it
// serves E2B envd's contract on port 49983 and, given `-- command...`, runs
// that command as the sandbox's main process.
//
// Build it static, so it runs in any image (no libc, no shell needed):
//
//	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o dn-agent ./backend/cmd/dn-agent
package main

import (
	"os"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
)

func main() { os.Exit(agent.Main(os.Args[1:])) }
