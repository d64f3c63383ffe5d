package market

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// The economic simulation: many jobs through the real Keeper, one provider
// following a strategy and the others honest, its profit per job read from
// its real balance and stake before and after. See docs/economics.md.
//
// Randomness lives only here, in the test (a seeded math/rand): which
// honest providers are paired with the strategist, the correct results,
// the salts, the random answers and whether a lazy guess is right.

type strategy int

const (
	stratHonest   strategy = iota // computes the right result at cost c
	stratLazy                     // computes nothing, commits a guess that is right with probability q
	stratCopy                     // computes nothing, copies an honest provider's result commitment
	stratRandom                   // computes nothing, commits and reveals a random hash
	stratNoShow                   // wins the auction and never commits
	stratWithhold                 // seals a bid and never reveals it
)

var strategyNames = []string{"honest", "lazy-guess", "copy-commitment", "random-answer", "no-show", "withhold-bid"}

func (s strategy) String() string { return strategyNames[s] }

// Simulation constants, in oGPU.
var (
	simCap        = types.OGPU(3)  // the job's max price per replica
	simCost       = types.OGPU(1)  // c: what computing one result costs a provider
	simBidCheat   = amt("1.2ogpu") // the strategist bids lowest, to win
	simBidPartner = amt("1.5ogpu") // honest partners
	simBidBackup  = types.OGPU(2)  // one more honest bidder: sets the clearing price, takes a no-show's slot
	simStake      = types.OGPU(100)
	// simPartnerStake backs an honest partner's open slots (exposure cap).
	simPartnerStake = types.OGPU(9_000)
)

// simLazyQ is the lazy provider's chance of guessing the right result, in
// 1/simLazyDen. A result hash cannot be guessed; 1/4 stands for a cheap
// approximation (a smaller model) that matches the real one a quarter of
// the time, generous to the cheater.
const simLazyQ, simLazyDen = 1, 4

type simConfig struct {
	name   string
	strat  strategy
	r      uint16
	jobs   int
	params genesis.Params
	seed   int64
}

// simJob is one job of a run and what its participants know off-chain.
type simJob struct {
	id       uint64
	answer   types.Hash // the correct result (deterministic computation)
	cheater  types.Address
	partners []types.Address // r-1 honest providers
	backup   types.Address
	guess    bool // lazy: the guess is right
	// copier: the provider whose commitment it copied, and whether its
	// reveal was tried (and refused).
	copiedFrom   types.Address
	copyRefused  bool
	earlyRefused bool
}

type simKey struct {
	job uint64
	p   types.Address
}

type simResult struct {
	salt   types.Hash
	result types.Hash
}

type simRun struct {
	t       *testing.T
	cfg     simConfig
	n       *testNet
	rng     *rand.Rand
	jobs    []*simJob
	pool    []types.Address
	results map[simKey]simResult
	cost    map[simKey]*uint256.Int // compute spent by a provider on a job
}

// simRow is one line of the results table; amounts are per job, in base units.
type simRow struct {
	name                                     string
	r                                        uint16
	jobs, won, right                         int
	paid, cost, slashed, forfeited, profit   *big.Rat
	formula                                  *big.Rat
	partnerProfit, clientCost, compensations *big.Rat
}

func (s *simRun) bidders(j *simJob) []types.Address {
	return append(append([]types.Address{j.cheater}, j.partners...), j.backup)
}

func (s *simRun) bidPrice(j *simJob, p types.Address) *uint256.Int {
	switch p {
	case j.cheater:
		return simBidCheat
	case j.backup:
		return simBidBackup
	}
	return simBidPartner
}

func (s *simRun) strategyOf(j *simJob, p types.Address) strategy {
	if p == j.cheater {
		return s.cfg.strat
	}
	return stratHonest
}

func (s *simRun) randHash() types.Hash {
	var h types.Hash
	s.rng.Read(h[:])
	return h
}

