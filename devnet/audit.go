package devnet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Paid means verified (issue 30): comparing r results catches a lone
// liar (round 2), but not a cartel that holds every slot of a job and
// lies the same way in each, nor a provider that is alone on a job. The
// audit rounds show what catches them: a random audit, drawn from the
// validators' randomness beacon after the results are in (cartelRound),
// and the audit of every stage with fewer than r providers before it is
// paid (loneBidderRound). The devnet audits every agreed task
// (devnetAuditRateBps), so that the cartel's audit happens every run.

// CartelReport is the cartel round: two providers of one operator hold
// both slots of alice's job and reveal the same wrong result.
type CartelReport struct {
	// Result is the job as alice's client saw it end: a verdict whose
	// result no provider revealed, so no text.
	Result *agent.LLMResult
	// Members are the cartel's providers, Revealed the result both
	// revealed, Verdict the validators'.
	Members  []types.Address
	Revealed types.Hash
	Verdict  types.Hash
	// Audit is why the task was put to the validators (random), DrawAt
	// the height whose beacon value drew it and Draw the draw (below the
	// audit rate: audited).
	Audit  string
	DrawAt int64
	Draw   uint64
	// Slashed is what each member lost, BondedAfter what it kept;
	// Tombstoned whether the chain tombstoned it.
	Slashed     []*uint256.Int
	BondedAfter []*uint256.Int
	Tombstoned  []bool
	// Compensated is what alice was paid out of the slashes.
	Compensated *uint256.Int
}

// LoneReport is the lone-bidder round: an r = 2 job only one provider
// can take.
type LoneReport struct {
	Result   *agent.LLMResult
	Provider types.Address
	// Short is the stage_short event's policy (audit); Audit the task's
	// audit reason (short); Slots how many slots the task had.
	Short string
	Audit string
	Slots int
}

// cartelBid is the cartel's price: below every other provider's, so
// that it holds both slots.
var cartelBid = pricing.PerToken{Base: milliOGPU(50), PerToken: milliOGPU(10)}

