package cli

import (
	"context"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/metrics"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// Default --metrics.laddr of each process: loopback, one port each, so a
// node, a provider and a gateway on one machine do not collide.
const (
	metricsNodeListen     = metrics.DefaultListen // CometBFT's usual port
	metricsProviderListen = "127.0.0.1:26661"
	metricsGatewayListen  = "127.0.0.1:26662"
)

func addMetricsFlag(cmd *cobra.Command, def string) {
	cmd.Flags().String("metrics.laddr", def, `serve Prometheus /metrics (ogpu_*, libp2p_*, go_*; a node adds cometbft_*) on this address ("off": none); loopback unless you mean otherwise`)
}

func metricsAddr(cmd *cobra.Command) string {
	a, _ := cmd.Flags().GetString("metrics.laddr")
	if metrics.Off(a) {
		return ""
	}
	return a
}

// serveMetrics serves /metrics on the command's --metrics.laddr until ctx
// ends (metrics.Start: nothing when off, a busy chosen address an error).
func serveMetrics(ctx context.Context, cmd *cobra.Command) error {
	a, _ := cmd.Flags().GetString("metrics.laddr")
	return metrics.Start(ctx, a, cmd.Flags().Changed("metrics.laddr"), cmd.OutOrStdout(), cmd.ErrOrStderr())
}

// followMetrics feeds the chain's blocks to obs in the background.
func followMetrics(ctx context.Context, errw io.Writer, c *node.Client, obs ...metrics.Observer) {
	metrics.FollowInBackground(ctx, errw, c, obs...)
}

// providerMetrics starts the provider's series for addr: its own /metrics
// when serve (a provider process; in `ogpud start` the node's endpoint
// serves them), and a chain follower for the events naming it.
func providerMetrics(ctx context.Context, cmd *cobra.Command, c *node.Client, addr types.Address, serve bool) error {
	if metricsAddr(cmd) == "" {
		return nil
	}
	if serve {
		if err := serveMetrics(ctx, cmd); err != nil {
			return err
		}
	}
	return metrics.FollowProvider(ctx, cmd.ErrOrStderr(), c, addr)
}

// gatewayMetricsWrap is the gateway's metrics middleware, or nil when
// --metrics.laddr is off.
func gatewayMetricsWrap(cmd *cobra.Command) (func(http.Handler) http.Handler, error) {
	if metricsAddr(cmd) == "" {
		return nil, nil
	}
	return metrics.GatewayWrap()
}
