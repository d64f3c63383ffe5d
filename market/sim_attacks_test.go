package market

import (
	"fmt"
	"math/big"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// The attack simulations of docs/economics.md ("Attacks on the trust
// layer"): jobs through the real Keeper, with four validators, the
// attackers' profit per job read from their balances, bonded and unbonding
// stake before and after (fresh identities at the minimum stake, as in
// TestEconomics), and the honest parties' alongside.

type atkNet struct {
	*testNet
	vals  []types.Address
	fresh int
}

func newAtkNet(t *testing.T) *atkNet {
	accts := []testAccount{{client, types.OGPU(100_000)}, {addrOf("shell"), types.OGPU(100_000)}}
	for i := range 4 {
		accts = append(accts, testAccount{addrOf(fmt.Sprint("v", i)), types.OGPU(2_000)})
	}
	n := newTestNet(t, genesis.DefaultParams(), accts, []string{"v0", "v1", "v2", "v3"})
	a := &atkNet{testNet: n, vals: n.validators}
	return a
}

// provider funds, registers and bonds a fresh provider at the minimum stake.
func (a *atkNet) provider(tag string) types.Address {
	a.fresh++
	p := addrOf(fmt.Sprint(tag, a.fresh))
	a.must("fund", func(k *Keeper) error { return k.esc.Send(client, p, types.OGPU(110)) })
	a.register(p, types.OGPU(100), gpuInfo(tag))
	return p
}

// worth is balance + bonded + unbonding.
func (a *atkNet) worth(p types.Address) *big.Int {
	e := a.esc()
	w := new(uint256.Int).Add(e.Balance(p), e.Bonded(p))
	w.Add(w, e.UnbondingTotal(p))
	return w.ToBig()
}

// award posts m from poster, has bidders bid prices, and returns the job
// once awarded.
func (a *atkNet) award(poster types.Address, m *MsgPostJob, bidders []types.Address, prices []*uint256.Int) uint64 {
	id := a.post(poster, m)
	for i, p := range bidders {
		a.bid(p, id, 0, prices[i])
	}
	a.advanceTo(a.job(id).BidEnd + 1)
	for i, p := range bidders {
		a.revealBid(p, id, 0, prices[i])
	}
	a.advanceTo(a.job(id).RevealEnd + 1)
	return id
}

func (a *atkNet) commitReveal(id uint64, results map[types.Address]types.Hash, order []types.Address) {
	salt := hashOf("result salt")
	for _, p := range order {
		a.must("commit", func(k *Keeper) error {
			return k.CommitResult(p, &verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: verifier.ResultCommitment(results[p], salt, p)})
		})
	}
	a.endBlock()
	for _, p := range order {
		a.must("reveal", func(k *Keeper) error {
			return k.RevealResult(p, &verifier.MsgRevealResult{Job: id, Stage: 0, Result: results[p], Salt: salt})
		})
	}
}

// finish ends blocks until the job completes.
func (a *atkNet) finish(id uint64) {
	for a.job(id).State.Open() {
		if a.height > 100_000 {
			a.tb.Fatalf("job %d still open", id)
		}
		a.endBlock()
	}
}

// finishAudited ends blocks until the job completes; when the beacon
// draws its task for an audit, every validator re-executes it and votes
// truth. It reports whether it was audited.
func (a *atkNet) finishAudited(id uint64, truth types.Hash) bool {
	audited := false
	for a.job(id).State.Open() {
		if a.height > 100_000 {
			a.tb.Fatalf("job %d still open", id)
		}
		if tk, ok := a.ver().GetTask(id, 0); ok && tk.Status == verifier.TaskDisputed && tk.Audit == verifier.AuditRandom && len(a.ver().Votes(id, 0)) == 0 {
			audited = true
			a.vote(id, 0, truth, a.vals...)
			continue
		}
		a.endBlock()
	}
	return audited
}

func perJob(x *big.Int, jobs int) *big.Rat {
	return new(big.Rat).SetFrac(x, big.NewInt(int64(jobs)))
}

func ogpuStr(r *big.Rat) string {
	f, _ := new(big.Rat).Quo(r, new(big.Rat).SetInt(types.OGPU(1).ToBig())).Float64()
	return fmt.Sprintf("%+.3f oGPU", f)
}

