package metrics

import (
	"context"
	"fmt"

	"github.com/cometbft/cometbft/libs/log"

	"github.com/ogpu-network/ogpu/node"
)

// Observer takes committed blocks, each once, in order.
type Observer interface {
	ObserveBlock(node.BlockEvents)
}

// Follow feeds every block committed from now on to obs, through one
// subscription, until ctx ends. The metrics only read the chain: nothing
// flows back into its state.
func Follow(ctx context.Context, c *node.Client, logger log.Logger, obs ...Observer) error {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	blocks, err := c.Subscribe(ctx, 0, node.SubscribeLogger(logger))
	if err != nil {
		return fmt.Errorf("cannot follow the chain for metrics: %w", err)
	}
	for b := range blocks {
		for _, o := range obs {
			o.ObserveBlock(b)
		}
	}
	return nil
}
