package chain

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// BenchmarkTransferPhases is the app's own cost of a signed transfer in
// each ABCI call that runs it, without CometBFT (node's
// BenchmarkTransfers measures both together): blocks of 1,000 transfers
// from 16 senders, each to a new recipient, over an on-disk tree. Per
// block: CheckTx of each (signatures already verified, as
// node.NewClientCreator's PreverifyTx leaves them), PrepareProposal,
// FinalizeBlock, Commit. Reported per transfer in CPU microseconds of
// the process (wall time on a shared machine measures the share of the
// cores it got):
//
//	go test -run '^$' -bench BenchmarkTransferPhases -benchtime 10x -count 5 ./chain
func BenchmarkTransferPhases(b *testing.B) {
	const senders, perBlock = 16, 1000
	keys := make([]*ecdsa.PrivateKey, senders)
	d := genesis.Default()
	d.Validators = []genesis.Validator{{Name: "val", Operator: addrOf("val"), PubKey: testValKey(1), Stake: types.OGPU(10_000)}}
	for i := range keys {
		keys[i] = testKey(fmt.Sprint("transfer sender ", i))
		d.Accounts = append(d.Accounts, genesis.Account{Address: addrOf(fmt.Sprint("transfer sender ", i)), Balance: types.OGPU(1_000_000)})
	}
	d.Sort()
	bz, err := d.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	tree, err := store.OpenTree(b.TempDir(), "state")
	if err != nil {
		b.Fatal(err)
	}
	defer tree.Close()
	app := NewApp(tree)
	ctx := context.Background()
	if _, err := app.InitChain(ctx, &abci.InitChainRequest{ChainId: testChainID, AppStateBytes: bz, InitialHeight: 1}); err != nil {
		b.Fatal(err)
	}
	nonces := make([]uint64, senders)
	next := 0
	block := func() [][]byte {
		txs := make([][]byte, perBlock)
		for i := range txs {
			s := next % senders
			to := types.BytesToAddress(types.TxHash([]byte(fmt.Sprint("recipient ", next))))
			tx := &types.Tx{Body: types.TxBody{ChainID: testChainID, From: addrOf(fmt.Sprint("transfer sender ", s)), Nonce: nonces[s],
				Msgs: []types.RawMsg{(&escrow.MsgSend{To: to, Amount: uint256.NewInt(1_000_000_000)}).Raw()}}}
			tx.Body.Fee = new(uint256.Int).Mul(uint256.NewInt(100_000), getParams(tree).MinGasPrice)
			if err := tx.Sign(keys[s]); err != nil {
				b.Fatal(err)
			}
			enc, err := tx.Encode()
			if err != nil {
				b.Fatal(err)
			}
			txs[i] = enc
			nonces[s]++
			next++
		}
		return txs
	}
	var check, prepare, finalize, commit time.Duration
	height := int64(0)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		txs := block()
		for _, tx := range txs {
			app.PreverifyTx(tx)
		}
		b.StartTimer()
		height++
		t0 := processCPU(b)
		for _, tx := range txs {
			res, _ := app.CheckTx(ctx, &abci.CheckTxRequest{Tx: tx, Type: abci.CHECK_TX_TYPE_CHECK})
			if res.Code != 0 {
				b.Fatalf("CheckTx: %s", res.Log)
			}
		}
		t1 := processCPU(b)
		prep, err := app.PrepareProposal(ctx, &abci.PrepareProposalRequest{Txs: txs, MaxTxBytes: 1 << 22, Height: height})
		if err != nil || len(prep.Txs) != len(txs) {
			b.Fatalf("PrepareProposal took %d of %d: %v", len(prep.Txs), len(txs), err)
		}
		t2 := processCPU(b)
		res, err := app.FinalizeBlock(ctx, &abci.FinalizeBlockRequest{Height: height, Txs: prep.Txs, Time: time.Unix(height, 0)})
		if err != nil {
			b.Fatal(err)
		}
		t3 := processCPU(b)
		if _, err := app.Commit(ctx, &abci.CommitRequest{}); err != nil {
			b.Fatal(err)
		}
		t4 := processCPU(b)
		for i, r := range res.TxResults {
			if r.Code != 0 {
				b.Fatalf("tx %d: %s", i, r.Log)
			}
		}
		check, prepare, finalize, commit = check+t1-t0, prepare+t2-t1, finalize+t3-t2, commit+t4-t3
	}
	n := float64(b.N * perBlock)
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
	b.ReportMetric(us(check), "checktx-cpu-µs/tx")
	b.ReportMetric(us(prepare), "prepare-cpu-µs/tx")
	b.ReportMetric(us(finalize), "finalize-cpu-µs/tx")
	b.ReportMetric(us(commit), "commit-cpu-µs/tx")
	b.ReportMetric(us(check+prepare+finalize+commit), "app-cpu-µs/tx")
}
