package devnet

import (
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// transfers sends alice -> bob and bob -> carol, then replays one of
// alice's nonces, which the chain must refuse.
func (d *devnet) transfers() error {
	fmt.Fprintln(d.w, "\n== transfers")
	alice, bob, carol := d.accts[0], d.accts[1], d.accts[2]
	for _, tr := range []struct {
		from, to account
		amount   *uint256.Int
	}{{alice, bob, types.OGPU(10)}, {bob, carol, mustAmount("2.5ogpu")}} {
		res, err := d.tx(tr.from, (&escrow.MsgSend{To: tr.to.addr, Amount: tr.amount}).Raw())
		if err != nil {
			return err
		}
		fmt.Fprintf(d.w, "send %s %s -> %s: tx %X in block %d\n", types.FormatAmount(tr.amount), tr.from.name, tr.to.name, res.Hash, res.Height)
	}
	// A replay of a used nonce is refused and changes nothing.
	nonce := uint64(0)
	bz, _, err := d.c.SignTx(d.ctx, alice.key, []types.RawMsg{(&escrow.MsgSend{To: bob.addr, Amount: types.OGPU(1)}).Raw()}, node.BuildOptions{Nonce: &nonce})
	if err != nil {
		return err
	}
	if _, err := d.c.Broadcast(d.ctx, bz); err != nil {
		fmt.Fprintf(d.w, "replay of alice's nonce 0: %v\n", err)
	} else {
		return fmt.Errorf("a replayed nonce was accepted")
	}
	return nil
}

func mustAmount(s string) *uint256.Int {
	a, err := types.ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}