// runSim plays cfg.jobs jobs side by side, each with a fresh strategist
// (a provider tombstoned for fraud cannot come back, so every job gets a
// new identity at the minimum stake, the cheapest one to lose).
func runSim(t *testing.T, cfg simConfig) simRow {
	s := &simRun{t: t, cfg: cfg, rng: rand.New(rand.NewSource(cfg.seed)),
		results: map[simKey]simResult{}, cost: map[simKey]*uint256.Int{}}
	clientAddr := addrOf("sim client")
	accts := []testAccount{{clientAddr, types.OGPU(1_000_000)}}
	var vals []string
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("validator-%d", i)
		vals = append(vals, name)
		accts = append(accts, testAccount{addrOf(name), types.OGPU(2_000)})
	}
	for i := 0; i < 6; i++ {
		p := addrOf(fmt.Sprintf("honest partner %d", i))
		s.pool = append(s.pool, p)
		accts = append(accts, testAccount{p, types.OGPU(10_000)})
	}
	for i := 0; i < cfg.jobs; i++ {
		c := addrOf(fmt.Sprintf("strategist %s %d", cfg.strat, i))
		s.jobs = append(s.jobs, &simJob{cheater: c})
		accts = append(accts, testAccount{c, types.OGPU(110)}) // 100 to bond, 10 for deposits
	}
	s.n = newTestNet(t, cfg.params, accts, vals)
	n := s.n
	for i, p := range s.pool {
		// Each partner holds slots of about a third of the jobs at once:
		// its stake backs them (deterrence.go: price × 20 at stake).
		n.register(p, simPartnerStake, gpuInfo(fmt.Sprint("h", i)))
	}
	for i, j := range s.jobs {
		n.register(j.cheater, simStake, gpuInfo(fmt.Sprint("c", i)))
	}
	n.endBlock()

	// Everybody's worth before: balance + bonded + unbonding.
	worth := func(a types.Address) *big.Int {
		e := n.esc()
		w := new(uint256.Int).Add(e.Balance(a), e.Bonded(a))
		w.Add(w, e.UnbondingTotal(a))
		return w.ToBig()
	}
	before := map[types.Address]*big.Int{clientAddr: worth(clientAddr)}
	stakeBefore := map[types.Address]*uint256.Int{}
	for _, p := range s.pool {
		before[p], stakeBefore[p] = worth(p), n.esc().Bonded(p)
	}
	for _, j := range s.jobs {
		before[j.cheater], stakeBefore[j.cheater] = worth(j.cheater), n.esc().Bonded(j.cheater)
	}

	// Post every job in one block, then let the agents act block by block.
	r := int(cfg.r)
	for _, j := range s.jobs {
		perm := s.rng.Perm(len(s.pool))
		for _, i := range perm[:r-1] {
			j.partners = append(j.partners, s.pool[i])
		}
		j.backup = s.pool[perm[r-1]]
		j.answer = s.randHash()
		j.guess = s.rng.Intn(simLazyDen) < simLazyQ
		j.id = n.post(clientAddr, auctionJob(cfg.r, simCap))
	}
	n.endBlock()
	for {
		open := false
		for _, j := range s.jobs {
			if s.act(j) {
				open = true
			}
		}
		if !open {
			break
		}
		if n.height > 1_000 {
			t.Fatalf("%s: jobs still open at height %d", cfg.name, n.height)
		}
		n.endBlock()
	}

	// Forfeited deposits, from the chain's own events.
	forfeited := map[types.Address]*uint256.Int{}
	for _, ev := range n.events {
		if ev.Type != (EventBidForfeited{}).EventType() {
			continue
		}
		var e EventBidForfeited
		if err := types.DecodeEvent(ev, &e); err != nil {
			t.Fatal(err)
		}
		if forfeited[e.Provider] == nil {
			forfeited[e.Provider] = new(uint256.Int)
		}
		forfeited[e.Provider].Add(forfeited[e.Provider], e.Deposit)
	}

	row := simRow{name: cfg.name, r: cfg.r, jobs: cfg.jobs}
	sum := func() *big.Int { return new(big.Int) }
	paid, cost, slashed, forf, profit := sum(), sum(), sum(), sum(), sum()
	p := cfg.params.Market
	for _, j := range s.jobs {
		c := j.cheater
		job := n.job(j.id)
		if job.State != JobCompleted {
			t.Fatalf("%s: job %d ended %s, want completed", cfg.name, j.id, job.State)
		}
		tk := n.task(j.id, 0)
		won := tk.Assigned(c)
		if won {
			row.won++
		}
		if j.guess {
			row.right++
		}
		stake := stakeBefore[c]
		lost := new(uint256.Int).Sub(stake, new(uint256.Int).Add(n.esc().Bonded(c), n.esc().UnbondingTotal(c)))
		fo := forfeited[c]
		if fo == nil {
			fo = new(uint256.Int)
		}
		co := s.cost[simKey{j.id, c}]
		if co == nil {
			co = new(uint256.Int)
		}
		delta := new(big.Int).Sub(worth(c), before[c])
		// Everything the provider received: delta = payment - slash - forfeit.
		pay := new(big.Int).Add(delta, lost.ToBig())
		pay.Add(pay, fo.ToBig())

		// What the rules say each strategy gets, exactly.
		price := job.Prices[0]
		wantPay, wantSlash, wantForfeit := new(uint256.Int), new(uint256.Int), new(uint256.Int)
		switch cfg.strat {
		case stratHonest:
			wantPay = price
		case stratLazy:
			if j.guess {
				wantPay = price
			} else {
				wantSlash = fraudSlashOf(p, stake, price)
			}
		case stratRandom:
			wantSlash = fraudSlashOf(p, stake, price)
		case stratCopy, stratNoShow:
			wantSlash = escrow.MulBps(stake, p.NoShowSlashBps)
		case stratWithhold:
			wantForfeit = p.BidDeposit
		}
		if wantWon := cfg.strat != stratWithhold; won != wantWon {
			t.Fatalf("%s: job %d: strategist assigned %v, want %v", cfg.name, j.id, won, wantWon)
		}
		if pay.Cmp(wantPay.ToBig()) != 0 || !lost.Eq(wantSlash) || !fo.Eq(wantForfeit) {
			t.Fatalf("%s: job %d: paid %s, slashed %s, forfeited %s; the rules say %s, %s, %s",
				cfg.name, j.id, pay, lost.Dec(), fo.Dec(), wantPay.Dec(), wantSlash.Dec(), wantForfeit.Dec())
		}
		if cfg.strat == stratCopy && (!j.copyRefused || !j.earlyRefused) {
			t.Fatalf("%s: job %d: the copier's reveal (or the early reveal it waited for) was not refused", cfg.name, j.id)
		}
		paid.Add(paid, pay)
		cost.Add(cost, co.ToBig())
		slashed.Add(slashed, lost.ToBig())
		forf.Add(forf, fo.ToBig())
		profit.Add(profit, new(big.Int).Sub(delta, co.ToBig()))
	}

	// Honest providers never lose, whatever the strategist does.
	partner := sum()
	for _, hp := range s.pool {
		if got := n.esc().Bonded(hp); !got.Eq(stakeBefore[hp]) {
			t.Errorf("%s: honest %s stake %s, was %s", cfg.name, hp, got.Dec(), stakeBefore[hp].Dec())
		}
		spent := new(big.Int)
		for _, j := range s.jobs {
			if c := s.cost[simKey{j.id, hp}]; c != nil {
				spent.Add(spent, c.ToBig())
			}
		}
		pr := new(big.Int).Sub(worth(hp), before[hp])
		pr.Sub(pr, spent)
		if pr.Sign() < 0 {
			t.Errorf("%s: honest provider %s lost %s", cfg.name, hp, pr)
		}
		partner.Add(partner, pr)
	}
	clientCost := new(big.Int).Sub(before[clientAddr], worth(clientAddr))
	comp := sum()
	for _, ev := range n.events {
		if ev.Type != (EventSlashed{}).EventType() {
			continue
		}
		var e EventSlashed
		if err := types.DecodeEvent(ev, &e); err != nil {
			t.Fatal(err)
		}
		comp.Add(comp, e.Compensation.ToBig())
	}

	per := func(x *big.Int) *big.Rat { return new(big.Rat).SetFrac(x, big.NewInt(int64(cfg.jobs))) }
	row.paid, row.cost, row.slashed, row.forfeited, row.profit = per(paid), per(cost), per(slashed), per(forf), per(profit)
	row.partnerProfit, row.clientCost, row.compensations = per(partner), per(clientCost), per(comp)
	row.formula = simFormula(cfg)
	return row
}

