package metrics

import (
	"fmt"
	"net"
	"sync"

	cmtcfg "github.com/cometbft/cometbft/config"
)

var (
	cometMu sync.Mutex
	cometOn bool
)

// EnableCometBFT turns on CometBFT's own Prometheus endpoint in conf at
// laddr and registers the ogpu_* series, which that endpoint serves too
// (it serves the default registry). CometBFT registers its series
// unguarded, so a second node with them on in one process would panic:
// only the first call per process succeeds. laddr must be free now;
// CometBFT itself would only log a busy port.
func EnableCometBFT(conf *cmtcfg.Config, laddr string) error {
	cometMu.Lock()
	defer cometMu.Unlock()
	if cometOn {
		return fmt.Errorf("cannot serve metrics on %s: CometBFT's metrics are already on in this process (one node per process may have them)", laddr)
	}
	if err := Register(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", laddr)
	if err != nil {
		return fmt.Errorf("cannot serve metrics on %s: %w (choose another --metrics.laddr, or \"off\")", laddr, err)
	}
	_ = ln.Close()
	conf.Instrumentation.Prometheus = true
	conf.Instrumentation.PrometheusListenAddr = laddr
	cometOn = true
	return nil
}
