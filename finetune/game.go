package finetune

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/ethereum/go-ethereum/rlp"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// The game (protocol-threats §3, rules 2–4; T1, T2, T5–T7).
//
// A game is between two groups of slots of one job stage: the slots that
// committed one root and final hash form a group (T7: a sybil that joins
// the honest root cannot sink it, since any member's or relayer's opening
// counts for the group). The chain holds an interval (Lo, Hi): every
// group agrees on the checkpoint after step Lo (HLo, initially the base
// hash at 0) and the groups' claims after step Hi differ (initially their
// final hashes at N). Each round asks every group for the checkpoints at
// the c−1 evenly spaced interior points of (Lo, Hi) (Points; in round 1
// also leaf 0, which must be the base hash, and leaf N, which must be the
// group's final hash: T2), each with its proof against the group's root.
// Openings are simultaneous (both groups may open in one block) and
// relayable (anyone may send them; only proofs that verify count). Once
// every group opened, the interval shrinks, in the same transaction, to
// the first sub-interval where the groups disagree; at the round's
// deadline a group that did not open loses with the fraud slash (T6:
// silence costs as much as losing). When Hi = Lo + 1 validators
// re-execute step Hi from HLo and their verdict (vote.go, or Decide)
// convicts every group whose claim differs from theirs (both when
// neither matches, T3); without a 2/3 verdict, or none by the verdict
// deadline, it is a class failure and nobody is slashed (T9).
//
// Bounds (T5): each round divides the interval by the arity c (the longest
// sub-interval is ⌈(Hi−Lo)/c⌉), so a game has at most MaxRounds(N, c) =
// ⌈log_c N⌉ rounds, each at most window_blocks long, plus verdict_blocks:
// Params.MaxGameBlocks. Verifying an opening costs its proof length in
// hashes, which the message's gas is to pay (MsgOpenCheckpoints.Hashes).
// Deadlines sit in a per-height queue worked at most MaxGamesPerBlock
// games a block, the rest the next block; an opening after its round's
// deadline is refused even if the queue has not reached the game yet.

// Store key prefixes owned by this package: 0x60-0x6f.
const (
	prefixGame    byte = 0x60 // 0x60 | job(8) | stage(2) | match(2) -> rlp(Game)
	prefixDue     byte = 0x61 // 0x61 | deadline(8) | job(8) | stage(2) | match(2) -> 0x01: the round or the verdict ends at height
	prefixBracket byte = 0x64 // 0x64 | job(8) | stage(2) -> rlp(Bracket)
)

// Bounds of the game.
const (
	// MinArity and MaxArity bound c, the number of sub-intervals a round
	// splits the disputed interval into (c = 2 is bisection).
	MinArity = genesis.FinetuneMinArity
	MaxArity = genesis.FinetuneMaxArity
	// MaxMaxSteps bounds params' max_steps: a tree of 2^32 + 1 leaves has
	// proofs of at most 33 hashes, below MaxProofLen.
	MaxMaxSteps = genesis.FinetuneMaxMaxSteps
	// MaxGamesPerBlock bounds the deadlines one end-block works; the rest
	// wait for the next block.
	MaxGamesPerBlock = 16
)

// Params govern games: the chain's params.market.finetune
// (genesis.FinetuneParams: arity, max_steps, window_blocks,
// verdict_blocks; the game ignores max_dataset_bytes).
type Params genesis.FinetuneParams

// DefaultParams are genesis.DefaultFinetuneParams.
func DefaultParams() Params { return Params(genesis.DefaultFinetuneParams()) }

// Validate checks the parameters' ranges.
func (p Params) Validate() error {
	if p.MaxDatasetBytes == 0 { // the game does not use it
		p.MaxDatasetBytes = 1
	}
	return genesis.FinetuneParams(p).Validate()
}

// MaxRounds is the most rounds a game over steps steps at arity c plays:
// the least r with ⌈steps / c^r⌉ = 1, that is ⌈log_c steps⌉.
func MaxRounds(steps, c uint64) uint64 {
	var r uint64
	for steps > 1 {
		steps = (steps + c - 1) / c
		r++
	}
	return r
}

