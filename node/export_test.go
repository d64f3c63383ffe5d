package node

import abcicli "github.com/cometbft/cometbft/abci/client"

// QueuedChecks is how many CheckTx calls wait in the mempool client's
// queue (mempoolClient; 0 for any other client).
func QueuedChecks(c abcicli.Client) int {
	m, ok := c.(*mempoolClient)
	if !ok {
		return 0
	}
	m.qmu.Lock()
	defer m.qmu.Unlock()
	return len(m.queue)
}
