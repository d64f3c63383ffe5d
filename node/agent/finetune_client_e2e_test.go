package agent

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/runtime/llm/train"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// ftPeer is a scripted fine-tune provider: registered in this build's
// training class, bonded, with a libp2p host, its own access rules and a
// token stream server, and no training: it plays the provider side of the
// client's contract by hand (the provider agent that trains is the
// lead's), so that the client's half is tested against real chain
// settlement and real libp2p transfers. Its "trained" head is the base
// head with one byte flipped, the same for every honest peer.
type ftPeer struct {
	t      *testing.T
	name   string
	addr   types.Address
	host   *p2p.Host
	store  *blobstore.Store
	access *Access
	feeds  *feeds
	sender *node.Sender
	price  *uint256.Int
	// serve is the head the peer's file carries (nil: the committed one);
	// what it commits is always the honest root and final.
	serve []train.Tensor

	mu      sync.Mutex
	dataset []byte // what it fetched from the client
	model   types.Hash
}

func (n *testNet) ftPeer(name string, price *uint256.Int) *ftPeer {
	n.t.Helper()
	nodeKey, _ := ethcrypto.GenerateKey()
	h, store := n.host(name, nodeKey)
	k := n.keys[name]
	p := &ftPeer{t: n.t, name: name, addr: ethcrypto.PubkeyToAddress(k.PublicKey), host: h, store: store, access: NewAccess(n.c),
		feeds: &feeds{}, sender: node.NewSender(n.c, k), price: price}
	h.SetAuthorize(p.access.Authorize)
	serveStreams(h, p.feeds, p.access, func(context.Context, uint64) error { return nil }, time.Minute)
	addrs := h.Addrs()
	if len(addrs) > market.MaxAddrs {
		addrs = addrs[:market.MaxAddrs]
	}
	info := market.ProviderInfo{PeerID: h.ID().String(), Addrs: addrs, Attributes: []string{"ram/16Gi"},
		Runtimes: []string{RuntimeTrain}, Models: []types.Hash{n.model}, Class: "ft", TrainClass: train.BuildClass()}
	if _, err := p.sender.Send(n.ctx, (&market.MsgRegisterProvider{Info: info}).Raw(), (&escrow.MsgBond{Amount: types.OGPU(200)}).Raw()); err != nil {
		n.t.Fatal(err)
	}
	return p
}

// trainedHead is the honest peers' "trained" head: the base head with one
// byte of output.weight flipped at index at.
func trainedHead(t *testing.T, base string, at int) []train.Tensor {
	t.Helper()
	ts, err := train.ReadCheckpoint(base, train.SetHead)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ts {
		if ts[i].Name == "output.weight" {
			ts[i].Data = bytes.Clone(ts[i].Data)
			ts[i].Data[at] ^= 0x01
		}
	}
	return ts
}

// run bids on every job, and for a job it wins fetches the dataset from
// the client, writes its model file, streams progress lines, commits and
// reveals the honest checkpoint tree.
func (p *ftPeer) run(ctx context.Context, n *testNet, wg *sync.WaitGroup) {
	defer wg.Done()
	blocks, err := n.c.Subscribe(ctx, 1)
	if err != nil {
		return
	}
	bidSalt, resSalt := types.Hash{1}, types.Hash{2}
	for b := range blocks {
		for _, e := range node.EventsOf[market.EventJobPosted](b.Events) {
			msg := &market.MsgCommitBid{Job: e.Job, Commitment: market.BidCommitment(e.Job, 0, p.price, bidSalt, p.addr)}
			if _, err := p.sender.Send(ctx, msg.Raw()); err != nil {
				p.t.Logf("[%s] bid: %v", p.name, err)
			}
		}
		for _, e := range node.EventsOf[market.EventJobRevealing](b.Events) {
			_, _ = p.sender.Send(ctx, (&market.MsgRevealBid{Job: e.Job, Price: p.price, Salt: bidSalt}).Raw())
		}
		for _, e := range node.EventsOf[market.EventJobAwarded](b.Events) {
			if !strings.Contains(strings.Join(e.Providers, ","), p.addr.Hex()) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.work(ctx, n, e.Job, resSalt); err != nil && ctx.Err() == nil {
					p.t.Errorf("[%s] job %d: %v", p.name, e.Job, err)
				}
			}()
		}
	}
}

