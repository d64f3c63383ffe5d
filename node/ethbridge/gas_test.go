package ethbridge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/bridge"
)

// TestGasReport measures the gas that deposits, withdrawals and valset
// updates use on the simulated chain under mainnet's current rules (Osaka)
// and logs a table; docs/bridge.md quotes it. Run it with
//
//	go test -count=1 -run TestGasReport -v ./node/ethbridge/
//
// Each withdrawal pays a recipient that held no oGPU before; the first
// withdrawal of a bridge also starts its outflow bucket. Signers are the
// smallest quorum (more than 2/3 of equal powers) or all validators. The
// valset update replaces one validator (applied at once, not queued).
func TestGasReport(t *testing.T) {
	type row struct {
		op         string
		vals, sigs int
		gas        uint64
	}
	var rows []row
	for _, n := range []int{4, 20} {
		powers := make([]uint32, n)
		for i := range powers {
			powers[i] = 1
		}
		e := newEnv(t, powers...)
		s, err := newSender(e.ctx, e.c, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n == 4 {
			rc, err := s.send(e.ctx, e.bob.key, &e.token, "approve", tokenABI.PackApprove(e.bridge, ogpu(1).ToBig()))
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row{op: "approve (before a first deposit)", gas: rc.GasUsed})
			for _, op := range []string{"deposit (first into the bridge)", "deposit (later)"} {
				rc, err := s.send(e.ctx, e.alice.key, &e.bridge, "deposit", bridgeABI.PackDeposit(e.bob.addr, ogpu(250).ToBig()))
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, row{op: op, gas: rc.GasUsed})
			}
		} else {
			e.deposit(e.alice, e.bob.addr, ogpu(500))
		}
		quorum := n*2/3 + 1
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		r := e.relayer()
		for i, c := range []struct {
			op      string
			signers []int
		}{{"withdraw (first from the bridge)", all[:quorum]}, {"withdraw", all[:quorum]}, {"withdraw", all}} {
			nonce, to, amt := uint64(i+1), newAccount(t).addr, ogpu(10)
			d := bridge.WithdrawDigest(e.domain(), nonce, to, amt)
			res, err := r.Withdraw(e.ctx, e.rel.key, e.set, nonce, to, amt, sigs(t, d, e.vals, c.signers...))
			if err != nil || res.Outcome != Paid {
				t.Fatalf("%d validators, withdrawal %d: %+v, %v", n, nonce, res, err)
			}
			rows = append(rows, row{c.op, n, len(c.signers), res.GasUsed})
		}
		_, next := sortedSet(1, append([]account{newAccount(t)}, e.vals[1:]...), powers...)
		cp := bridge.Checkpoint(e.domain(), &next)
		res, err := r.UpdateValset(e.ctx, e.rel.key, e.set, next, sigs(t, cp, e.vals, all[:quorum]...))
		if err != nil || res.Outcome != ValsetApplied {
			t.Fatalf("%d validators, valset update: %+v, %v", n, res, err)
		}
		rows = append(rows, row{"updateValset (one validator replaced)", n, quorum, res.GasUsed})
	}
	var b strings.Builder
	b.WriteString("\n| Operation | Validators | Signatures | Gas used |\n|---|---:|---:|---:|\n")
	for _, r := range rows {
		v, s := "", ""
		if r.vals > 0 {
			v, s = fmt.Sprint(r.vals), fmt.Sprint(r.sigs)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d |\n", r.op, v, s, r.gas)
	}
	t.Log(b.String())
	gas := func(op string, vals, sigs int) uint64 {
		for _, r := range rows {
			if r.op == op && r.vals == vals && r.sigs == sigs {
				return r.gas
			}
		}
		t.Fatalf("no row %q %d %d", op, vals, sigs)
		return 0
	}
	// Sanity: more signatures cost more, and a later deposit less than
	// the first (no slot goes from zero to non-zero).
	if gas("withdraw", 20, 14) <= gas("withdraw", 4, 3) || gas("withdraw", 4, 4) <= gas("withdraw", 4, 3) ||
		gas("updateValset (one validator replaced)", 20, 14) <= gas("updateValset (one validator replaced)", 4, 3) ||
		gas("deposit (later)", 0, 0) >= gas("deposit (first into the bridge)", 0, 0) {
		t.Fatal("gas figures out of the expected order")
	}
}