// act lets everyone with a part in job j act in the current block, reading
// the chain's state as a provider agent would. It reports whether the job
// is still open.
func (s *simRun) act(j *simJob) bool {
	n := s.n
	job := n.job(j.id)
	switch job.State {
	case JobBidding:
		if n.height > job.Posted {
			if _, done := GetBid(n.tree, j.id, 0, j.cheater); !done {
				for _, p := range s.bidders(j) {
					n.bid(p, j.id, 0, s.bidPrice(j, p))
				}
			}
		}
	case JobRevealing:
		for _, p := range s.bidders(j) {
			if b, _ := GetBid(n.tree, j.id, 0, p); b.Revealed || s.strategyOf(j, p) == stratWithhold {
				continue
			}
			n.revealBid(p, j.id, 0, s.bidPrice(j, p))
		}
	case JobRunning:
		t := n.task(j.id, 0)
		switch t.Status {
		case verifier.TaskExecuting:
			// The copier moves last in a block: it needs to see a
			// commitment to copy.
			for _, copier := range []bool{false, true} {
				for _, sl := range n.task(j.id, 0).Slots {
					if sl.Live() && (s.strategyOf(j, sl.Provider) == stratCopy) == copier {
						s.work(j, sl.Provider)
					}
				}
			}
		case verifier.TaskDisputed:
			// Validators re-execute the stage and vote the right hash.
			n.vote(j.id, 0, j.answer, n.validators...)
		}
	}
	return n.job(j.id).State.Open()
}