// TestEconomicsCanaryCartel: a cartel holds both slots of every job and
// agrees on junk, never computing. One job in 20 (canary_rate_bps = 500) is
// a validator's canary posted from an account nothing links to it, sealed
// with the known answer, and the beacon draws about one agreed task in 20
// (audit_rate_bps = 500) for a random audit after the reveals. On a canary
// the validator contests during the canary window; on an audited task the
// validators re-execute; either way they vote the answer and both members
// are slashed and tombstoned. Cartel profit per job: ((jobs − caught)·2P −
// caught·2·f·S) / jobs, with caught the canaries and audits of the run
// (ρ ≈ 0.1: 0.9·4 − 0.1·100 ≈ −6.4 oGPU).
func TestEconomicsCanaryCartel(t *testing.T) {
	a := newAtkNet(t)
	jobs := 40
	if testing.Short() {
		jobs = 20
	}
	rate := 20 // one canary in 20 jobs: a network that still posts them at canary_rate_bps 500 (the default is 0 since AppVersion 8)
	backup := a.provider("honest")
	backupBefore := a.worth(backup)
	cartel, honestProfit := new(big.Int), new(big.Int)
	audits := 0
	shell, validator := addrOf("shell"), a.vals[1]
	for i := range jobs {
		m := auctionJob(2, types.OGPU(3))
		m.Seal = hashOf(fmt.Sprint("client seal ", i))
		answer := hashOf(fmt.Sprint("the true answer ", i))
		poster := client
		canary := i%rate == rate-1
		if canary {
			poster = shell
			_, m.Seal = canaryOf(answer, validator)
		}
		c1, c2 := a.provider("cartel"), a.provider("cartel")
		before := new(big.Int).Add(a.worth(c1), a.worth(c2))
		id := a.award(poster, m, []types.Address{c1, c2, backup}, []*uint256.Int{amt("1.2ogpu"), amt("1.2ogpu"), types.OGPU(2)})
		junk := hashOf(fmt.Sprint("junk ", i))
		a.commitReveal(id, map[types.Address]types.Hash{c1: junk, c2: junk}, []types.Address{c1, c2})
		if tk := a.task(id, 0); tk.Status != verifier.TaskConfirming {
			t.Fatalf("job %d: %s after agreeing reveals, want confirming", id, tk.Status)
		}
		if canary {
			hashes, _ := canaryOf(answer, validator)
			a.must("canary", func(k *Keeper) error {
				return k.RevealCanary(validator, &verifier.MsgRevealCanary{Job: id, Stage: 0, Answer: answer, Salt: hashOf("canary salt"), StageHashes: hashes})
			})
			a.vote(id, 0, answer, a.vals...)
		}
		if a.finishAudited(id, answer) && !canary {
			audits++
		}
		after := new(big.Int).Add(a.worth(c1), a.worth(c2))
		cartel.Add(cartel, after.Sub(after, before))
		if canary {
			if j := a.job(id); !j.Compensated.IsZero() || j.CanaryBy != validator {
				t.Fatalf("canary job %d: compensated %s to its poster, canary by %s", id, j.Compensated.Dec(), j.CanaryBy)
			}
		}
	}
	honestProfit.Sub(a.worth(backup), backupBefore)
	got := perJob(cartel, jobs)
	caught := jobs/rate + audits
	want := new(big.Rat).SetFrac(new(big.Int).Sub(new(big.Int).Mul(big.NewInt(int64(jobs-caught)), types.OGPU(4).ToBig()), new(big.Int).Mul(big.NewInt(int64(caught)), types.OGPU(100).ToBig())), big.NewInt(int64(jobs)))
	t.Logf("canary cartel, %d jobs, one canary in %d, %d random audits: cartel profit per job %s (formula %s); honest backup %s per job", jobs, rate, audits, ogpuStr(got), ogpuStr(want), ogpuStr(perJob(honestProfit, jobs)))
	if got.Cmp(want) != 0 {
		t.Errorf("cartel profit per job %s, want %s", ogpuStr(got), ogpuStr(want))
	}
	if got.Sign() >= 0 {
		t.Errorf("a cartel honest only on canaries profits %s per job", ogpuStr(got))
	}
	if honestProfit.Sign() < 0 {
		t.Errorf("the honest backup lost %s", honestProfit)
	}
}

func canaryOf(answer types.Hash, validator types.Address) ([]types.Hash, types.Hash) {
	hashes := []types.Hash{verifier.CanaryStageHash(answer, hashOf("canary salt"))}
	return hashes, verifier.CanarySeal(validator, hashes)
}