// MaxGameBlocks is the longest a game over steps steps can last, from its
// opening to its verdict deadline: the market checks that a job's expiry
// and unbonding_blocks cover it (T5, cross-cutting rule 8).
func (p Params) MaxGameBlocks(steps uint64) uint64 {
	return MaxRounds(steps, p.Arity)*p.WindowBlocks + p.VerdictBlocks
}

// Status is where a game is.
type Status uint8

const (
	// StatusOpen: rounds are played.
	StatusOpen Status = 1
	// StatusReexecute: the interval is one step; the validators'
	// verdict on step Hi is awaited.
	StatusReexecute Status = 2
	// StatusDecided: Outcome says how it ended.
	StatusDecided Status = 3
)

func (s Status) String() string {
	switch s {
	case StatusOpen:
		return "open"
	case StatusReexecute:
		return "reexecute"
	case StatusDecided:
		return "decided"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// MarshalText prints the status by name in JSON.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a status by name (what MarshalText writes).
func (s *Status) UnmarshalText(b []byte) error {
	for _, c := range []Status{StatusOpen, StatusReexecute, StatusDecided} {
		if c.String() == string(b) {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("unknown game status %q: want open, reexecute or decided", b)
}

// Outcomes of a decided game.
const (
	// OutcomeTimeout: a group did not open by a round's deadline and lost
	// (both, if neither opened).
	OutcomeTimeout = "timeout"
	// OutcomeVerdict: the validators' h* convicted every claim that
	// differs from it.
	OutcomeVerdict = "verdict"
	// OutcomeClassFailure: no 2/3 verdict (or none in time): nobody is
	// slashed; the market refunds and suspends the class (T9).
	OutcomeClassFailure = "class_failure"
)

// Group is the slots that committed one root and final hash.
type Group struct {
	Root  types.Hash      `json:"root"`
	Final types.Hash      `json:"final"`
	Slots []types.Address `json:"slots"`
	// HLo and HHi are the group's proven claims after steps Lo and Hi.
	HLo types.Hash `json:"h_lo"`
	HHi types.Hash `json:"h_hi"`
	// Opened: the group's openings of this round verified; Hashes are its
	// checkpoints at the round's interior points.
	Opened bool         `json:"opened"`
	Hashes []types.Hash `json:"hashes"`
	// Lost: the group lost the game (silent, or convicted).
	Lost bool `json:"lost"`
}

// Game is the bisection game of one job stage.
type Game struct {
	Job   uint64 `json:"job"`
	Stage uint16 `json:"stage"`
	// Match numbers the stage's games (its bracket's matches) from 0.
	Match uint16     `json:"match"`
	Steps uint64     `json:"steps"`
	Arity uint64     `json:"arity"`
	Base  types.Hash `json:"base"`
	Lo    uint64     `json:"lo"`
	Hi    uint64     `json:"hi"`
	// Round is the round being played (from 1) or, once down to one
	// step, the rounds played.
	Round    uint64  `json:"round"`
	Deadline uint64  `json:"deadline"`
	Status   Status  `json:"status"`
	Groups   []Group `json:"groups"`
	Outcome  string  `json:"outcome"`
	// Voters vote on the last step (vote.go), sealing until SealBy and
	// opening until Deadline.
	Voters []Voter `json:"voters"`
	SealBy uint64  `json:"seal_by"`
}

// Interior is the c−1 evenly spaced points strictly inside (Lo, Hi) (all
// of them when the interval has fewer than c steps): with s = min(c,
// Hi−Lo) sub-intervals, point i is Lo + ⌊i·(Hi−Lo)/s⌋.
func (g *Game) Interior() []uint64 {
	l := g.Hi - g.Lo
	s := min(g.Arity, l)
	out := make([]uint64, 0, s-1)
	for i := uint64(1); i < s; i++ {
		out = append(out, g.Lo+i*l/s) // i·l < c·N ≤ 8·2^32: no overflow
	}
	return out
}

// Points is the steps a group opens in the current round: the interior
// points, and in round 1 leaves 0 and N too.
func (g *Game) Points() []uint64 {
	if g.Round == 1 {
		return append(append([]uint64{0}, g.Interior()...), g.Steps)
	}
	return g.Interior()
}

// group returns the index of the group committed to root.
func (g *Game) group(root types.Hash) int {
	return slices.IndexFunc(g.Groups, func(gr Group) bool { return gr.Root == root })
}

// GroupSpec is one group the market opens a game with.
type GroupSpec struct {
	Root  types.Hash
	Final types.Hash
	Slots []types.Address
}

// Spec is what the market opens a game with: the job stage, its step
// count N and base hash h_0, and the two groups.
type Spec struct {
	Job    uint64
	Stage  uint16
	Steps  uint64
	Base   types.Hash
	Groups []GroupSpec
}

// Decided is a game that ended: the market slashes Losers' slots (fraud
// slash). Winners only won this game (T4: not deviating first from the
// other group is not being right); when Done, the stage's bracket is
// over and Survivors are the slots of the groups no game convicted: one
// claim, or none when every group lost; with ClassFailure the bracket
// stopped at a class failure and the market refunds and suspends the
// class (T9) instead of paying.
type Decided struct {
	Job     uint64
	Stage   uint16
	Match   uint16
	Outcome string
	// Step is the step the validators re-executed (0 for a timeout).
	Step    uint64
	Losers  []types.Address
	Winners []types.Address

	Done         bool
	Survivors    []types.Address
	ClassFailure bool
}

// Verdict is the validators' finding on the game's last step: HStar, the
// hash after step Hi they computed from HLo, when 2/3 of them agreed on
// one (Agreed); otherwise a class failure.
type Verdict struct {
	Agreed bool
	HStar  types.Hash
}

// Context is what the keeper knows of the block it runs in.
type Context struct {
	KV     store.KV
	Height uint64
	Events *types.Events
	Params Params
	// Chain are the chain's parameters: the vote reads staking's
	// (validator power) and the market's vote_slash_bps.
	Chain genesis.Params
}

// Keeper runs the game. Its methods either succeed completely or return
// an error having written nothing.
type Keeper struct {
	ctx Context
}

// NewKeeper returns a keeper for ctx.
func NewKeeper(ctx Context) *Keeper {
	if ctx.Events == nil {
		ctx.Events = &types.Events{}
	}
	return &Keeper{ctx: ctx}
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// GameKey is the store key of match match of the stage's games.
func GameKey(job uint64, stage, match uint16) []byte {
	return append(append(append([]byte{prefixGame}, be64(job)...), be16(stage)...), be16(match)...)
}

// ParseGameKey is GameKey's inverse.
func ParseGameKey(key []byte) (job uint64, stage, match uint16, ok bool) {
	if len(key) != 13 || key[0] != prefixGame {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint64(key[1:9]), binary.BigEndian.Uint16(key[9:11]), binary.BigEndian.Uint16(key[11:13]), true
}

// DueKey is the queue key of a deadline of a game.
func DueKey(height, job uint64, stage, match uint16) []byte {
	return append(append(append(append([]byte{prefixDue}, be64(height)...), be64(job)...), be16(stage)...), be16(match)...)
}

// ParseDueKey is DueKey's inverse.
func ParseDueKey(key []byte) (height, job uint64, stage, match uint16, ok bool) {
	if len(key) != 21 || key[0] != prefixDue {
		return 0, 0, 0, 0, false
	}
	return binary.BigEndian.Uint64(key[1:9]), binary.BigEndian.Uint64(key[9:17]), binary.BigEndian.Uint16(key[17:19]), binary.BigEndian.Uint16(key[19:21]), true
}

// GetGame returns match match of the games of (job, stage).
func GetGame(r store.Reader, job uint64, stage, match uint16) (*Game, bool) {
	bz := r.Get(GameKey(job, stage, match))
	if bz == nil {
		return nil, false
	}
	var g Game
	if err := rlp.DecodeBytes(bz, &g); err != nil {
		panic(fmt.Errorf("finetune: stored game %d/%d/%d unreadable: %w", job, stage, match, err))
	}
	return &g, true
}

func (k *Keeper) set(g *Game) {
	bz, err := rlp.EncodeToBytes(g)
	if err != nil {
		panic(err)
	}
	k.ctx.KV.Set(GameKey(g.Job, g.Stage, g.Match), bz)
}

// schedule moves g's queued deadline to height.
func (k *Keeper) schedule(g *Game, height uint64) {
	k.ctx.KV.Delete(DueKey(g.Deadline, g.Job, g.Stage, g.Match))
	g.Deadline = height
	k.ctx.KV.Set(DueKey(height, g.Job, g.Stage, g.Match), []byte{1})
}

func hexRoots(g *Game, pick func(*Group) bool) []string {
	var out []string
	for i := range g.Groups {
		if pick(&g.Groups[i]) {
			out = append(out, g.Groups[i].Root.Hex())
		}
	}
	return out
}

// ---- opening ----

// OpenCheckpoints records a group's openings for the current round, sent
// by from (anyone). When every group has opened, the interval narrows.
func (k *Keeper) OpenCheckpoints(from types.Address, m *MsgOpenCheckpoints) error {
	// Cheap checks first; the hashing last.
	g, ok := GetGame(k.ctx.KV, m.Job, m.Stage, m.Match)
	if !ok {
		return types.ErrUnknownJob.Wrapf("no fine-tune game for job %d stage %d match %d", m.Job, m.Stage, m.Match)
	}
	if g.Status != StatusOpen {
		return types.ErrWrongPhase.Wrapf("the game of job %d stage %d is %s: it takes no more openings", g.Job, g.Stage, g.Status)
	}
	if m.Round != g.Round {
		return types.ErrWrongPhase.Wrapf("the game of job %d stage %d is in round %d, the openings are for round %d", g.Job, g.Stage, g.Round, m.Round)
	}
	if k.ctx.Height > g.Deadline {
		return types.ErrWrongPhase.Wrapf("round %d of the game of job %d stage %d took openings until height %d (now %d)", g.Round, g.Job, g.Stage, g.Deadline, k.ctx.Height)
	}
	gi := g.group(m.Root)
	if gi < 0 {
		return types.ErrInvalidMsg.Wrapf("no group of the game of job %d stage %d committed root %x", g.Job, g.Stage, m.Root)
	}
	gr := &g.Groups[gi]
	if gr.Opened {
		return types.ErrDuplicate.Wrapf("the group of root %x already opened round %d of the game of job %d stage %d", m.Root, g.Round, g.Job, g.Stage)
	}
	pts := g.Points()
	if len(m.Openings) != len(pts) {
		return types.ErrInvalidMsg.Wrapf("round %d opens steps %v (%d checkpoints), not %d", g.Round, pts, len(pts), len(m.Openings))
	}
	n := g.Steps + 1
	for i, o := range m.Openings {
		if o.Step != pts[i] {
			return types.ErrInvalidMsg.Wrapf("round %d opens steps %v: opening %d is step %d", g.Round, pts, i, o.Step)
		}
		if want := ProofLen(n, o.Step); len(o.Proof) != want {
			return types.ErrInvalidMsg.Wrapf("the proof of step %d has %d hashes: a tree of %d steps fixes %d", o.Step, len(o.Proof), g.Steps, want)
		}
	}
	if g.Round == 1 {
		first, last := m.Openings[0], m.Openings[len(m.Openings)-1]
		if first.Hash != g.Base {
			return types.ErrInvalidMsg.Wrapf("leaf 0 opened as %x, the job's base hash is %x: leaf 0 must be the base model", first.Hash, g.Base)
		}
		if last.Hash != gr.Final {
			return types.ErrInvalidMsg.Wrapf("leaf %d opened as %x, the group's committed final hash is %x: the last leaf must be the final model", g.Steps, last.Hash, gr.Final)
		}
	}
	for _, o := range m.Openings {
		if !Verify(gr.Root, n, o.Step, o.Hash, o.Proof) {
			return types.ErrInvalidMsg.Wrapf("the opening of step %d does not verify against root %x", o.Step, gr.Root)
		}
	}
	hs := make([]types.Hash, 0, len(m.Openings))
	steps := make([]string, 0, len(m.Openings))
	for _, o := range m.Openings {
		steps = append(steps, strconv.FormatUint(o.Step, 10))
		if o.Step != 0 && o.Step != g.Steps {
			hs = append(hs, o.Hash)
		}
	}
	gr.Opened, gr.Hashes = true, hs
	k.ctx.Events.Emit(EventCheckpointsOpened{Job: g.Job, Stage: g.Stage, Match: g.Match, Round: g.Round, Root: gr.Root, From: from, Steps: steps})
	if !slices.ContainsFunc(g.Groups, func(x Group) bool { return !x.Opened }) {
		k.narrow(g)
	}
	k.set(g)
	return nil
}

// narrow shrinks g's interval to the first sub-interval where the groups'
// opened claims disagree (there is one: they disagree at Hi), then starts
// the next round or, at one step, awaits the verdict.
func (k *Keeper) narrow(g *Game) {
	pts := append(append([]uint64{g.Lo}, g.Interior()...), g.Hi)
	claim := func(gr *Group, j int) types.Hash {
		switch j {
		case 0:
			return gr.HLo
		case len(pts) - 1:
			return gr.HHi
		}
		return gr.Hashes[j-1]
	}
	j := 1
	for ; j < len(pts)-1; j++ {
		if !allEqual(g, func(gr *Group) types.Hash { return claim(gr, j) }) {
			break
		}
	}
	g.Lo, g.Hi = pts[j-1], pts[j]
	for i := range g.Groups {
		gr := &g.Groups[i]
		gr.HLo, gr.HHi = claim(gr, j-1), claim(gr, j)
		gr.Opened, gr.Hashes = false, nil
	}
	hlo := g.Groups[0].HLo
	if g.Hi == g.Lo+1 {
		k.awaitVerdict(g)
		k.ctx.Events.Emit(EventGameEnded{Job: g.Job, Stage: g.Stage, Match: g.Match, Step: g.Hi, HLo: hlo, Rounds: g.Round, Deadline: g.Deadline})
		return
	}
	g.Round++
	k.schedule(g, k.ctx.Height+k.ctx.Params.WindowBlocks)
	k.ctx.Events.Emit(EventGameNarrowed{Job: g.Job, Stage: g.Stage, Match: g.Match, Round: g.Round, Lo: g.Lo, Hi: g.Hi, HLo: hlo, Deadline: g.Deadline})
}

func allEqual(g *Game, f func(*Group) types.Hash) bool {
	first := f(&g.Groups[0])
	for i := 1; i < len(g.Groups); i++ {
		if f(&g.Groups[i]) != first {
			return false
		}
	}
	return true
}

// ---- ending ----

// Decide ends a game that is down to one step with the validators'
// verdict: every group whose claim after step Hi differs from HStar loses
// (both when neither matches, T3); without an agreed verdict it is a class
// failure and nobody loses. The package's own vote (vote.go) decides
// through the same rule; Decide is for a verdict reached elsewhere (the
// market's, or a test's), and penalizes no voter.
func (k *Keeper) Decide(job uint64, stage, match uint16, v Verdict) (*Decided, error) {
	g, ok := GetGame(k.ctx.KV, job, stage, match)
	if !ok {
		return nil, types.ErrUnknownJob.Wrapf("no fine-tune game for job %d stage %d match %d", job, stage, match)
	}
	if g.Status != StatusReexecute {
		return nil, types.ErrWrongPhase.Wrapf("the game of job %d stage %d is %s: a verdict comes once it is down to one step", job, stage, g.Status)
	}
	if k.ctx.Height > g.Deadline {
		return nil, types.ErrWrongPhase.Wrapf("the verdict on the game of job %d stage %d was due by height %d (now %d)", job, stage, g.Deadline, k.ctx.Height)
	}
	k.ctx.KV.Delete(DueKey(g.Deadline, g.Job, g.Stage, g.Match))
	return k.verdict(g, v), nil
}

// verdict decides g, awaiting its verdict, with v.
func (k *Keeper) verdict(g *Game, v Verdict) *Decided {
	outcome := OutcomeClassFailure
	if v.Agreed {
		outcome = OutcomeVerdict
		for i := range g.Groups {
			g.Groups[i].Lost = g.Groups[i].HHi != v.HStar
		}
	}
	return k.end(g, outcome)
}

// end decides g with outcome, its groups' Lost already set.
func (k *Keeper) end(g *Game, outcome string) *Decided {
	d := &Decided{Job: g.Job, Stage: g.Stage, Match: g.Match, Outcome: outcome}
	if outcome != OutcomeTimeout {
		d.Step = g.Hi
	}
	var losers []string
	for _, gr := range g.Groups {
		if gr.Lost {
			d.Losers = append(d.Losers, gr.Slots...)
			for _, s := range gr.Slots {
				losers = append(losers, s.Hex())
			}
		} else if outcome != OutcomeClassFailure {
			d.Winners = append(d.Winners, gr.Slots...)
		}
	}
	g.Status, g.Outcome = StatusDecided, outcome
	k.set(g)
	k.ctx.Events.Emit(EventGameDecided{Job: g.Job, Stage: g.Stage, Match: g.Match, Outcome: outcome, Losers: losers})
	k.advance(g, d)
	return d
}

// EndBlock ends the games whose deadline is at or before this height, at
// most MaxGamesPerBlock of them (earliest deadline first; the rest next
// block): in a round, the groups that did not open lose; awaiting a
// verdict, the votes opened so far decide (no two thirds: a class
// failure).
func (k *Keeper) EndBlock() []Decided {
	var due [][]byte
	end := append([]byte{prefixDue}, be64(k.ctx.Height+1)...)
	k.ctx.KV.Iterate([]byte{prefixDue}, end, func(key, _ []byte) bool {
		due = append(due, append([]byte(nil), key...))
		return len(due) >= MaxGamesPerBlock
	})
	var out []Decided
	for _, key := range due {
		k.ctx.KV.Delete(key)
		h, job, stage, match, _ := ParseDueKey(key)
		g, ok := GetGame(k.ctx.KV, job, stage, match)
		if !ok || g.Deadline != h || g.Status == StatusDecided {
			continue
		}
		if g.Status == StatusReexecute {
			out = append(out, *k.endVote(g))
			continue
		}
		for i := range g.Groups {
			g.Groups[i].Lost = !g.Groups[i].Opened
		}
		k.ctx.Events.Emit(EventGameTimeout{Job: g.Job, Stage: g.Stage, Match: g.Match, Round: g.Round, Silent: hexRoots(g, func(gr *Group) bool { return gr.Lost })})
		out = append(out, *k.end(g, OutcomeTimeout))
	}
	return out
}

// ---- invariant ----

// Invariant checks every game: its interval (Lo < Hi ≤ Steps; at least
// two steps while open, one awaiting the verdict), its rounds (at most
// MaxRounds), that every remaining group agrees on HLo (the base hash at
// 0) and that their claims at Hi differ (each its final hash at N), that a
// group's opened hashes match the round's points, and that every live
// game has its deadline queued and every queued deadline a live game.
func Invariant(r store.Reader) error {
	var bad error
	live := 0
	store.IteratePrefix(r, []byte{prefixGame}, func(_, value []byte) bool {
		var g Game
		if err := rlp.DecodeBytes(value, &g); err != nil {
			bad = err
			return true
		}
		if bad = gameInvariant(r, &g); bad != nil {
			bad = fmt.Errorf("finetune invariant broken: game of job %d stage %d: %w", g.Job, g.Stage, bad)
			return true
		}
		if g.Status != StatusDecided {
			live++
		}
		return false
	})
	if bad != nil {
		return bad
	}
	store.IteratePrefix(r, []byte{prefixBracket}, func(_, value []byte) bool {
		var b Bracket
		if err := rlp.DecodeBytes(value, &b); err != nil {
			bad = err
			return true
		}
		if err := bracketInvariant(r, &b); err != nil {
			bad = fmt.Errorf("finetune invariant broken: bracket of job %d stage %d: %w", b.Job, b.Stage, err)
			return true
		}
		return false
	})
	if bad != nil {
		return bad
	}
	queued := 0
	store.IteratePrefix(r, []byte{prefixDue}, func(key, _ []byte) bool {
		h, job, stage, match, ok := ParseDueKey(key)
		g, found := GetGame(r, job, stage, match)
		if !ok || !found || g.Status == StatusDecided || g.Deadline != h {
			bad = fmt.Errorf("finetune invariant broken: deadline %x queued for no live game with that deadline", key)
			return true
		}
		queued++
		return false
	})
	if bad == nil && queued != live {
		bad = fmt.Errorf("finetune invariant broken: %d live games, %d deadlines queued", live, queued)
	}
	return bad
}

func gameInvariant(r store.Reader, g *Game) error {
	switch {
	case g.Arity < MinArity || g.Arity > MaxArity:
		return fmt.Errorf("arity %d", g.Arity)
	case g.Steps < 1 || g.Steps > MaxMaxSteps:
		return fmt.Errorf("%d steps", g.Steps)
	case len(g.Groups) != 2 || g.Groups[0].Root == g.Groups[1].Root:
		return fmt.Errorf("%d groups, or two with one root", len(g.Groups))
	case g.Round > MaxRounds(g.Steps, g.Arity):
		return fmt.Errorf("round %d beyond the bound %d", g.Round, MaxRounds(g.Steps, g.Arity))
	}
	if g.Status == StatusDecided {
		return nil
	}
	switch {
	case g.Status != StatusOpen && g.Status != StatusReexecute:
		return fmt.Errorf("status %s", g.Status)
	case g.Hi > g.Steps || g.Lo >= g.Hi:
		return fmt.Errorf("interval (%d, %d) of %d steps", g.Lo, g.Hi, g.Steps)
	case g.Status == StatusOpen && (g.Hi-g.Lo < 2 || g.Round < 1):
		return fmt.Errorf("open in round %d with interval (%d, %d)", g.Round, g.Lo, g.Hi)
	case g.Status == StatusReexecute && (g.Hi != g.Lo+1 || g.SealBy > g.Deadline):
		return fmt.Errorf("awaiting a verdict with interval (%d, %d), sealing until %d, voting until %d", g.Lo, g.Hi, g.SealBy, g.Deadline)
	case r.Get(DueKey(g.Deadline, g.Job, g.Stage, g.Match)) == nil:
		return fmt.Errorf("live without its deadline %d queued", g.Deadline)
	case !allEqual(g, func(gr *Group) types.Hash { return gr.HLo }):
		return fmt.Errorf("the groups disagree at lo %d", g.Lo)
	case allEqual(g, func(gr *Group) types.Hash { return gr.HHi }):
		return fmt.Errorf("the groups agree at hi %d", g.Hi)
	case g.Lo == 0 && g.Groups[0].HLo != g.Base:
		return fmt.Errorf("h_lo at 0 is not the base hash")
	}
	opened := 0
	for _, gr := range g.Groups {
		if g.Hi == g.Steps && gr.HHi != gr.Final {
			return fmt.Errorf("group %x claims %x at %d, not its final hash", gr.Root, gr.HHi, g.Hi)
		}
		if gr.Lost {
			return fmt.Errorf("group %x lost in a live game", gr.Root)
		}
		if gr.Opened {
			opened++
			if g.Status != StatusOpen || len(gr.Hashes) != len(g.Interior()) {
				return fmt.Errorf("group %x opened %d hashes for %d interior points", gr.Root, len(gr.Hashes), len(g.Interior()))
			}
		} else if len(gr.Hashes) != 0 {
			return fmt.Errorf("group %x holds hashes without having opened", gr.Root)
		}
	}
	if opened == len(g.Groups) {
		return fmt.Errorf("every group opened round %d but the interval did not narrow", g.Round)
	}
	return nil
}