// work is one assigned provider's turn on its task.
func (s *simRun) work(j *simJob, p types.Address) {
	n := s.n
	t := n.task(j.id, 0)
	i := t.SlotOf(p)
	if i < 0 || t.Status != verifier.TaskExecuting {
		return
	}
	sl := t.Slots[i]
	st := s.strategyOf(j, p)
	key := simKey{j.id, p}
	switch {
	case st == stratNoShow:
	case !sl.Committed && n.height <= t.CommitDeadline:
		var res types.Hash
		var c types.Hash
		salt := s.randHash()
		switch st {
		case stratHonest:
			res = j.answer
			s.cost[key] = simCost
		case stratLazy:
			res = s.randHash()
			if j.guess {
				res = j.answer
			}
		case stratRandom:
			res = s.randHash()
		case stratCopy:
			var src *verifier.Slot
			for k := range t.Slots {
				if o := &t.Slots[k]; o.Provider != p && o.Live() && o.Committed {
					src = o
					break
				}
			}
			if src == nil {
				return // nothing to copy yet
			}
			// The result it would like to copy is not out yet: the
			// chain refuses reveals until every slot has committed.
			sr := s.results[simKey{j.id, src.Provider}]
			err := n.exec(func(k *Keeper) error {
				return k.RevealResult(src.Provider, &verifier.MsgRevealResult{Job: j.id, Stage: 0, Result: sr.result, Salt: sr.salt})
			})
			if !errors.Is(err, types.ErrWrongPhase) {
				s.t.Fatalf("job %d: a reveal before the copier committed: %v, want refused", j.id, err)
			}
			j.earlyRefused = true
			j.copiedFrom, c = src.Provider, src.Commitment
		}
		if st != stratCopy {
			c = verifier.ResultCommitment(res, salt, p)
			s.results[key] = simResult{salt, res}
		}
		n.must("commit result", func(k *Keeper) error {
			return k.CommitResult(p, &verifier.MsgCommitResult{Job: j.id, Stage: 0, Commitment: c})
		})
	case sl.Committed && !sl.Revealed && (t.AllCommitted() || n.height > t.CommitDeadline) && n.height <= t.RevealDeadline:
		if st == stratCopy {
			// Once the copied provider has revealed, its result and salt
			// are public; they still do not open a commitment that binds
			// another address.
			src := t.Slots[t.SlotOf(j.copiedFrom)]
			if j.copyRefused || !src.Revealed {
				return
			}
			sr := s.results[simKey{j.id, j.copiedFrom}]
			err := n.exec(func(k *Keeper) error {
				return k.RevealResult(p, &verifier.MsgRevealResult{Job: j.id, Stage: 0, Result: src.Result, Salt: sr.salt})
			})
			if !errors.Is(err, types.ErrCommitMismatch) {
				s.t.Fatalf("job %d: the copier's reveal: %v, want a commitment mismatch", j.id, err)
			}
			j.copyRefused = true
			return
		}
		sr := s.results[key]
		n.must("reveal result", func(k *Keeper) error {
			return k.RevealResult(p, &verifier.MsgRevealResult{Job: j.id, Stage: 0, Result: sr.result, Salt: sr.salt})
		})
	}
}

