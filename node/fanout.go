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

// handOnTimeout bounds one hand-off to another node, its wait for the
// hand-offs before it included: a paused node does not keep goroutines
// for longer.
const handOnTimeout = 10 * time.Second

// handOn gives bz to every node in c.Also, without waiting for their
// answers. Each node gets the sender's transactions in the order they
// were handed on: a node given nonce n+1 before n refuses it ("nonce
// ahead") and, having refused it, would not take it from its peers'
// gossip either.
func (c *Client) handOn(bz []byte) {
	if len(c.Also) == 0 {
		return
	}
	c.handMu.Lock()
	if len(c.relays) != len(c.Also) {
		c.relays = make([]chan struct{}, len(c.Also))
	}
	for i, o := range c.Also {
		prev, done := c.relays[i], make(chan struct{})
		c.relays[i] = done
		ctx, cancel := context.WithTimeout(context.Background(), handOnTimeout)
		go func() {
			defer cancel()
			defer close(done)
			if prev != nil {
				select {
				case <-prev:
				case <-ctx.Done():
					return
				}
			}
			_, _ = o.BroadcastTxSync(ctx, bz)
		}()
	}
	c.handMu.Unlock()
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
