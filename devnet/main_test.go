package devnet

import (
	"os"
	"testing"

	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/runtime/stagehost"
)

// TestMain lets this test binary be a supervised split stage worker (the
// split round's providers and the validator run stages in child
// processes of the running executable).
func TestMain(m *testing.M) {
	stagehost.MaybeServe()
	train.MaybeWorker()
	os.Exit(m.Run())
}