// cartelRound starts prov10 and prov11, one operator's two providers,
// both with the devnet's lie (the same token changed the same way) and
// priced below everyone: they hold both slots of alice's r = 2 job and
// reveal the same wrong result. The comparison sees two agreeing results;
// the random audit drawn from the beacon re-executes the task, the
// validator votes the true result, and both are slashed and tombstoned
// while alice is compensated.
func (d *devnet) cartelRound(report *Report) error {
	ctx, w := d.ctx, d.w
	n := d.beginRound("a cartel holds both slots and lies the same way: a random audit catches it")
	params, err := d.c.Params(ctx)
	if err != nil {
		return err
	}
	mp := params.Market
	fmt.Fprintln(w, "prov10 and prov11 are one operator's two providers (a cartel): both start with --devnet-lie, which changes the same token the same way,")
	fmt.Fprintf(w, "and bid %s for alice's job, below every other provider, so that they hold both of its slots. Their results will agree:\n", types.FormatAmount(cartelPrice(d.storyJob())))
	fmt.Fprintln(w, "comparing them cannot catch the lie. An audit can: an agreed task is drawn for one from the validators' randomness beacon,")
	fmt.Fprintf(w, "after the results are in. This devnet audits EVERY agreed task (audit_rate_bps %d) so that you can watch one; a network audits 1 in %d (%d),\n",
		mp.AuditRateBps, 10_000/genesisAuditRate(), genesisAuditRate())
	fmt.Fprintf(w, "and a caught lie costs each member at least %d × the price (deterrence_bps %d / audit_rate_bps %d), so that lying loses money in expectation.\n",
		mp.DeterrenceBps/max(mp.AuditRateBps, 1), mp.DeterrenceBps, mp.AuditRateBps)
	cartel := make([]*provider, 2)
	for i := range cartel {
		p, err := d.newProvider(d.accts[12+i], cartelBid, true)
		if err != nil {
			return err
		}
		if err := d.startProvider(p, func(c *agent.ProviderConfig) { c.Lie, c.Pipeline, c.Finetune = true, false, false }); err != nil {
			return err
		}
		cartel[i] = p
	}
	defer func() {
		for _, p := range cartel {
			d.stopProvider(p)
		}
	}()
	rep := &CartelReport{Members: []types.Address{cartel[0].acct.addr, cartel[1].acct.addr}}
	report.Cartel = rep
	before := make([]*uint256.Int, len(cartel))
	for i, p := range cartel {
		st, err := d.c.Stake(ctx, p.acct.addr)
		if err != nil {
			return err
		}
		before[i] = st.Bonded
	}
	aliceBefore, err := d.c.Account(ctx, d.accts[0].addr)
	if err != nil {
		return err
	}

	job := d.storyJob()
	fmt.Fprintf(w, "alice: ogpu job run --prompt %q --max-tokens %d --redundancy 2 --max-price 5ogpu\n", job.Prompt, job.MaxTokens)
	watch, err := d.watchAudit(d.accts[0].addr)
	if err != nil {
		return err
	}
	res, runErr := d.runLLM(job)
	watch.wait(res)
	rep.Result = res
	if res == nil || res.Completed == 0 {
		return fmt.Errorf("the cartel's job did not complete: %v", runErr)
	}
	if runErr != nil {
		// The validators' result is one no provider revealed: alice has
		// no output to fetch, and is refunded and compensated.
		fmt.Fprintf(w, "alice's client: %s\n", d.names().Replace(runErr.Error()))
	}
	j, err := d.c.Job(ctx, res.Job)
	if err != nil {
		return err
	}
	if len(j.Tasks) != 1 {
		return fmt.Errorf("job %d has %d tasks, want 1", res.Job, len(j.Tasks))
	}
	t := j.Tasks[0]
	rep.Verdict, rep.Audit = t.Verdict, t.Audit
	seen := watch.snapshot()
	rep.DrawAt, rep.Draw = seen.confirmedAt, seen.draw
	for _, s := range t.Slots {
		if !hasMember(rep.Members, s.Provider) {
			return fmt.Errorf("job %d: slot held by %s, not the cartel (prov10, prov11): the cartel did not hold every slot", res.Job, d.name(s.Provider))
		}
		if s.Result == nil {
			return fmt.Errorf("job %d: %s revealed nothing", res.Job, d.name(s.Provider))
		}
		if rep.Revealed == (types.Hash{}) {
			rep.Revealed = *s.Result
		} else if *s.Result != rep.Revealed {
			return fmt.Errorf("job %d: the cartel revealed two results, %x and %x: it did not lie the same way", res.Job, rep.Revealed[:6], s.Result[:6])
		}
	}
	if len(t.Slots) != 2 {
		return fmt.Errorf("job %d has %d slots, want the cartel's 2", res.Job, len(t.Slots))
	}
	fmt.Fprintf(w, "\njob %d, as the chain settled it:\n", res.Job)
	fmt.Fprintf(w, "   awarded to the cartel: prov10 and prov11 hold both slots at %s each (the uniform price: the best losing bid)\n", types.FormatAmount(t.Price))
	fmt.Fprintf(w, "   both revealed the same result %x...: the comparison saw 2 of 2 agreeing (the lie: one token of the text changed)\n", rep.Revealed[:6])
	if rep.Audit != verifier.AuditRandom || seen.draw >= mp.AuditRateBps || seen.confirmedAt == 0 {
		return fmt.Errorf("job %d: audit %q (draw %d at beacon height %d); want a random audit drawn below %d", res.Job, rep.Audit, seen.draw, seen.confirmedAt, mp.AuditRateBps)
	}
	fmt.Fprintf(w, "   drawn for an audit from the beacon value of height %d (made with the validator's precommits of that block, after both results were in): draw %d < audit_rate_bps %d\n",
		seen.confirmedAt, seen.draw, mp.AuditRateBps)
	honest := ""
	if len(report.Rounds) > 0 && report.Rounds[0].Result == rep.Verdict {
		honest = " (round 1's honest result)"
	}
	fmt.Fprintf(w, "   the validator re-executed it and voted %x...%s: not the cartel's result; settled %s\n", rep.Verdict[:6], honest, res.Outcome)
	if res.Outcome != "verdict" || rep.Verdict == rep.Revealed || rep.Verdict == (types.Hash{}) {
		return fmt.Errorf("job %d settled %s on %x: want a verdict against the cartel's %x", res.Job, res.Outcome, rep.Verdict[:6], rep.Revealed[:6])
	}
	for i, p := range cartel {
		pv, err := d.c.Provider(ctx, p.acct.addr)
		if err != nil {
			return err
		}
		st, err := d.c.Stake(ctx, p.acct.addr)
		if err != nil {
			return err
		}
		slashed := seen.slashed[p.acct.addr]
		if slashed == nil {
			slashed = new(uint256.Int)
		}
		rep.Slashed = append(rep.Slashed, slashed)
		rep.BondedAfter = append(rep.BondedAfter, st.Bonded)
		rep.Tombstoned = append(rep.Tombstoned, pv.Tombstoned)
		floor := market.AtRisk(mp, t.Price)
		fmt.Fprintf(w, "   %s slashed %s, bonded %s -> %s (the larger of %d%% of its stake and %d × the price, %s), tombstoned %v\n",
			p.acct.name, types.FormatAmount(slashed), types.FormatAmount(before[i]), types.FormatAmount(st.Bonded),
			mp.FraudSlashBps/100, mp.DeterrenceBps/max(mp.AuditRateBps, 1), types.FormatAmount(floor), pv.Tombstoned)
		if slashed.IsZero() || !pv.Tombstoned || slashed.Lt(min256(floor, before[i])) {
			return fmt.Errorf("%s (cartel) slashed %s, tombstoned %v: want at least %s and tombstoned", p.acct.name, types.FormatAmount(slashed), pv.Tombstoned, types.FormatAmount(floor))
		}
	}
	rep.Compensated = res.Compensated
	aliceAfter, err := d.c.Account(ctx, d.accts[0].addr)
	if err != nil {
		return err
	}
	if res.Compensated == nil || res.Compensated.IsZero() || (res.Paid != nil && !res.Paid.IsZero()) {
		return fmt.Errorf("job %d: alice compensated %s, providers paid %s: want compensation and nobody paid", res.Job, formatOr0(res.Compensated), formatOr0(res.Paid))
	}
	fmt.Fprintf(w, "   alice: paid nobody, refunded %s, compensated %s out of the slashes (balance %s -> %s); no text: nobody revealed the true result\n",
		types.FormatAmount(res.Refunded), types.FormatAmount(res.Compensated), types.FormatAmount(aliceBefore.Balance), types.FormatAmount(aliceAfter.Balance))
	fmt.Fprintln(w, "the cartel's agents stop: tombstoned, they can never bid again")
	return d.printBalancesAfter(n, res.Completed)
}

