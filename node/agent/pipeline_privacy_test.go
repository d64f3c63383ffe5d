package agent

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// postPipeline runs a 3-stage pipeline job from a client in the
// background and returns the job's id and the real ciphertext of its
// input, once every stage is awarded.
func (n *testNet) postPipeline(t *testing.T) (uint64, []byte) {
	t.Helper()
	c := n.client()
	m := pipelineModel(t)
	input := []float64{0.61803, -0.27182, 0.31415, -0.14142, 0.1732, 0.2236}
	job, sk := n.pipelineJob(t, m, input)
	job.Windows.Execute = 60
	ct, err := sk.Encrypt(input)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ct.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(n.ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	blocks, err := n.c.Subscribe(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = c.RunPipeline(ctx, job, nil)
	}()
	for b := range blocks {
		for _, e := range node.EventsOf[market.EventJobAwarded](b.Events) {
			if e.Stage == 1 {
				go func() {
					for range blocks {
					}
				}()
				return e.Job, data
			}
		}
	}
	t.Fatal("no award")
	return 0, nil
}

// TestItem8PushOnlyFromSameChain: replica chain 0 is prov1 → prov3, chain
// 1 is prov2 → prov2. prov2's real host pushes a real ciphertext into
// chain 0 (to prov3, stage 1, slot 0): refused, since only slot 0 of
// stage 0 is upstream of it. The same-chain push is allowed.
func TestItem8PushOnlyFromSameChain(t *testing.T) {
	n := newTestNet(t)
	prov1 := n.providerWith("prov1", stagePrices{100, 300, 100}, false)
	prov2 := n.providerWith("prov2", stagePrices{200, 200, 200}, false)
	prov3 := n.providerWith("prov3", stagePrices{300, 100, 300}, false)
	id, data := n.postPipeline(t)
	j, err := n.c.Job(n.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Tasks[0].Slots[0].Provider != prov1.agent.Address() || j.Tasks[0].Slots[1].Provider != prov2.agent.Address() ||
		j.Tasks[1].Slots[0].Provider != prov3.agent.Address() {
		t.Fatalf("slots %+v %+v: not the chains this test needs", j.Tasks[0].Slots, j.Tasks[1].Slots)
	}
	if err := pushAllowed(n.ctx, n.c, j, 0, prov1.host.ID().String(), prov3.host.ID().String()); err != nil {
		t.Fatalf("the same-chain push is refused: %v", err)
	}
	hd := pushHeader{Job: id, Stage: 0, Hash: sha256.Sum256(data), Size: int64(len(data))}
	err = pushOutput(n.ctx, prov2.host, prov3.host.ID(), hd, data)
	t.Logf("prov2 (chain 1) pushes into chain 0: %v", err)
	if err == nil || !strings.Contains(err.Error(), "upstream") {
		t.Fatalf("a push from another replica chain: %v, want a refusal", err)
	}
}

// TestH3StrangerPushRefused: a stranger with a fresh key and no role
// pushes a ciphertext to a provider of a running pipeline: refused.
func TestH3StrangerPushRefused(t *testing.T) {
	n := newTestNet(t)
	n.providerWith("prov1", stagePrices{100, 300, 100}, false)
	n.providerWith("prov2", stagePrices{200, 200, 200}, false)
	prov3 := n.providerWith("prov3", stagePrices{300, 100, 300}, false)
	id, data := n.postPipeline(t)
	sk, _ := ethcrypto.GenerateKey()
	stranger, _ := n.host("stranger", sk)
	if err := stranger.ConnectPeer(n.ctx, prov3.host.ID(), prov3.host.Addrs()); err != nil {
		t.Fatal(err)
	}
	hd := pushHeader{Job: id, Stage: 0, Hash: sha256.Sum256(data), Size: int64(len(data))}
	err := pushOutput(n.ctx, stranger, prov3.host.ID(), hd, data)
	t.Logf("stranger pushes: %v", err)
	if err == nil || !strings.Contains(err.Error(), "holds no slot") {
		t.Fatalf("a stranger's push: %v, want a refusal", err)
	}
}

// TestH2PipelineCoProviderGetsNoPush: prov1 holds slot 0 of stage 0; the
// lazy provider holds slot 1 of stage 0 and slot 0 of stage 1, so it is
// next in prov1's replica chain. It never computes: it waits for prov1's
// stage-0 output to be pushed, and commits that as its own stage-0
// result. prov1 now pushes only once the lazy provider's own stage-0
// commitment is on chain (or its window is over): the lazy provider gets
// nothing in time, commits nothing, and is slashed as a no-show.
func TestH2PipelineCoProviderGetsNoPush(t *testing.T) {
	n := newTestNet(t)
	prov1 := n.providerWith("prov1", stagePrices{100, 300, 300}, false)
	n.providerWith("prov3", stagePrices{300, 200, 200}, false)
	lazy := n.barePeer("prov2")
	before := n.worth(lazy.addr)
	info := market.ProviderInfo{PeerID: lazy.host.ID().String(), Addrs: lazy.host.Addrs()[:1], Attributes: []string{"ram/16Gi"},
		Runtimes: []string{RuntimeCKKS}, Class: "lazy"}
	if _, err := lazy.sender.Send(n.ctx, (&market.MsgUpdateProvider{Info: info}).Raw()); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		pushed []pushHeader
		copied bool
	)
	resSalt := types.Hash{3}
	lazy.host.Host().SetStreamHandler(PipelineProtocol, func(s network.Stream) {
		defer s.Close()
		br := bufio.NewReader(s)
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		var hd pushHeader
		if json.Unmarshal(line, &hd) != nil {
			return
		}
		_ = json.NewEncoder(s).Encode(pushReply{OK: true})
		_, _ = io.CopyN(io.Discard, br, hd.Size)
		_ = json.NewEncoder(s).Encode(pushReply{OK: true})
		mu.Lock()
		pushed = append(pushed, hd)
		mu.Unlock()
		// Commit the pushed output as its own stage-0 result.
		if _, err := lazy.sender.Send(n.ctx, (&verifier.MsgCommitResult{Job: hd.Job, Stage: hd.Stage,
			Commitment: verifier.ResultCommitment(hd.Hash, resSalt, lazy.addr)}).Raw()); err == nil {
			mu.Lock()
			copied = true
			mu.Unlock()
			t.Logf("lazy: got prov1's stage-%d output %x by push before its own commitment; committed it as its own", hd.Stage, hd.Hash[:8])
		}
	})
	ctx, cancel := context.WithCancel(n.ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() { // the lazy provider bids: 200 for stage 0, 100 for stage 1
		defer wg.Done()
		blocks, err := n.c.Subscribe(ctx, 1)
		if err != nil {
			return
		}
		prices := []uint64{200, 100, 400}
		salt := types.Hash{1}
		price := func(s int) *uint256.Int { return new(uint256.Int).Div(types.OGPU(prices[s]), uint256.NewInt(1000)) }
		for b := range blocks {
			for _, e := range node.EventsOf[market.EventJobPosted](b.Events) {
				for s := range 3 {
					msg := &market.MsgCommitBid{Job: e.Job, Stage: uint16(s), Commitment: market.BidCommitment(e.Job, uint16(s), price(s), salt, lazy.addr)}
					_, _ = lazy.sender.Send(ctx, msg.Raw())
				}
			}
			for _, e := range node.EventsOf[market.EventJobRevealing](b.Events) {
				for s := range 3 {
					_, _ = lazy.sender.Send(ctx, (&market.MsgRevealBid{Job: e.Job, Stage: uint16(s), Price: price(s), Salt: salt}).Raw())
				}
			}
		}
	}()
	id, _ := n.postPipeline(t)
	j, err := n.c.Job(n.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.Tasks[0].Slots[0].Provider != prov1.agent.Address() || j.Tasks[0].Slots[1].Provider != lazy.addr || j.Tasks[1].Slots[0].Provider != lazy.addr {
		t.Fatalf("slots %+v %+v: not the chains this test needs", j.Tasks[0].Slots, j.Tasks[1].Slots)
	}
	// Until stage 0's commit window is over (and a little after).
	if err := n.c.WaitHeight(n.ctx, int64(j.Tasks[0].CommitDeadline)+3); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	j, err = n.c.Job(n.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("pushes the lazy provider received: %d; its stage-0 slot %+v", len(pushed), j.Tasks[0].Slots[1])
	if copied || j.Tasks[0].Slots[1].Committed {
		t.Errorf("the lazy co-provider got prov1's stage-0 output before its own commitment and committed it")
	}
	if after := n.worth(lazy.addr); !after.Lt(before) {
		t.Errorf("lazy provider worth %s -> %s: not slashed", types.FormatAmount(before), types.FormatAmount(after))
	}
}
