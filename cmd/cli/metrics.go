package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/cometbft/cometbft/libs/log"
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
// ends (nothing when it is off); a busy address is an error now.
func serveMetrics(ctx context.Context, cmd *cobra.Command) error {
	addr := metricsAddr(cmd)
	if addr == "" {
		return nil
	}
	ln, err := metrics.Listen(addr)
	if err != nil {
		return metricsDefaultBusy(cmd, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "metrics: http://%s/metrics\n", ln.Addr())
	go func() {
		if err := metrics.Serve(ctx, ln); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "metrics server stopped: %v\n", err)
		}
	}()
	return nil
}

// metricsDefaultBusy turns a failure to serve on the default address into
// a warning (several processes of one kind on a machine, e.g. a local
// testnet's nodes, all start with the default): the process runs on
// without metrics. An address the user chose must work.
func metricsDefaultBusy(cmd *cobra.Command, err error) error {
	if cmd.Flags().Changed("metrics.laddr") {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "warning: no metrics: %v\n", err)
	return nil
}

// followMetrics feeds the chain's blocks to obs until ctx ends, in the
// background; a failure is reported, never fatal to the process.
func followMetrics(ctx context.Context, errw io.Writer, c *node.Client, obs ...metrics.Observer) {
	go func() {
		if err := metrics.Follow(ctx, c, log.NewNopLogger(), obs...); err != nil && ctx.Err() == nil {
			fmt.Fprintf(errw, "metrics: %v\n", err)
		}
	}()
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
	t, err := metrics.NewProviderTracker(addr)
	if err != nil {
		return err
	}
	followMetrics(ctx, cmd.ErrOrStderr(), c, t)
	return nil
}

// gatewayMetricsWrap is the gateway's metrics middleware, or nil when
// --metrics.laddr is off.
func gatewayMetricsWrap(cmd *cobra.Command) (func(http.Handler) http.Handler, error) {
	if metricsAddr(cmd) == "" {
		return nil, nil
	}
	if _, err := metrics.Gateway(http.NotFoundHandler()); err != nil {
		return nil, err
	}
	return func(h http.Handler) http.Handler {
		w, _ := metrics.Gateway(h) // registered above: cannot fail
		return w
	}, nil
}
