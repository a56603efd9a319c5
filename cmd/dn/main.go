// Command dn is the Dreadnode command line (see docs/cli.md, or dn --help).
package main

import (
	"os"

	"github.com/dreadnode/terraform-provider-dreadnode/cmd/dn/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.StdIO()))
}