// loneBidderRound starts prov12 with 300ogpu bonded and has alice post an
// r = 2 job that asks for 300ogpu of provider stake: prov12 alone can take
// it. The stage is short of r; under the default --short audit it runs on
// prov12 and its result is re-executed by the validators before it is
// paid: it settles "audited", never "agreed".
func (d *devnet) loneBidderRound(report *Report) error {
	ctx, w := d.ctx, d.w
	n := d.beginRound("a lone bidder: fewer than r providers, audited before it is paid")
	const stake = 300
	fmt.Fprintf(w, "prov12 starts with %dogpu bonded; alice's job asks for %dogpu of provider stake, which only prov12 has:\n", stake, stake)
	fmt.Fprintln(w, "one provider for a job of two replicas. Nothing can be compared; what the client chose for a short stage applies")
	fmt.Fprintln(w, "(--short audit, the default): it runs, and the validators re-execute its result before it is paid.")
	p, err := d.newProvider(d.accts[14], pricing.PerToken{Base: milliOGPU(100), PerToken: milliOGPU(40)}, true)
	if err != nil {
		return err
	}
	if err := d.startProvider(p, func(c *agent.ProviderConfig) {
		c.Bond, c.Pipeline, c.Finetune = types.OGPU(stake), false, false
	}); err != nil {
		return err
	}
	defer d.stopProvider(p)
	rep := &LoneReport{Provider: p.acct.addr}
	report.Lone = rep

	job := d.storyJob()
	job.Req.MinStake = types.OGPU(stake)
	job.Short = market.ShortAudit
	fmt.Fprintf(w, "alice: ogpu job run --prompt %q --max-tokens %d --redundancy 2 --max-price 5ogpu --short audit   (and %dogpu of provider stake: only prov12 has it)\n",
		job.Prompt, job.MaxTokens, stake)
	watch, err := d.watchAudit(d.accts[0].addr)
	if err != nil {
		return err
	}
	res, runErr := d.runLLM(job)
	watch.wait(res)
	rep.Result = res
	if runErr != nil {
		return runErr
	}
	j, err := d.c.Job(ctx, res.Job)
	if err != nil {
		return err
	}
	if len(j.Tasks) != 1 {
		return fmt.Errorf("job %d has %d tasks, want 1", res.Job, len(j.Tasks))
	}
	t := j.Tasks[0]
	seen := watch.snapshot()
	rep.Short, rep.Audit, rep.Slots = seen.short, t.Audit, len(t.Slots)
	fmt.Fprintf(w, "verified text (%s, result %x...): %q\n", res.Outcome, res.Result[:6], res.Text)
	switch {
	case rep.Slots != 1 || t.Slots[0].Provider != p.acct.addr:
		return fmt.Errorf("job %d: %d slot(s); want prov12's one", res.Job, rep.Slots)
	case rep.Short != market.ShortAudit:
		return fmt.Errorf("job %d: no stage_short event with policy audit (got %q)", res.Job, rep.Short)
	case res.Outcome != market.OutcomeAudited || rep.Audit != verifier.AuditShort:
		return fmt.Errorf("job %d settled %s (audit %q): want audited, by a short-stage audit", res.Job, res.Outcome, rep.Audit)
	}
	fmt.Fprintf(w, "job %d settled %s after the validator's vote: fewer than r providers: audited, not agreed; prov12 was paid %s (its own bid: with no second bidder the stage clears at its highest winning bid, not alice's cap)\n",
		res.Job, res.Outcome, types.FormatAmount(res.Paid))
	fmt.Fprintln(w, "prov12's agent stops (the rounds after this one are the network's usual providers')")
	return d.printBalancesAfter(n, res.Completed)
}

