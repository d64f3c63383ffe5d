package agent

import (
	"context"
	"testing"
	"time"

	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// TestInputCheckMarginScalesWithWindow: a validator judging an input
// check (or a session dispute) stops a quarter of the vote window before
// the seal deadline (at least 3 blocks) and seals, not a fixed 3 blocks
// before. Finding 6 of the soak: a validator still fetching 52 MB under
// load sealed 3 blocks before the deadline, its seal landed late and was
// refused, and it was slashed for missing the vote.
func TestInputCheckMarginScalesWithWindow(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		sealBy, deadline, want uint64
	}{
		{name: "dispute_blocks 100 (default): seal window 50", sealBy: 150, deadline: 200, want: 138},
		{name: "dispute_blocks 40", sealBy: 520, deadline: 540, want: 515},
		{name: "short window keeps 3 blocks", sealBy: 105, deadline: 110, want: 102},
		{name: "odd dispute_blocks", sealBy: 150, deadline: 201, want: 138},
		{name: "seal deadline within the margin", sealBy: 2, deadline: 4, want: 2},
		{name: "no open phase", sealBy: 50, deadline: 50, want: 47},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inputCheckBy(tc.sealBy, tc.deadline); got != tc.want {
				t.Errorf("inputCheckBy(seal by %d, deadline %d) = %d, want %d", tc.sealBy, tc.deadline, got, tc.want)
			}
		})
	}
}

// TestInputCheckSealWhileNodeDown is finding 6 from the validator's side:
// the validator's node stops answering just as it seals its input-check
// vote (a restart, a pause, a mempool full of spam), for about 7 blocks
// here. Before, the seal was sent once, 3 blocks before the seal deadline:
// the vote was lost, and the validator slashed for missing it. Now the
// validator seals a quarter of the window (12 blocks) before, and sends
// the seal (and then the opening) again until the node answers: the vote
// counts, and the task settles on it.
func TestInputCheckSealWhileNodeDown(t *testing.T) {
	n := newTestNet(t) // dispute_blocks 100: votes sealed for 50 blocks, a margin of 12
	n.provider("prov1", 40, false)
	n.provider("prov2", 50, false)
	cl := n.client()

	// The node goes down at the validator's first seal, for a few
	// blocks' time.
	var downs int
	hook := func(tx cmttypes.Tx) {
		t0, err := types.DecodeTx(tx)
		if err != nil || downs > 0 || len(t0.Body.Msgs) == 0 || t0.Body.Msgs[0].Type != types.MsgTypeCommitVote {
			return
		}
		downs++
		n.validatorRPC.down.Store(true)
		time.AfterFunc(800*time.Millisecond, func() { n.validatorRPC.down.Store(false) })
	}
	n.validatorRPC.onBroadcast.Store(&hook)

	// A withheld prompt: the providers report it, the validator cannot
	// fetch it and votes it bad.
	in := &LLMInput{Version: 1, Prompt: "Once upon a time"}
	lj := n.job(24)
	lj.Windows.Execute = 16
	posted := n.postWithheld(cl, lj, in.Hash(), in.Prompt)
	select {
	case r := <-n.checks:
		if r.err != nil {
			t.Fatalf("the input check of job %d ended in %v: the vote was lost while the node was down", r.job, r.err)
		}
	case <-n.ctx.Done():
		t.Fatal("no input check")
	}
	if n.validatorRPC.refused.Load() == 0 {
		t.Fatal("the node was never down at the seal: the test tested nothing")
	}
	j := h1Wait(n, posted.Job, "completed", func(j *chain.JobView) bool { return !j.State.Open() })
	if v := j.Tasks[0].Verdict; v != verifier.InputBad {
		t.Fatalf("task settled on %x: want the validator's input_bad vote", v[:8])
	}
}

// TestJudgeInputAbstainsWhenNodeNeverAnswers: a validator whose node does
// not answer at all until it must seal reads the job again and again, and
// then abstains (a vote that counts as taking part, never paid) instead of
// not voting: before, its first failed read of the job ended the check
// with no vote, and it was slashed for missing it once its node was back.
func TestJudgeInputAbstainsWhenNodeNeverAnswers(t *testing.T) {
	n := newTestNet(t)
	cl := n.client()
	in := &LLMInput{Version: 1, Prompt: "Once upon a time"}
	lj := n.job(24)
	lj.Model, lj.ModelSize = types.Hash{1}, 1
	posted := n.postWithheld(cl, lj, in.Hash(), in.Prompt)
	n.validatorRPC.down.Store(true)
	defer n.validatorRPC.down.Store(false)
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
	defer cancel()
	vote, why, err := n.validator.JudgeInput(ctx, posted.Job, 0)
	if err != nil || vote != verifier.Abstain {
		t.Fatalf("vote %s (%s), err %v: want an abstention", inputVoteName(vote), why, err)
	}
	if n.validatorRPC.refused.Load() < 2 {
		t.Fatalf("the job was read %d times while the node was down: want it read again", n.validatorRPC.refused.Load())
	}
}