// simFormula is the expected profit per job of docs/economics.md, with P
// the clearing price, c the compute cost, S the stake, f, n the fraud and
// no-show slash fractions, D the bid deposit and q the lazy guess's odds.
func simFormula(cfg simConfig) *big.Rat {
	p := cfg.params.Market
	P := new(big.Rat).SetInt(simBidBackup.ToBig())
	c := new(big.Rat).SetInt(simCost.ToBig())
	fS := new(big.Rat).SetInt(escrow.MulBps(simStake, p.FraudSlashBps).ToBig())
	nS := new(big.Rat).SetInt(escrow.MulBps(simStake, p.NoShowSlashBps).ToBig())
	D := new(big.Rat).SetInt(p.BidDeposit.ToBig())
	q := big.NewRat(simLazyQ, simLazyDen)
	switch cfg.strat {
	case stratHonest:
		return new(big.Rat).Sub(P, c) // P - c
	case stratLazy: // q P - (1 - q) f S
		win := new(big.Rat).Mul(q, P)
		loss := new(big.Rat).Mul(new(big.Rat).Sub(big.NewRat(1, 1), q), fS)
		return win.Sub(win, loss)
	case stratRandom:
		return fS.Neg(fS)
	case stratCopy, stratNoShow:
		return nS.Neg(nS)
	case stratWithhold:
		return D.Neg(D)
	}
	panic("unknown strategy")
}

func ogpu(x *big.Rat) string {
	return new(big.Rat).Quo(x, new(big.Rat).SetInt(types.OneOGPU.ToBig())).FloatString(3)
}

