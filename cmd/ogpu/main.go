// Command ogpu is the oGPU wallet and client: keys, transactions, queries.
package main

import (
	"os"

	"github.com/ogpu-network/ogpu/cmd/cli"
)

func main() {
	if err := cli.NewOgpuCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
