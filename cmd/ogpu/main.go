// Command ogpu is the oGPU wallet and client: keys, transactions, queries.
package main

import (
	"os"

	"github.com/ogpu-network/ogpu/cmd/cli"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/runtime/stagehost"
)

func main() {
	stagehost.MaybeServe() // this process may be a supervised split-inference stage
	train.MaybeWorker()    // or a supervised fine-tune worker
	if err := cli.NewOgpuCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