func (p *ftPeer) work(ctx context.Context, n *testNet, id uint64, salt types.Hash) error {
	f := p.feeds.get(id)
	jv, err := n.c.Job(ctx, id)
	if err != nil {
		return err
	}
	// The dataset comes from the client, which serves it to the winners.
	if err := fetchFromParties(ctx, p.host, n.c, p.store, jv, jv.Input); err != nil {
		return err
	}
	data, err := p.store.Get(jv.Input)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.dataset = data
	p.mu.Unlock()
	// The model file: the base with the served head (train.WriteModel).
	head := trainedHead(p.t, n.modelPath, 100)
	served := head
	if p.serve != nil {
		served = p.serve
	}
	file := filepath.Join(p.t.TempDir(), "model.gguf")
	if err := train.WriteModel(n.modelPath, file, served); err != nil {
		return err
	}
	g, err := p.store.PutFile(file)
	if err != nil {
		return err
	}
	if err := p.access.BindOutput(g, jv, 0); err != nil {
		return err
	}
	p.mu.Lock()
	p.model = g
	p.mu.Unlock()
	// The checkpoint hashes: h_0 the base's, h_N the committed head's, made
	// up in between (nobody bisects agreeing results).
	steps := jv.Finetune.Steps
	final, err := train.HashTensors(head)
	if err != nil {
		return err
	}
	hashes := make([]types.Hash, steps+1)
	hashes[0], hashes[steps] = jv.Finetune.Base, types.Hash(final)
	for k := uint64(1); k < steps; k++ {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], k)
		hashes[k] = sha256.Sum256(b[:])
	}
	root := finetune.Root(hashes)
	// Progress: a few steps, each epoch's end, then the model's hash.
	epochs := int(jv.Finetune.Epochs)
	per := int(steps) / epochs
	for e := 1; e <= epochs; e++ {
		f.push(streamMsg{Piece: FinetuneStepLine(e*per, int(steps))})
		f.push(streamMsg{Piece: FinetuneEpochLine(e, epochs, 2.0/float64(e), 0) + "\n"})
	}
	f.push(streamMsg{Done: true, Result: &g})
	result := market.FinetuneResult(root, types.Hash(final))
	if _, err := p.sender.Send(ctx, (&verifier.MsgCommitResult{Job: id, Commitment: verifier.ResultCommitment(result, salt, p.addr)}).Raw()); err != nil {
		return err
	}
	reveal := &market.MsgRevealFinetune{Job: id, Salt: salt, Root: root, Final: types.Hash(final),
		ProofBase: finetune.Prove(hashes, 0), ProofFinal: finetune.Prove(hashes, steps)}
	for ctx.Err() == nil { // once reveals open
		if _, err := p.sender.Send(ctx, reveal.Raw()); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// The client's half of a fine-tune job against two scripted providers on
// a real chain: the job is awarded, the winners fetch the dataset from the
// client, the client shows their progress (a step bar, the loss per
// epoch), the results agree and are paid, and the client fetches the
// model. The cheaper provider (slot 0, asked first) committed the honest
// tree but serves a model with another head: the client refuses it and
// takes the other provider's, which verifies, byte for byte the base with
// the paid head. A later `ogpu job result` (FetchFinetuneModel, a new
// client on the same store) fetches and verifies it again.
func TestRunFinetuneFetchesThePaidModel(t *testing.T) {
	n := newTestNet(t)
	liar := n.ftPeer("prov1", types.OGPU(1))
	liar.serve = trainedHead(t, n.modelPath, 200)
	honest := n.ftPeer("prov2", types.OGPU(2))
	ctx, cancel := context.WithCancel(n.ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(2)
	go liar.run(ctx, n, &wg)
	go honest.run(ctx, n, &wg)

	cl := n.client()
	j := ftJob(t)
	j.OutDir = t.TempDir()
	j.Windows = market.Windows{Bid: 3, Reveal: 2}
	var steps []int
	var epochs []string
	j.OnStep = func(s, _ int) { steps = append(steps, s) }
	res, err := cl.RunFinetune(n.ctx, j, func(f string, a ...any) { t.Logf("[client] "+f, a...) }, func(l string) { epochs = append(epochs, l) })
	if err != nil {
		t.Fatal(err)
	}
	want := trainedHead(t, n.modelPath, 100)
	final, _ := train.HashTensors(want)
	if res.Outcome != "agreed" || res.Final != types.Hash(final) || res.From != honest.addr || res.Model != filepath.Join(j.OutDir, "finetune-1.gguf") {
		t.Fatalf("result %+v: want the agreed final %x from the honest provider %s", res, final[:8], honest.addr.Hex())
	}
	jv, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	if jv.Tasks[0].Slots[0].Provider != liar.addr {
		t.Fatalf("slot 0 is %s, not the cheaper liar: the test no longer makes the client try the liar first", jv.Tasks[0].Slots[0].Provider.Hex())
	}
	// The liar's file was fetched, refused and dropped; the honest one kept.
	liar.mu.Lock()
	bad := liar.model
	liar.mu.Unlock()
	honest.mu.Lock()
	good, got := honest.model, honest.dataset
	honest.mu.Unlock()
	if cl.Store.Has(bad) || !cl.Store.Has(good) || res.ModelHash != good {
		t.Fatalf("client store: liar's model %v, honest model %v (result's %x)", cl.Store.Has(bad), cl.Store.Has(good), res.ModelHash[:8])
	}
	if !bytes.Equal(got, j.Data) {
		t.Fatal("the provider did not get the dataset from the client")
	}
	expect := filepath.Join(t.TempDir(), "expect.gguf")
	if err := train.WriteModel(n.modelPath, expect, want); err != nil {
		t.Fatal(err)
	}
	if same, err := sameFile(res.Model, expect); err != nil || !same {
		t.Fatalf("the written model is not the base with the paid head (%v)", err)
	}
	if len(epochs) != 2 || len(res.EpochLoss) != 2 || res.EpochLoss[0] != 2 || len(steps) != 2 || steps[1] != int(jv.Finetune.Steps) {
		t.Fatalf("progress: epochs %q losses %v steps %v", epochs, res.EpochLoss, steps)
	}
	// Later, from the hashes the client recorded and the model it holds:
	// verified again into a fresh file, attributed to the honest provider.
	out := filepath.Join(t.TempDir(), "again.gguf")
	m, err := cl.FetchFinetuneModel(n.ctx, res.Job, out)
	if err != nil {
		t.Fatal(err)
	}
	if m.From != honest.addr || m.Final != types.Hash(final) {
		t.Fatalf("fetched again: %+v", m)
	}
	if same, err := sameFile(out, expect); err != nil || !same {
		t.Fatalf("the fetched-again model differs (%v)", err)
	}
	// A later process with an empty store (the base model only): it asks
	// each paid provider which file it made, refuses the liar's again and
	// fetches the honest one over libp2p.
	h2, store2 := n.host("client-later", n.keys["client"])
	if _, err := store2.PutFile(n.modelPath); err != nil {
		t.Fatal(err)
	}
	later := NewClient(n.c, n.keys["client"], h2, store2, NewAccess(n.c))
	out2 := filepath.Join(t.TempDir(), "later.gguf")
	m, err = later.FetchFinetuneModel(n.ctx, res.Job, out2)
	if err != nil {
		t.Fatal(err)
	}
	if m.From != honest.addr || m.Hash != good || store2.Has(bad) {
		t.Fatalf("fetched later: %+v (the liar's model kept: %v)", m, store2.Has(bad))
	}
	if same, err := sameFile(out2, expect); err != nil || !same {
		t.Fatalf("the model fetched later differs (%v)", err)
	}
	// A stranger (not the job's client) is told so before anything is fetched.
	k, _ := ethcrypto.GenerateKey()
	stranger := n.strangerClient(k)
	if _, err := stranger.FetchFinetuneModel(n.ctx, res.Job, filepath.Join(t.TempDir(), "s.gguf")); err == nil || !strings.Contains(err.Error(), "client only") {
		t.Fatalf("stranger: %v", err)
	}
	if _, err := os.Stat(filepath.Join(j.OutDir, "finetune-1.gguf.verify")); !os.IsNotExist(err) {
		t.Fatal("a temporary file was left behind")
	}
}

// strangerClient is a client with a fresh key (no job of its own).
func (n *testNet) strangerClient(k *ecdsa.PrivateKey) *Client {
	h, store := n.host("stranger", k)
	return NewClient(n.c, k, h, store, NewAccess(n.c))
}

// The whole job with the real provider agents (they train in the worker):
// RunFinetune posts it with its default windows, shows the winners'
// progress, the results agree and are paid, and the client writes the
// model from a paid provider's final checkpoint: byte for byte the
// provider's own fine-tuned file, and its greedy output says the phrase of
// the data (the devnet round's check), which the base model's does not.
func TestRunFinetuneWithProviderAgents(t *testing.T) {
	n := newTestNet(t)
	p1 := n.finetuneProvider("prov1", 0)
	p2 := n.finetuneProvider("prov2", 0)
	cl := n.client()
	j := ftJob(t)
	j.Data, j.Epochs = ziggyText(12), 3 // as the runtime's TestLearnsThePhrase
	j.OutDir = t.TempDir()
	const prompt = "Once upon a time, there was a"
	before, err := SampleModel(n.ctx, j.Base, prompt, 40)
	if err != nil || strings.Contains(before, "Ziggy") {
		t.Fatalf("the base model says %q (%v)", before, err)
	}
	var steps []int
	var epochs []string
	j.OnStep = func(s, _ int) { steps = append(steps, s) }
	res, err := cl.RunFinetune(n.ctx, j, func(f string, a ...any) { t.Logf("[client] "+f, a...) }, func(l string) { epochs = append(epochs, l) })
	if err != nil {
		t.Fatal(err)
	}
	jv, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	slots := jv.Tasks[0].Slots
	if res.Outcome != "agreed" || len(slots) != 2 || slots[0].Final == nil || res.Final != *slots[0].Final || (res.From != p1.agent.Address() && res.From != p2.agent.Address()) {
		t.Fatalf("result %+v, slots %+v", res, slots)
	}
	own, err := os.ReadFile(filepath.Join(p1.agent.finetuneDir(taskKey{res.Job, 0}), train.ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(res.Model)
	if err != nil || !bytes.Equal(own, got) {
		t.Fatalf("the client's model is not the provider's file (%d and %d bytes, %v)", len(got), len(own), err)
	}
	if len(epochs) != 3 || len(res.EpochLoss) != 3 || !(res.EpochLoss[2] < res.EpochLoss[0]) || len(steps) == 0 || steps[len(steps)-1] != int(jv.Finetune.Steps) {
		t.Fatalf("progress: epochs %q losses %v steps %v", epochs, res.EpochLoss, steps)
	}
	// The client's model learned the dataset's phrase.
	after, err := SampleModel(n.ctx, res.Model, prompt, 40)
	t.Logf("before %q\nafter  %q", before, after)
	if err != nil || !strings.Contains(after, "Ziggy") {
		t.Fatalf("the fine-tuned model does not say Ziggy: %q (%v)", after, err)
	}
	t.Logf("job %d: %d steps, posted at %d, awarded at %d, completed at %d, %s", res.Job, res.Plan.Steps, res.Posted, res.Awarded, res.Completed, res.Elapsed)
}
