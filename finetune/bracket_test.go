package finetune

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ogpu-network/ogpu/types"
)

// stage is a bracket's groups: each a run and its slots.
type stageRuns struct {
	runs  []run
	slots [][]types.Address
}

func newStage(runs ...run) stageRuns {
	s := stageRuns{runs: runs}
	for i := range runs {
		s.slots = append(s.slots, []types.Address{types.BytesToAddress([]byte{0xc0, byte(i)})})
	}
	return s
}

func (s stageRuns) spec(n uint64) Spec {
	sp := Spec{Job: job, Stage: stage, Steps: n, Base: base}
	for i, r := range s.runs {
		sp.Groups = append(sp.Groups, GroupSpec{Root: r.root, Final: r.final(), Slots: s.slots[i]})
	}
	return sp
}

// truth is the validators' h*: the honest step hi from the agreed h_lo.
func truth(g *Game) Verdict { return Verdict{Agreed: true, HStar: step(g.Groups[0].HLo, g.Hi, "")} }

// playBracket has every group open every round of its live game, one
// block per round, and gives each game down to one step the verdict v
// chooses, until the bracket is done; it returns the decided games.
func (e *env) playBracket(s stageRuns, v func(*Game) Verdict) []Decided {
	e.t.Helper()
	var out []Decided
	for range 10_000 {
		b, ok := GetBracket(e.kv, job, stage)
		if !ok {
			e.t.Fatal("no bracket")
		}
		if b.Done {
			return out
		}
		for m := range b.NextMatch {
			g, _ := GetGame(e.kv, job, stage, m)
			switch g.Status {
			case StatusOpen:
				for _, gr := range g.Groups {
					i := slices.IndexFunc(s.runs, func(r run) bool { return r.root == gr.Root })
					if err := e.send(relayer, openingIn(s.runs[i], g)); err != nil {
						e.t.Fatal(err)
					}
				}
			case StatusReexecute:
				d, err := e.keeper().Decide(job, stage, m, v(g))
				if err != nil {
					e.t.Fatal(err)
				}
				out = append(out, *d)
			}
			e.check()
		}
		e.height++
	}
	e.t.Fatal("the bracket never ended")
	return nil
}

// TestBracketSybilRootsLose (T5): an honest group among m − 1 groups with
// made-up roots (sybils deviating at random steps) is the one survivor;
// every sybil slot is convicted; the bracket plays at most ⌈log2 m⌉
// rounds of games, in parallel, and ends within MaxBracketBlocks.
func TestBracketSybilRootsLose(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	n := uint64(200)
	for _, m := range []int{2, 3, 5, 8, 9, 17} {
		honest := train(n, 0, "")
		runs := []run{honest}
		for i := 1; i < m; i++ {
			runs = append(runs, train(n, 1+rng.Uint64N(n), string(rune('a'+i))))
		}
		rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		s := newStage(runs...)
		e := newEnv(t)
		start := e.height
		if _, err := e.keeper().OpenGame(s.spec(n)); err != nil {
			t.Fatal(err)
		}
		e.check()
		decided := e.playBracket(s, truth)
		b, _ := GetBracket(e.kv, job, stage)
		hi := slices.IndexFunc(runs, func(r run) bool { return r.root == honest.root })
		last := decided[len(decided)-1]
		if !last.Done || last.ClassFailure || !slices.Equal(last.Survivors, s.slots[hi]) {
			t.Fatalf("m=%d: the bracket ended %+v, want the honest slots %v to survive", m, last, s.slots[hi])
		}
		var losers []types.Address
		for _, d := range decided {
			losers = append(losers, d.Losers...)
			if d.Done != (d.Match == last.Match) {
				t.Fatalf("m=%d: game %d says done = %v", m, d.Match, d.Done)
			}
		}
		if len(losers) != m-1 || slices.Contains(losers, s.slots[hi][0]) {
			t.Fatalf("m=%d: convicted %v", m, losers)
		}
		if gs := Games(e.kv, job, stage); len(gs) != m-1 || gs[len(gs)-1].Match != uint16(m-2) {
			t.Fatalf("m=%d: %d games stored, want %d numbered from 0", m, len(gs), m-1)
		}
		if b.Round > MaxBracketRounds(uint64(m), uint64(m)) || len(decided) != m-1 {
			t.Fatalf("m=%d: %d bracket rounds (bound %d), %d games", m, b.Round, MaxBracketRounds(uint64(m), uint64(m)), len(decided))
		}
		if e.height-start > e.p.MaxBracketBlocks(uint64(m), uint64(m), n) {
			t.Fatalf("m=%d: %d blocks, bound %d", m, e.height-start, e.p.MaxBracketBlocks(uint64(m), uint64(m), n))
		}
	}
}

