package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// logTaps lets a test see the log lines of its agents (testWriter calls
// the tap registered for its *testing.T).
var logTaps sync.Map // *testing.T -> func(name, line string)

func tapLogs(t *testing.T, f func(name, line string)) {
	logTaps.Store(t, f)
	t.Cleanup(func() { logTaps.Delete(t) })
}

// h1Wait polls job id until cond holds.
func h1Wait(n *testNet, id uint64, what string, cond func(*chain.JobView) bool) *chain.JobView {
	n.t.Helper()
	for {
		j, err := n.c.Job(n.ctx, id)
		if err == nil && cond(j) {
			return j
		}
		select {
		case <-n.ctx.Done():
			n.t.Fatalf("job %d: %s: %v (last error %v)", id, what, n.ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (n *testNet) balance(name string) *uint256.Int {
	n.t.Helper()
	a, err := n.c.Account(n.ctx, addrOf(n, name))
	if err != nil {
		n.t.Fatal(err)
	}
	return a.Balance
}

func addrOf(n *testNet, name string) types.Address {
	return ethcrypto.PubkeyToAddress(n.keys[name].PublicKey)
}

// TestH1WithheldPromptReportedNotSlashed is the review's H1 attack: a
// client posts an inference job and never serves its prompt. Before, the
// winners and the backup missed the commit deadline, were slashed and
// jailed as no-shows, and the client was paid half of every slash. Now
// the winners report the input unavailable, the validator cannot fetch
// it either and votes it bad: the task settles "bad_input", every winner
// is paid its price (the reservation the client wasted), nobody is
// slashed or jailed, and the client's balance goes down.
func TestH1WithheldPromptReportedNotSlashed(t *testing.T) {
	n := newTestNet(t)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	n.provider("prov3", 60, false)
	cl := n.client()
	before := n.balance("client")

	// The prompt's hash is on chain; its bytes are nowhere.
	in := &LLMInput{Version: 1, Prompt: "Once upon a time"}
	lj := n.job(24)
	posted := n.postWithheld(cl, lj, in.Hash(), in.Prompt)
	j := h1Wait(n, posted.Job, "completed", func(j *chain.JobView) bool { return !j.State.Open() })
	after := n.balance("client")
	t.Logf("job %d %s: paid=%s refunded=%s compensated=%s validator_fee=%s", j.ID, j.StateName,
		types.FormatAmount(j.Paid), types.FormatAmount(j.Refunded), types.FormatAmount(j.Compensated), types.FormatAmount(j.FeeSpent))
	t.Logf("client balance %s -> %s", types.FormatAmount(before), types.FormatAmount(after))
	for _, name := range []string{"prov1", "prov2", "prov3"} {
		st, err := n.c.Stake(n.ctx, addrOf(n, name))
		if err != nil {
			t.Fatal(err)
		}
		pv, err := n.c.Provider(n.ctx, addrOf(n, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s bonded=%s jailed=%v until=%d", name, types.FormatAmount(st.Bonded), pv.Jailed, pv.JailedUntil)
		if !st.Bonded.Eq(types.OGPU(200)) || pv.Jailed {
			t.Errorf("%s: bonded %s, jailed %v: a provider whose client withheld the input is not slashed or jailed", name, types.FormatAmount(st.Bonded), pv.Jailed)
		}
	}
	if !after.Lt(before) {
		t.Errorf("client balance %s -> %s: a client that withholds its input must not gain", types.FormatAmount(before), types.FormatAmount(after))
	}
	if !j.Compensated.IsZero() {
		t.Errorf("client compensated %s for no-shows it caused", types.FormatAmount(j.Compensated))
	}
	task := j.Tasks[0]
	if task.Verdict != verifier.InputBad {
		t.Fatalf("task %+v: want settled on the validators' input_bad vote", task)
	}
	live := 0
	for _, s := range task.Slots {
		if s.NoShow {
			t.Errorf("slot %s is a no-show: it reported the input", s.Provider.Hex())
		}
		live++
	}
	paid := new(uint256.Int).Mul(task.Price, uint256.NewInt(uint64(live)))
	if live != 2 || !j.Paid.Eq(paid) {
		t.Errorf("%d slots paid %s: want the 2 winners paid their price (%s each) for the wasted reservation", live, types.FormatAmount(j.Paid), types.FormatAmount(task.Price))
	}
	if diff := new(uint256.Int).Sub(before, after); diff.Lt(paid) {
		t.Errorf("the client lost %s, less than the %s of reservations it wasted", types.FormatAmount(diff), types.FormatAmount(paid))
	}
	n.supplyIsCap()
}

// TestH1PromptTooLongNotBid: providers with a 512-token context do not
// bid on a job whose declared prompt plus max_tokens exceed it, nor on a
// job that declares no prompt length and asks for more than half the
// context; each says why in its log. A job that fits is bid on, run and
// paid (the client declares the prompt's length, here the byte bound).
func TestH1PromptTooLongNotBid(t *testing.T) {
	n := newTestNet(t)
	var mu sync.Mutex
	reasons := map[string]int{}
	tapLogs(t, func(name, line string) {
		if !strings.Contains(line, "not bidding") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.Contains(line, "exceed this provider's context of 512 tokens"):
			reasons["declared"]++
		case strings.Contains(line, "declares no prompt length"):
			reasons["undeclared"]++
		}
	})
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	cl := n.client()

	long := n.job(24)
	long.PromptTokens = 500 // 500 + 24 > 512
	ctx, cancel := context.WithTimeout(n.ctx, time.Minute)
	defer cancel()
	res, err := cl.RunLLM(ctx, long, nil, nil)
	if err == nil || res == nil || res.Outcome != "expired" {
		t.Fatalf("a job too long for every provider's context: outcome %+v, err %v: want it to expire with no bids", res, err)
	}
	bids, err := n.c.Bids(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	if len(bids) != 0 {
		t.Fatalf("job %d got %d bids", res.Job, len(bids))
	}

	// No declared length, max_tokens above half the context.
	in := &LLMInput{Version: 1, Prompt: "Once upon a time"}
	lj := n.job(300)
	msg := &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModeAuction, Model: lj.Model, ModelSize: lj.ModelSize,
		Stages: 1, Redundancy: 2, MaxPrice: types.OGPU(50), Req: lj.Req, Input: in.Hash(),
		Windows: lj.Windows, MaxTokens: 300,
	}
	_, posted, err := cl.postJob(n.ctx, msg, Runtime)
	if err != nil {
		t.Fatal(err)
	}
	j := h1Wait(n, posted.Job, "expired", func(j *chain.JobView) bool { return !j.State.Open() })
	if j.State != market.JobExpired {
		t.Fatalf("job %d is %s: want expired with no bids", j.ID, j.StateName)
	}
	mu.Lock()
	got := map[string]int{"declared": reasons["declared"], "undeclared": reasons["undeclared"]}
	mu.Unlock()
	if got["declared"] < 2 || got["undeclared"] < 2 {
		t.Fatalf("not-bidding reasons logged %v: want both providers to say why, for both jobs", got)
	}

	// Control: a job that fits is bid on and paid; the client declared
	// the prompt's length.
	res, err = cl.RunLLM(n.ctx, n.job(24), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err = n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != "agreed" || j.PromptTokens != PromptTokenBound("Once upon a time") {
		t.Fatalf("control job: outcome %s, prompt_tokens %d: want agreed with the declared bound %d", res.Outcome, j.PromptTokens, PromptTokenBound("Once upon a time"))
	}
}

// TestH1AvailableAfterCheck: the client serves its prompt to validators
// only (the providers cannot reach it). The winners report the input
// unavailable; the validator fetches it, votes it available and serves
// it; the winners fetch it from the validator in their fresh window,
// compute and commit: the job settles agreed and pays them, and nobody is
// slashed.
func TestH1AvailableAfterCheck(t *testing.T) {
	n := newTestNet(t)
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	cl := n.client()
	val := n.validator.Address()
	cl.Host.SetAuthorize(func(ctx context.Context, remote peer.ID, h types.Hash) error {
		if a, err := p2p.AddressOf(remote); err != nil || a != val {
			return errors.New("this client serves validators only")
		}
		return cl.Access.Authorize(ctx, remote, h)
	})
	var mu sync.Mutex
	var lines []string
	res, err := cl.RunLLM(n.ctx, n.job(24), func(f string, a ...any) {
		mu.Lock()
		lines = append(lines, f)
		mu.Unlock()
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != "agreed" || !strings.Contains(res.Text, "Lily") {
		t.Fatalf("outcome %s text %q: want the agreed greedy answer", res.Outcome, res.Text)
	}
	mu.Lock()
	all := strings.Join(lines, "\n")
	mu.Unlock()
	for _, want := range []string{"reported the input", "validators check the input", "found the input available"} {
		if !strings.Contains(all, want) {
			t.Errorf("client progress lacks %q", want)
		}
	}
	j, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range j.Tasks[0].Slots {
		if s.NoShow || !s.Revealed {
			t.Errorf("slot %+v: want every winner to compute after the check", s)
		}
	}
	paid := new(uint256.Int).Mul(j.Prices[0], uint256.NewInt(2))
	if !res.Paid.Eq(paid) {
		t.Errorf("paid %s, want 2 × %s", res.Paid, j.Prices[0])
	}
	for _, name := range []string{"prov1", "prov2"} {
		st, err := n.c.Stake(n.ctx, addrOf(n, name))
		if err != nil {
			t.Fatal(err)
		}
		if !st.Bonded.Eq(types.OGPU(200)) {
			t.Errorf("%s bonded %s: nobody is slashed", name, st.Bonded)
		}
	}
	n.supplyIsCap()
}

// TestH1ValidatorFindsClient: a validator that is not connected to a
// job's client finds it for an input check (an honest client it cannot
// reach would be voted bad): the client's peer id is recovered from the
// transaction that posted the job, its addresses from the DHT.
func TestH1ValidatorFindsClient(t *testing.T) {
	n := newTestNet(t)
	cl := n.client()
	in := &LLMInput{Version: 1, Prompt: "Once upon a time"}
	lj := n.job(24)
	lj.Model, lj.ModelSize = types.Hash{1}, 1
	posted := n.postWithheld(cl, lj, in.Hash(), in.Prompt)
	j, err := n.c.Job(n.ctx, posted.Job)
	if err != nil {
		t.Fatal(err)
	}
	id, err := clientPeer(n.ctx, n.c, j)
	if err != nil || id != cl.Host.ID() {
		t.Fatalf("client peer %s, %v: want %s", id, err, cl.Host.ID())
	}
	k, _ := ethcrypto.GenerateKey()
	h, store := n.host("validator2", k)
	if len(peersOf(h, j.Client)) != 0 {
		t.Skip("the new host is already connected to the client")
	}
	w := NewValidator(n.c, k, h, store, n.lo)
	w.Logger = n.validator.Logger
	w.dialClient(n.ctx, j)
	if len(peersOf(h, j.Client)) == 0 {
		t.Fatal("the validator did not reach the job's client")
	}
}

// postWithheld posts an inference job (r = 2) on lj's terms naming input
// as its prompt (prompt's bytes, for the declared length), as a client
// that serves nothing: the providers must report it or find it.
func (n *testNet) postWithheld(cl *Client, lj LLMJob, input types.Hash, prompt string) *market.EventJobPosted {
	n.t.Helper()
	msg := &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModeAuction, Model: lj.Model, ModelSize: lj.ModelSize,
		Stages: 1, Redundancy: 2, MaxPrice: lj.MaxPrice, Req: lj.Req, Input: input,
		Windows: lj.Windows, MaxTokens: lj.MaxTokens, PromptTokens: PromptTokenBound(prompt),
	}
	_, posted, err := cl.postJob(n.ctx, msg, Runtime)
	if err != nil {
		n.t.Fatal(err)
	}
	return posted
}