// TestEconomics plays every strategy against honest partners at r = 2 and
// r = 3 under genesis.DefaultParams(), and asserts that honest work pays
// and every deviation loses money. It logs the table of docs/economics.md:
//
//	go test -run TestEconomics -v ./market
func TestEconomics(t *testing.T) {
	jobs := 200
	if testing.Short() {
		jobs = 40
	}
	def := genesis.DefaultParams()
	var cfgs []simConfig
	for _, r := range []uint16{2, 3} {
		for st := stratHonest; st <= stratWithhold; st++ {
			cfgs = append(cfgs, simConfig{name: st.String(), strat: st, r: r, jobs: jobs, params: def, seed: int64(100*int(r) + int(st))})
		}
	}
	// The same lazy guesser where fraud costs only 0.2% of stake and no
	// random audit sets a floor by the price (audit_rate_bps 0): what the
	// default fraud slash and deterrence prevent.
	weak := genesis.DefaultParams()
	weak.Market.FraudSlashBps = 20
	weak.Market.AuditRateBps = 0
	cfgs = append(cfgs, simConfig{name: "lazy-guess, fraud_slash_bps=20", strat: stratLazy, r: 2, jobs: jobs, params: weak, seed: 7})

	var b strings.Builder
	fmt.Fprintf(&b, "\n%-32s %2s %5s %5s %8s %8s %8s %9s %10s %10s %12s %11s\n",
		"strategy", "r", "jobs", "won", "paid", "cost", "slashed", "forfeited", "profit/job", "formula", "partner/job", "client/job")
	for _, cfg := range cfgs {
		row := runSim(t, cfg)
		fmt.Fprintf(&b, "%-32s %2d %5d %5d %8s %8s %8s %9s %10s %10s %12s %11s\n",
			row.name, row.r, row.jobs, row.won, ogpu(row.paid), ogpu(row.cost), ogpu(row.slashed), ogpu(row.forfeited),
			ogpu(row.profit), ogpu(row.formula), ogpu(row.partnerProfit), ogpu(row.clientCost))

		weakRow := cfg.params.Market.FraudSlashBps != def.Market.FraudSlashBps
		switch {
		case cfg.strat == stratHonest:
			if row.profit.Sign() <= 0 {
				t.Errorf("%s r=%d: honest profit %s per job, want positive", cfg.name, cfg.r, ogpu(row.profit))
			}
		case weakRow:
			if row.profit.Sign() <= 0 || row.formula.Sign() <= 0 {
				t.Errorf("%s: profit %s (formula %s): a slash this small should not deter", cfg.name, ogpu(row.profit), ogpu(row.formula))
			}
		default:
			if row.profit.Sign() >= 0 {
				t.Errorf("%s r=%d: profit %s per job at the default params, want negative", cfg.name, cfg.r, ogpu(row.profit))
			}
		}
		// Every strategy but the lazy guess is deterministic: the
		// simulated mean is the formula exactly.
		if cfg.strat != stratLazy && row.profit.Cmp(row.formula) != 0 {
			t.Errorf("%s r=%d: profit %s per job, the formula says %s", cfg.name, cfg.r, ogpu(row.profit), ogpu(row.formula))
		}
		if cfg.strat == stratLazy {
			// With the realised share of right guesses the formula is exact too.
			q := big.NewRat(int64(row.right), int64(row.jobs))
			P := new(big.Rat).SetInt(simBidBackup.ToBig())
			fS := new(big.Rat).SetInt(escrow.MulBps(simStake, cfg.params.Market.FraudSlashBps).ToBig())
			want := new(big.Rat).Sub(new(big.Rat).Mul(q, P), new(big.Rat).Mul(new(big.Rat).Sub(big.NewRat(1, 1), q), fS))
			if row.profit.Cmp(want) != 0 {
				t.Errorf("%s r=%d: profit %s per job, q̂ P - (1-q̂) f S = %s", cfg.name, cfg.r, ogpu(row.profit), ogpu(want))
			}
		}
	}
	t.Log(b.String())
}

// fraudSlashOf is what a caught lie at price costs a provider with stake
// (deterrence.go): fraud_slash_bps of it, at least AtRisk(price), at most
// all of it.
func fraudSlashOf(p genesis.MarketParams, stake, price *uint256.Int) *uint256.Int {
	s := escrow.MulBps(stake, p.FraudSlashBps)
	if f := AtRisk(p, price); s.Lt(f) {
		s = f
	}
	if s.Gt(stake) {
		s = stake.Clone()
	}
	return s
}