// TestEconomicsWithheldInput: the review's H1. A client posts a job and
// never serves its input; the honest winners report it instead of
// committing; the validators cannot fetch it either and vote bad: each
// winner is paid its price for the wasted reservation, nobody is slashed
// or jailed, the client is compensated nothing. Attacker (client) profit
// per job: −2P − the fee share paid to the voters.
func TestEconomicsWithheldInput(t *testing.T) {
	a := newAtkNet(t)
	jobs := 10
	p1, p2, backup := a.provider("honest"), a.provider("honest"), a.provider("honest")
	before := map[types.Address]*big.Int{client: a.worth(client), p1: a.worth(p1), p2: a.worth(p2)}
	for range jobs {
		id := a.award(client, auctionJob(2, types.OGPU(3)), []types.Address{p1, p2, backup}, []*uint256.Int{types.OGPU(1), types.OGPU(1), types.OGPU(2)})
		for _, p := range []types.Address{p1, p2} {
			a.must("report", func(k *Keeper) error {
				return k.ReportInput(p, &verifier.MsgReportInput{Job: id, Stage: 0, Reason: verifier.InputUnavailable})
			})
		}
		if tk := a.task(id, 0); tk.Status != verifier.TaskInputCheck {
			t.Fatalf("job %d: %s after both reported, want input_check", id, tk.Status)
		}
		a.vote(id, 0, verifier.InputBad, a.vals...)
		a.finish(id)
		for _, p := range []types.Address{p1, p2} {
			if prov, _ := GetProvider(a.tree, p); prov.Jailed {
				t.Fatalf("job %d: honest reporter %s jailed", id, p)
			}
		}
	}
	clientProfit := new(big.Int).Sub(a.worth(client), before[client])
	provProfit := new(big.Int).Sub(a.worth(p1), before[p1])
	provProfit.Add(provProfit, new(big.Int).Sub(a.worth(p2), before[p2]))
	t.Logf("client withholds its input, %d jobs: client profit per job %s; the two honest winners %s per job", jobs, ogpuStr(perJob(clientProfit, jobs)), ogpuStr(perJob(provProfit, jobs)))
	if clientProfit.Sign() >= 0 || provProfit.Cmp(new(big.Int).Mul(big.NewInt(int64(jobs)), types.OGPU(4).ToBig())) != 0 {
		t.Errorf("client %s, providers %s: want the client to pay 2 × 2 oGPU per job to the providers", clientProfit, provProfit)
	}
}

// TestEconomicsStreamCopier: the review's H2 after its fix. A provider
// co-assigned with an honest one cannot read the honest output before its
// own commitment (the agents serve streams to the client only), so
// "copying" is guessing a 32-byte hash: it commits junk, the validators
// vote the honest result, it loses f·S. Before the fix it read the result
// hash from the stream and was paid P without computing (the review's
// TestAuditLazyCopier: +4.9999 oGPU).
func TestEconomicsStreamCopier(t *testing.T) {
	a := newAtkNet(t)
	jobs := 10
	honest, backup := a.provider("honest"), a.provider("honest")
	copier, honestProfit := new(big.Int), new(big.Int)
	for i := range jobs {
		c := a.provider("copier")
		before, hb := a.worth(c), a.worth(honest)
		id := a.award(client, auctionJob(2, types.OGPU(3)), []types.Address{c, honest, backup}, []*uint256.Int{types.OGPU(1), amt("1.5ogpu"), types.OGPU(2)})
		truth := hashOf(fmt.Sprint("output ", i))
		a.commitReveal(id, map[types.Address]types.Hash{c: hashOf(fmt.Sprint("guess ", i)), honest: truth}, []types.Address{honest, c})
		a.vote(id, 0, truth, a.vals...)
		a.finish(id)
		copier.Add(copier, new(big.Int).Sub(a.worth(c), before))
		honestProfit.Add(honestProfit, new(big.Int).Sub(a.worth(honest), hb))
	}
	honestProfit.Sub(honestProfit, new(big.Int).Mul(big.NewInt(int64(jobs)), types.OGPU(1).ToBig())) // c = 1 oGPU per result
	t.Logf("stream copier (no stream before its commitment), %d jobs: copier profit per job %s; honest co-provider %s per job (after c = 1 oGPU)", jobs, ogpuStr(perJob(copier, jobs)), ogpuStr(perJob(honestProfit, jobs)))
	if copier.Sign() >= 0 || honestProfit.Sign() < 0 {
		t.Errorf("copier %s, honest %s", copier, honestProfit)
	}
}

