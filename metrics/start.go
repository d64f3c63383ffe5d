package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http"

	cmtcfg "github.com/cometbft/cometbft/config"
	"github.com/cometbft/cometbft/libs/log"

	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// What a process does with its --metrics.laddr: serve, follow the chain,
// wrap the gateway. The commands only read their flags and call these.

// Start serves /metrics on laddr until ctx ends (nothing when Off). A busy
// address is an error when the user chose it; the default address busy
// (several processes of one kind on a machine, e.g. a local testnet's
// nodes) is a warning on errw, and the process runs on without metrics.
func Start(ctx context.Context, laddr string, chosen bool, out, errw io.Writer) error {
	if Off(laddr) {
		return nil
	}
	ln, err := Listen(laddr)
	if err != nil {
		if chosen {
			return err
		}
		fmt.Fprintf(errw, "warning: no metrics: %v\n", err)
		return nil
	}
	fmt.Fprintf(out, "metrics: http://%s/metrics\n", ln.Addr())
	go func() {
		if err := Serve(ctx, ln); err != nil {
			fmt.Fprintf(errw, "metrics server stopped: %v\n", err)
		}
	}()
	return nil
}

// FollowInBackground feeds the chain's blocks to obs until ctx ends; a
// failure is reported on errw, never fatal to the process.
func FollowInBackground(ctx context.Context, errw io.Writer, c *node.Client, obs ...Observer) {
	go func() {
		if err := Follow(ctx, c, log.NewNopLogger(), obs...); err != nil && ctx.Err() == nil {
			fmt.Fprintf(errw, "metrics: %v\n", err)
		}
	}()
}

// FollowProvider follows the chain for the series of provider addr.
func FollowProvider(ctx context.Context, errw io.Writer, c *node.Client, addr types.Address) error {
	t, err := NewProviderTracker(addr)
	if err != nil {
		return err
	}
	FollowInBackground(ctx, errw, c, t)
	return nil
}

// GatewayWrap is the gateway's metrics middleware.
func GatewayWrap() (func(http.Handler) http.Handler, error) {
	if _, err := Gateway(http.NotFoundHandler()); err != nil {
		return nil, err
	}
	return func(h http.Handler) http.Handler {
		w, _ := Gateway(h) // registered above: cannot fail
		return w
	}, nil
}

// StartCometBFT turns CometBFT's own endpoint on at laddr (EnableCometBFT)
// and says whether metrics are on: Off is off; a busy chosen address is an
// error, the default one busy a warning on errw.
func StartCometBFT(conf *cmtcfg.Config, laddr string, chosen bool, errw io.Writer) (bool, error) {
	if Off(laddr) {
		return false, nil
	}
	if err := EnableCometBFT(conf, laddr); err != nil {
		if chosen {
			return false, err
		}
		fmt.Fprintf(errw, "warning: no metrics: %v\n", err)
		return false, nil
	}
	return true, nil
}