// printBalancesAfter lets the providers' last transactions of a job that
// completed at height land, then prints the balances after round n.
func (d *devnet) printBalancesAfter(n int, completed int64) error {
	if err := d.c.WaitHeight(d.ctx, completed+2); err != nil {
		return err
	}
	return d.printBalances(fmt.Sprintf("after round %d", n))
}

// cartelPrice is what the cartel bids for job.
func cartelPrice(job agent.LLMJob) *uint256.Int {
	p, err := cartelBid.Price(context.Background(), pricing.JobView{Kind: market.KindInference, MaxTokens: job.MaxTokens, MaxPrice: job.MaxPrice.Dec()})
	if err != nil {
		return new(uint256.Int)
	}
	return p
}

// genesisAuditRate is a network's audit rate (the genesis default).
func genesisAuditRate() uint64 {
	return max(genesis.DefaultMarketParams().AuditRateBps, 1)
}

// mentionsJob reports whether reason names job (as "job N", not a job
// whose id starts with N's digits).
func mentionsJob(reason string, job uint64) bool {
	word := fmt.Sprintf("job %d", job)
	for rest := reason; ; {
		i := strings.Index(rest, word)
		if i < 0 {
			return false
		}
		rest = rest[i+len(word):]
		if rest == "" || rest[0] < '0' || rest[0] > '9' {
			return true
		}
	}
}

func hasMember(list []types.Address, a types.Address) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

func min256(a, b *uint256.Int) *uint256.Int {
	if a.Lt(b) {
		return a
	}
	return b
}

// auditSeen is what an auditWatch saw of its job.
type auditSeen struct {
	job uint64
	// confirmedAt is the height of the task_confirming event: the
	// height whose beacon value draws the task (Task.DrawAt).
	confirmedAt int64
	// audit is the audit_opened reason, draw the random audit's draw.
	audit string
	draw  uint64
	// short is the stage_short policy, if the stage was short.
	short string
	// slashed is what each account lost in the job's slashes.
	slashed map[types.Address]*uint256.Int
}

// auditWatch prints the chain events of an LLM job that the client's
// progress does not (the agreement confirming, the beacon draw of a
// random audit, tombstones, the voters' pay) and keeps what it saw.
type auditWatch struct {
	d    *devnet
	stop context.CancelFunc
	done chan struct{}
	mu   sync.Mutex
	seen auditSeen
}

