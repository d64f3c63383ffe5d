// Command ogpud runs an oGPU node: the chain (CometBFT with the app
// in-process), node homes, multi-validator testnets and the devnet.
package main

import (
	"os"

	"github.com/ogpu-network/ogpu/cmd/cli"
)

func main() {
	if err := cli.NewOgpudCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