// TestBracketBothWrongBothOut (T3): two groups wrong at the same step in
// different ways both lose their game; the honest group, which sat out the
// first round, is the survivor without playing.
func TestBracketBothWrongBothOut(t *testing.T) {
	n := uint64(64)
	x, y, honest := train(n, 20, "x"), train(n, 20, "y"), train(n, 0, "")
	s := newStage(x, y, honest)
	e := newEnv(t)
	if _, err := e.keeper().OpenGame(s.spec(n)); err != nil {
		t.Fatal(err)
	}
	decided := e.playBracket(s, truth)
	if len(decided) != 1 || len(decided[0].Losers) != 2 || !decided[0].Done || !slices.Equal(decided[0].Survivors, s.slots[2]) {
		t.Fatalf("decided %+v: want x and y out and the honest group the survivor", decided)
	}
}

// TestBracketClassFailureStops (T9): a class failure in one game stops
// the bracket: the other game of the round still convicts its liar, no new
// game is paired, and the last decision says ClassFailure, so the market
// refunds instead of paying the survivors.
func TestBracketClassFailureStops(t *testing.T) {
	n := uint64(64)
	honest, a, b, c := train(n, 0, ""), train(n, 10, "a"), train(n, 30, "b"), train(n, 50, "c")
	s := newStage(a, b, honest, c)
	e := newEnv(t)
	if _, err := e.keeper().OpenGame(s.spec(n)); err != nil {
		t.Fatal(err)
	}
	decided := e.playBracket(s, func(g *Game) Verdict {
		if g.Match == 0 {
			return Verdict{} // no two thirds
		}
		return truth(g)
	})
	if len(decided) != 2 {
		t.Fatalf("%d games decided, want the first round's 2 only", len(decided))
	}
	last := decided[1]
	if last.Match != 1 || !slices.Equal(last.Losers, s.slots[3]) || !last.Done || !last.ClassFailure {
		t.Fatalf("decided %+v", decided)
	}
	if bk, _ := GetBracket(e.kv, job, stage); bk.Round != 1 || bk.NextMatch != 2 {
		t.Fatalf("bracket %+v: want no second round", bk)
	}
}

// TestBracketInvariantCatchesMiscount: a bracket whose live-game count
// disagrees with the store is reported.
func TestBracketInvariantCatchesMiscount(t *testing.T) {
	n := uint64(16)
	s := newStage(train(n, 0, ""), train(n, 3, "x"), train(n, 9, "y"))
	e := newEnv(t)
	b, err := e.keeper().OpenGame(s.spec(n))
	if err != nil {
		t.Fatal(err)
	}
	e.check()
	b.Live++
	e.keeper().setBracket(b)
	if Invariant(e.kv) == nil {
		t.Fatal("the invariant did not notice")
	}
}

// variant is r with checkpoint k made up: another root, the same final.
func variant(r run, k uint64, tag string) run {
	hs := slices.Clone(r.hashes)
	hs[k] = step(hs[k], k, tag)
	return run{hs, Root(hs)}
}

// TestBracketOneFinalManyRoots (T5, T7): a cartel of three slots under
// one wrong final with distinct made-up roots can only pair with the
// honest group, one game a round: the honest group beats them one after
// another in m − 1 rounds, the bound for repeated finals. Two roots
// under the honest final (one tree made up at step 7) both survive a liar
// who is beaten first: they agree on the result, and the bracket ends
// with both, for the market to pay and audits to check.
func TestBracketOneFinalManyRoots(t *testing.T) {
	n := uint64(100)
	honest, liar := train(n, 0, ""), train(n, 40, "l")
	t.Run("cartel under one final", func(t *testing.T) {
		s := newStage(liar, variant(liar, 5, "a"), variant(liar, 60, "b"), honest)
		e := newEnv(t)
		if _, err := e.keeper().OpenGame(s.spec(n)); err != nil {
			t.Fatal(err)
		}
		decided := e.playBracket(s, truth)
		b, _ := GetBracket(e.kv, job, stage)
		last := decided[len(decided)-1]
		if len(decided) != 3 || b.Round != 3 || b.Round > MaxBracketRounds(4, 2) || !last.Done || !slices.Equal(last.Survivors, s.slots[3]) {
			t.Fatalf("%d games in %d rounds, last %+v: want the honest group to beat the three roots one a round", len(decided), b.Round, last)
		}
	})
	t.Run("two roots under the honest final", func(t *testing.T) {
		s := newStage(honest, variant(honest, 7, "x"), liar)
		e := newEnv(t)
		if _, err := e.keeper().OpenGame(s.spec(n)); err != nil {
			t.Fatal(err)
		}
		decided := e.playBracket(s, truth)
		if len(decided) != 1 || !slices.Equal(decided[0].Losers, s.slots[2]) || !decided[0].Done ||
			!slices.Equal(decided[0].Survivors, append(slices.Clone(s.slots[0]), s.slots[1]...)) {
			t.Fatalf("decided %+v: want the liar out and both roots of the honest final to survive", decided)
		}
	})
}