// TestInputCheckCannotFetchIsNoOffence: the soak's job 21. A validator
// that could not fetch an input the others fetched (its host had just
// restarted and found no route to the client in time) voted InputBad
// against an InputAvailable outcome and was slashed: "I could not fetch
// it" is an honest statement about one's own reach, which nobody can
// check. Such a vote is now only unpaid. The opposite claim, "I fetched
// it" against a majority that could not, is still slashed: it can be
// wrong only by a lie (or a client that served that validator alone).
func TestInputCheckCannotFetchIsNoOffence(t *testing.T) {
	for _, tc := range []struct {
		name               string
		majority, minority types.Hash
		slashed            bool
	}{
		{"bad against available", verifier.InputAvailable, verifier.InputBad, false},
		{"available against bad", verifier.InputBad, verifier.InputAvailable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAtkNet(t)
			p1, p2, backup := a.provider("honest"), a.provider("honest"), a.provider("honest")
			id := a.inputCheck(p1, p2, backup)
			vote := map[types.Address]types.Hash{}
			before := map[types.Address]*big.Int{}
			for i, v := range a.vals {
				vote[v] = tc.majority
				if i == len(a.vals)-1 {
					vote[v] = tc.minority
				}
				before[v] = a.worth(v)
			}
			a.voteEach(id, vote)
			a.endBlock()
			if tk := a.task(id, 0); tk.Status == verifier.TaskInputCheck {
				t.Fatalf("the input check is still open after every vote was opened")
			}
			for i, v := range a.vals {
				d := new(big.Int).Sub(a.worth(v), before[v])
				switch {
				case i < len(a.vals)-1 && d.Sign() <= 0:
					t.Errorf("validator %d voted with the outcome and earned %s, want a share of the fee", i, d)
				case i == len(a.vals)-1 && tc.slashed && d.Sign() >= 0:
					t.Errorf("the minority voter's worth changed by %s, want a slash", d)
				case i == len(a.vals)-1 && !tc.slashed && d.Sign() != 0:
					t.Errorf("the minority voter's worth changed by %s, want 0 (unpaid, not slashed)", d)
				}
			}
		})
	}
}

// inputCheck awards a job to p1 and p2 (backup bids too), has both report
// its input unavailable, and returns it in its input check.
func (a *atkNet) inputCheck(p1, p2, backup types.Address) uint64 {
	a.tb.Helper()
	id := a.award(client, auctionJob(2, types.OGPU(3)), []types.Address{p1, p2, backup}, []*uint256.Int{types.OGPU(1), types.OGPU(1), types.OGPU(2)})
	for _, p := range []types.Address{p1, p2} {
		a.must("report", func(k *Keeper) error {
			return k.ReportInput(p, &verifier.MsgReportInput{Job: id, Stage: 0, Reason: verifier.InputUnavailable})
		})
	}
	if tk := a.task(id, 0); tk.Status != verifier.TaskInputCheck {
		a.tb.Fatalf("%s after both reported, want input_check", tk.Status)
	}
	return id
}

// voteEach seals and opens each validator's vote on job id's stage 0.
func (a *atkNet) voteEach(id uint64, vote map[types.Address]types.Hash) {
	a.tb.Helper()
	salt := func(v types.Address) types.Hash { return hashOf("vote salt " + v.Hex()) }
	for _, v := range a.vals {
		a.must("seal vote", func(k *Keeper) error {
			return k.CommitVote(v, &verifier.MsgCommitVote{Job: id, Stage: 0, Commitment: verifier.VoteCommitment(id, 0, vote[v], salt(v), v)})
		})
	}
	for _, v := range a.vals {
		a.must("open vote", func(k *Keeper) error {
			return k.VoteDispute(v, &verifier.MsgVoteDispute{Job: id, Stage: 0, Result: vote[v], Salt: salt(v)})
		})
	}
}

// TestEconomicsLazyInputBadVoter: finding 16 made InputBad against an
// available input unpaid instead of slashed. A validator that never
// fetches and always votes InputBad must still earn less than one that
// fetches: over 9 input checks of available inputs and 1 of a withheld
// one, it is paid on the withheld one only, the honest voters on all ten.
func TestEconomicsLazyInputBadVoter(t *testing.T) {
	a := newAtkNet(t)
	lazy, honest := a.vals[len(a.vals)-1], a.vals[0]
	lazyBefore, honestBefore := a.worth(lazy), a.worth(honest)
	for i := range 10 {
		// Fresh providers each job: after an available input the task
		// reopens and these never commit (no-shows, jailed).
		id := a.inputCheck(a.provider("p"), a.provider("p"), a.provider("backup"))
		truth := verifier.InputAvailable
		if i == 9 {
			truth = verifier.InputBad // the client withheld it: nobody could fetch it
		}
		vote := map[types.Address]types.Hash{}
		for _, v := range a.vals {
			vote[v] = truth
		}
		vote[lazy] = verifier.InputBad
		a.voteEach(id, vote)
		a.endBlock()
		a.finish(id)
	}
	lazyGain := new(big.Int).Sub(a.worth(lazy), lazyBefore)
	honestGain := new(big.Int).Sub(a.worth(honest), honestBefore)
	t.Logf("10 input checks (9 available): the lazy InputBad voter gained %s, an honest voter %s", lazyGain, honestGain)
	if lazyGain.Sign() < 0 {
		t.Errorf("the lazy voter lost %s: an unfetchable input is no offence", lazyGain)
	}
	if lazyGain.Cmp(new(big.Int).Div(honestGain, big.NewInt(5))) >= 0 {
		t.Errorf("the lazy voter gained %s, an honest one %s: voting bad without fetching must not pay", lazyGain, honestGain)
	}
}