// watchAudit follows the chain from the next block for the first
// inference job client posts, until it completes (or wait stops it).
func (d *devnet) watchAudit(client types.Address) (*auditWatch, error) {
	sctx, stop := context.WithCancel(d.ctx)
	blocks, err := d.c.Subscribe(sctx, 0)
	if err != nil {
		stop()
		return nil, err
	}
	aw := &auditWatch{d: d, stop: stop, done: make(chan struct{}), seen: auditSeen{slashed: map[types.Address]*uint256.Int{}}}
	names := d.names()
	// A block's lines are printed when the next block arrives (or the
	// watch ends): after the client's lines for the same block, which it
	// prints as soon as it reads the block.
	var lines []string
	say := func(f string, a ...any) { lines = append(lines, "-> "+names.Replace(fmt.Sprintf(f, a...))) }
	flush := func() {
		for _, l := range lines {
			d.println(l)
		}
		lines = lines[:0]
	}
	params, err := d.c.Params(d.ctx)
	if err != nil {
		stop()
		return nil, err
	}
	rate := params.Market.AuditRateBps
	d.goAgent(func() {
		defer close(aw.done)
		defer flush()
		var job uint64
		posted, completed := false, false
		for b := range blocks {
			flush()
			if completed {
				stop()
				continue
			}
			for _, ev := range b.Events {
				switch ev.Type {
				case market.EventJobPosted{}.EventType():
					var e market.EventJobPosted
					if !posted && types.DecodeEvent(ev, &e) == nil && e.Client == client && e.Kind == market.KindInference {
						job, posted = e.Job, true
						aw.mu.Lock()
						aw.seen.job = job
						aw.mu.Unlock()
					}
				case market.EventStageShort{}.EventType():
					var e market.EventStageShort
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						aw.mu.Lock()
						aw.seen.short = e.Policy
						aw.mu.Unlock()
					}
				case market.EventTaskConfirming{}.EventType():
					var e market.EventTaskConfirming
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						aw.mu.Lock()
						aw.seen.confirmedAt = b.Height
						aw.mu.Unlock()
						say("the results agree on %x: confirming until height %d; the audit draw waits for the beacon value of height %d, which nobody knows yet",
							e.Result[:8], e.SettlesAt, b.Height)
					}
				case market.EventAuditOpened{}.EventType():
					var e market.EventAuditOpened
					if !posted || types.DecodeEvent(ev, &e) != nil || e.Job != job {
						continue
					}
					aw.mu.Lock()
					aw.seen.audit = e.Reason
					at := aw.seen.confirmedAt
					aw.mu.Unlock()
					switch e.Reason {
					case verifier.AuditRandom:
						v, err := d.beaconValue(sctx, at, b.Height)
						if err != nil {
							say("audit drawn, but the beacon value of height %d cannot be read: %v", at, err)
							continue
						}
						draw := beacon.Draw(v, market.AuditDomain(job, e.Stage))
						aw.mu.Lock()
						aw.seen.draw = draw
						aw.mu.Unlock()
						say("drawn for an audit: the beacon value of height %d is %x...; draw(value, job %d stage %d) = %d < audit_rate_bps %d: the validators re-execute it",
							at, v[:6], job, e.Stage, draw, rate)
					case verifier.AuditShort:
						say("a short-stage audit, not a draw: a stage with fewer than r providers (%d of %d) is audited with certainty", e.Agreeing, e.Redundancy)
					}
				case market.EventSlashed{}.EventType():
					var e market.EventSlashed
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job && e.Amount != nil {
						aw.mu.Lock()
						if aw.seen.slashed[e.Account] == nil {
							aw.seen.slashed[e.Account] = new(uint256.Int)
						}
						aw.seen.slashed[e.Account].Add(aw.seen.slashed[e.Account], e.Amount)
						aw.mu.Unlock()
					}
				case market.EventProviderJailed{}.EventType():
					var e market.EventProviderJailed
					if posted && types.DecodeEvent(ev, &e) == nil && e.Tombstoned && mentionsJob(e.Reason, job) {
						say("%s tombstoned (never eligible again): %s", e.Provider.Hex(), e.Reason)
					}
				case market.EventVotersPaid{}.EventType():
					var e market.EventVotersPaid
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						say("%d voting validator(s) paid %s out of the validator fee alice locked", e.Voters, types.FormatAmount(e.Amount))
					}
				case market.EventJobCompleted{}.EventType():
					var e market.EventJobCompleted
					if posted && types.DecodeEvent(ev, &e) == nil && e.Job == job {
						completed = true // its lines go out with the next block
					}
				}
			}
		}
	})
	return aw, nil
}

// beaconValue reads the final beacon value of height at, at height h.
func (d *devnet) beaconValue(ctx context.Context, at, h int64) (types.Hash, error) {
	if at <= 0 {
		return types.Hash{}, errors.New("no confirming height seen")
	}
	res, err := d.c.Query(ctx, chain.QueryStore, beacon.ValueKey(uint64(at)), h, false)
	if err != nil {
		return types.Hash{}, err
	}
	if len(res.Value) != 32 {
		return types.Hash{}, fmt.Errorf("no final value at height %d", h)
	}
	return types.Hash(res.Value), nil
}

// wait returns once the watch has seen the job complete (the client saw
// it: res completed) or, if it did not, stops it. It waits at most a few
// blocks past the completion.
func (aw *auditWatch) wait(res *agent.LLMResult) {
	if res == nil || res.Completed == 0 {
		aw.stop()
		<-aw.done
		return
	}
	late, stop := aw.d.afterBlocks(res.Completed + 10)
	defer stop()
	select {
	case <-aw.done:
	case <-late:
		aw.stop()
		<-aw.done
	}
}

// snapshot is what the watch saw.
func (aw *auditWatch) snapshot() auditSeen {
	aw.mu.Lock()
	defer aw.mu.Unlock()
	s := aw.seen
	s.slashed = map[types.Address]*uint256.Int{}
	for a, v := range aw.seen.slashed {
		s.slashed[a] = v.Clone()
	}
	return s
}
