package node

import (
	"context"
	"fmt"
	"time"
)

// Transactions through more than one node.
//
// A transaction handed to one node reaches the validators only through
// that node: while it is cut off from its peers, paused or restarting, the
// transaction waits with it. Most transactions can wait, but a bid reveal,
// a result commitment or a vote must land within a window of a few blocks
// (soak finding 13: reveals sent to a partitioned node missed their
// 3-block window and the job was refunded). A client given other nodes
// (Client.Also, `--broadcast`) therefore hands every transaction its own
// node took to them as well, at once and again at each rebroadcast.
//
// Only bytes the client's own node accepted, or bytes already being
// waited for, are handed on: the same signed bytes can land at most once
// (one nonce), so sending them to many nodes is safe. A refusal from
// another node is not acted on (the Sender re-signs only after its own
// node's refusal), so a node that lags cannot make the Sender sign the
// same messages twice under two nonces.

// handOnTimeout bounds one hand-off to another node: a paused node does
// not keep a goroutine for longer.
const handOnTimeout = 10 * time.Second

// handOn gives bz to every node in c.Also, without waiting for their
// answers.
func (c *Client) handOn(bz []byte) {
	for _, o := range c.Also {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), handOnTimeout)
			defer cancel()
			_, _ = o.BroadcastTxSync(ctx, bz)
		}()
	}
}

// DialAll connects to addrs: queries and waits go to the first node, and
// every transaction also to the others (Client.Also).
func DialAll(addrs []string) (*Client, error) {
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no node address: give at least one")
	}
	c, err := Dial(addrs[0])
	if err != nil {
		return nil, err
	}
	for _, a := range addrs[1:] {
		o, err := Dial(a)
		if err != nil {
			return nil, err
		}
		c.Also = append(c.Also, o.RPC)
	}
	return c, nil
}
