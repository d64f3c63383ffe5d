package finetune

import (
	"fmt"
	"slices"

	"github.com/ethereum/go-ethereum/rlp"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// The knockout bracket (protocol-threats T5, rule 4).
//
// The slots of a stage may reveal m ≥ 2 distinct roots (sybils with
// made-up roots, or several liars); slots are grouped by root (T7).
// Games are two-sided, so the stage's groups play a knockout bracket:
// each bracket round pairs the groups still in, in group order, each with
// the next unpaired one whose final hash differs (groups under one final
// agree on the result: there is nothing to bisect between them), and
// plays the pairs' games in parallel; a game's losers are out (both, when
// neither matches h* or neither opened). When every game of the round has
// ended, the survivors are paired again, until the groups left (none,
// one, or several under one final) share one final hash. Every game puts
// at least one group out. With distinct finals all survivors pair, so a
// round halves the field: at most ⌈log2 m⌉ rounds of games, each at most
// MaxGameBlocks long (Params.MaxBracketBlocks). Several roots under one
// final can pair only with other finals, one game each per round, so the
// bound is then m − 1 rounds: a cartel of slots under one wrong final
// with distinct made-up roots delays the honest group one game per slot
// (and loses a slot's stake per game). A class failure in any game stops
// the bracket (no new pairs; the games running finish): the class cannot
// be judged, so the market refunds.

// MaxGroups bounds the groups of a stage: the slots of one stage are at
// most max_redundancy (genesis bounds it by 64).
const MaxGroups = 64

// Contender is one group of a bracket.
type Contender struct {
	Root  types.Hash      `json:"root"`
	Final types.Hash      `json:"final"`
	Slots []types.Address `json:"slots"`
	// Out: a game convicted the group (silent, or its claim not h*).
	Out bool `json:"out"`
}

// Bracket is the games of one job stage.
type Bracket struct {
	Job    uint64      `json:"job"`
	Stage  uint16      `json:"stage"`
	Steps  uint64      `json:"steps"`
	Base   types.Hash  `json:"base"`
	Groups []Contender `json:"groups"`
	// Round is the bracket round being played (from 1); Live the games of
	// the stage not yet decided; NextMatch numbers the next game.
	Round     uint64 `json:"round"`
	Live      uint64 `json:"live"`
	NextMatch uint16 `json:"next_match"`
	// Done: no game is left to play. ClassFailure: a game ended in a class
	// failure, which stopped the bracket.
	Done         bool `json:"done"`
	ClassFailure bool `json:"class_failure"`
}

// MaxBracketRounds is the most bracket rounds m groups with d distinct
// final hashes play: ⌈log2 m⌉ when every final differs (d = m), else
// m − 1 (one group out per round at least).
func MaxBracketRounds(m, d uint64) uint64 {
	if d >= m {
		return MaxRounds(m, 2)
	}
	return m - 1
}

// MaxBracketBlocks is the longest the games of a stage with m groups (d
// distinct finals) over steps steps can last. At a job's post the market
// knows neither, and checks that expiry and unbonding_blocks cover
// MaxBracketBlocks(r, 1, N) (T5, cross-cutting rule 8).
func (p Params) MaxBracketBlocks(m, d, steps uint64) uint64 {
	return MaxBracketRounds(m, d) * p.MaxGameBlocks(steps)
}

// finals is the number of distinct final hashes among b's groups.
func (b *Bracket) finals() uint64 {
	var seen []types.Hash
	for _, c := range b.Groups {
		if !slices.Contains(seen, c.Final) {
			seen = append(seen, c.Final)
		}
	}
	return uint64(len(seen))
}

// BracketKey is the store key of the bracket of (job, stage).
func BracketKey(job uint64, stage uint16) []byte {
	return append(append([]byte{prefixBracket}, be64(job)...), be16(stage)...)
}

// GetBracket returns the bracket of (job, stage).
func GetBracket(r store.Reader, job uint64, stage uint16) (*Bracket, bool) {
	bz := r.Get(BracketKey(job, stage))
	if bz == nil {
		return nil, false
	}
	var b Bracket
	if err := rlp.DecodeBytes(bz, &b); err != nil {
		panic(fmt.Errorf("finetune: stored bracket %d/%d unreadable: %w", job, stage, err))
	}
	return &b, true
}

// Games returns the games of (job, stage), by match.
func Games(r store.Reader, job uint64, stage uint16) []*Game {
	var out []*Game
	store.IteratePrefix(r, append([]byte{prefixGame}, BracketKey(job, stage)[1:]...), func(_, value []byte) bool {
		var g Game
		if err := rlp.DecodeBytes(value, &g); err != nil {
			panic(fmt.Errorf("finetune: stored game of job %d stage %d unreadable: %w", job, stage, err))
		}
		out = append(out, &g)
		return false
	})
	return out
}

func (k *Keeper) setBracket(b *Bracket) {
	bz, err := rlp.EncodeToBytes(b)
	if err != nil {
		panic(err)
	}
	k.ctx.KV.Set(BracketKey(b.Job, b.Stage), bz)
}

// OpenGame starts the games of s: the market calls it when the slots of a
// fine-tune stage revealed m ≥ 2 distinct (root, final hash) claims, one
// group per claim. It returns the bracket with its first round's games
// opened.
func (k *Keeper) OpenGame(s Spec) (*Bracket, error) {
	p := k.ctx.Params
	if err := p.Validate(); err != nil {
		return nil, types.ErrInvalidMsg.Wrapf("%v", err)
	}
	if _, exists := GetBracket(k.ctx.KV, s.Job, s.Stage); exists {
		return nil, types.ErrDuplicate.Wrapf("job %d stage %d already has its games", s.Job, s.Stage)
	}
	if s.Steps < 1 || s.Steps > p.MaxSteps {
		return nil, types.ErrInvalidMsg.Wrapf("job %d: %d steps: a fine-tune game covers 1 to %d steps (params max_steps)", s.Job, s.Steps, p.MaxSteps)
	}
	if m := len(s.Groups); m < 2 || m > MaxGroups {
		return nil, types.ErrInvalidMsg.Wrapf("job %d: %d groups: games are played between 2 to %d distinct claims", s.Job, m, MaxGroups)
	}
	var slots []types.Address
	for i, a := range s.Groups {
		if len(a.Slots) == 0 {
			return nil, types.ErrInvalidMsg.Wrapf("job %d: group %d has no slots", s.Job, i)
		}
		for _, b := range s.Groups[:i] {
			if a.Root == b.Root {
				return nil, types.ErrInvalidMsg.Wrapf("job %d: two groups committed root %x: slots with one root are one group", s.Job, a.Root)
			}
		}
		for _, x := range a.Slots {
			if slices.Contains(slots, x) {
				return nil, types.ErrInvalidMsg.Wrapf("job %d: %s is in two groups", s.Job, x)
			}
			slots = append(slots, x)
		}
	}
	b := &Bracket{Job: s.Job, Stage: s.Stage, Steps: s.Steps, Base: s.Base}
	for _, gs := range s.Groups {
		b.Groups = append(b.Groups, Contender{Root: gs.Root, Final: gs.Final, Slots: slices.Clone(gs.Slots)})
	}
	if b.finals() == 1 {
		return nil, types.ErrInvalidMsg.Wrapf("job %d: every group claims final hash %x: the results agree, there is no game (differing trees under one final are for audits)", s.Job, s.Groups[0].Final)
	}
	k.pair(b)
	k.setBracket(b)
	return b, nil
}

// alive is the indexes of b's groups still in, in group order.
func (b *Bracket) alive() []int {
	var out []int
	for i := range b.Groups {
		if !b.Groups[i].Out {
			out = append(out, i)
		}
	}
	return out
}

// pair starts the next bracket round: each survivor, in group order,
// plays the next unpaired survivor with another final hash. When no two
// survivors differ in their final (or after a class failure), the bracket
// is done.
func (k *Keeper) pair(b *Bracket) {
	in := b.alive()
	var pairs [][2]int
	used := make([]bool, len(b.Groups))
	for x, i := range in {
		if used[i] {
			continue
		}
		for _, j := range in[x+1:] {
			if !used[j] && b.Groups[j].Final != b.Groups[i].Final {
				used[i], used[j] = true, true
				pairs = append(pairs, [2]int{i, j})
				break
			}
		}
	}
	if len(pairs) == 0 || b.ClassFailure {
		b.Done = true
		var survivors []string
		for _, i := range in {
			survivors = append(survivors, b.Groups[i].Root.Hex())
		}
		k.ctx.Events.Emit(EventBracketDone{Job: b.Job, Stage: b.Stage, Rounds: b.Round, Survivors: survivors, ClassFailure: b.ClassFailure})
		return
	}
	b.Round++
	for _, p := range pairs {
		k.openMatch(b, &b.Groups[p[0]], &b.Groups[p[1]])
	}
}

// openMatch starts the game between x and y.
func (k *Keeper) openMatch(b *Bracket, x, y *Contender) {
	p := k.ctx.Params
	g := &Game{Job: b.Job, Stage: b.Stage, Match: b.NextMatch, Steps: b.Steps, Arity: p.Arity, Base: b.Base, Lo: 0, Hi: b.Steps, Round: 1, Status: StatusOpen}
	b.NextMatch++
	b.Live++
	for _, c := range []*Contender{x, y} {
		g.Groups = append(g.Groups, Group{Root: c.Root, Final: c.Final, Slots: slices.Clone(c.Slots), HLo: b.Base, HHi: c.Final})
	}
	roots := []string{x.Root.Hex(), y.Root.Hex()}
	if g.Hi == g.Lo+1 {
		// One step: nothing to bisect, the verdict compares the finals.
		g.Round = 0
		g.Deadline = k.ctx.Height // not queued: schedule deletes nothing
		k.awaitVerdict(g)
		k.set(g)
		k.ctx.Events.Emit(EventGameOpened{Job: g.Job, Stage: g.Stage, Match: g.Match, Steps: g.Steps, Arity: g.Arity, Roots: roots, Deadline: g.Deadline})
		k.ctx.Events.Emit(EventGameEnded{Job: g.Job, Stage: g.Stage, Match: g.Match, Step: g.Hi, HLo: g.Base, Rounds: 0, Deadline: g.Deadline})
		return
	}
	g.Deadline = k.ctx.Height + p.WindowBlocks
	k.ctx.KV.Set(DueKey(g.Deadline, g.Job, g.Stage, g.Match), []byte{1})
	k.set(g)
	k.ctx.Events.Emit(EventGameOpened{Job: g.Job, Stage: g.Stage, Match: g.Match, Steps: g.Steps, Arity: g.Arity, Roots: roots, Deadline: g.Deadline})
}

// advance records decided game g (d) in its bracket and, when it was the
// round's last game, pairs the survivors or ends the bracket (filling d's
// Done, Survivors and ClassFailure).
func (k *Keeper) advance(g *Game, d *Decided) {
	b, ok := GetBracket(k.ctx.KV, g.Job, g.Stage)
	if !ok {
		panic(fmt.Errorf("finetune: game %d/%d/%d without its bracket", g.Job, g.Stage, g.Match))
	}
	for _, gr := range g.Groups {
		i := slices.IndexFunc(b.Groups, func(c Contender) bool { return c.Root == gr.Root })
		b.Groups[i].Out = b.Groups[i].Out || gr.Lost
	}
	if g.Outcome == OutcomeClassFailure {
		b.ClassFailure = true
	}
	b.Live--
	if b.Live == 0 {
		k.pair(b)
	}
	if b.Done {
		d.Done, d.ClassFailure = true, b.ClassFailure
		for _, i := range b.alive() {
			d.Survivors = append(d.Survivors, b.Groups[i].Slots...)
		}
	}
	k.setBracket(b)
}

// bracketInvariant checks b against the stage's games: Live counts its
// undecided games, a done bracket has none, every live game is between
// two groups still in, and the rounds are within ⌈log2 m⌉.
func bracketInvariant(r store.Reader, b *Bracket) error {
	var live, games uint64
	var bad error
	store.IteratePrefix(r, append([]byte{prefixGame}, BracketKey(b.Job, b.Stage)[1:]...), func(_, value []byte) bool {
		var g Game
		if err := rlp.DecodeBytes(value, &g); err != nil {
			bad = err
			return true
		}
		games++
		if g.Status == StatusDecided {
			return false
		}
		live++
		for _, gr := range g.Groups {
			i := slices.IndexFunc(b.Groups, func(c Contender) bool { return c.Root == gr.Root })
			if i < 0 || b.Groups[i].Out {
				bad = fmt.Errorf("live game %d plays group %x, which is not in the bracket", g.Match, gr.Root)
				return true
			}
		}
		return false
	})
	switch {
	case bad != nil:
		return bad
	case live != b.Live || games != uint64(b.NextMatch):
		return fmt.Errorf("bracket counts %d live games of %d, the store holds %d of %d", b.Live, b.NextMatch, live, games)
	case b.Done != (live == 0):
		return fmt.Errorf("bracket done = %v with %d live games", b.Done, live)
	case b.Round > MaxBracketRounds(uint64(len(b.Groups)), b.finals()):
		return fmt.Errorf("bracket round %d beyond the bound %d", b.Round, MaxBracketRounds(uint64(len(b.Groups)), b.finals()))
	}
	return nil
}
