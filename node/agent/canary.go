package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// Canaries (issue 11, C1/H4). The validator agent posts jobs whose answer
// it knows, from accounts that are not its operator, and contests them
// when the providers agree on something else. The rules:
//
//   - The draw. For every job_posted event of block h (an inference job
//     not posted by one of this validator's own shells), the validator
//     posts a canary with probability canary_rate_bps / 10,000 / N, N the
//     number of active validators, so that the network as a whole posts
//     canary_rate_bps canaries per 10,000 client jobs. The coin is
//     x = sha256("ogpu/canary-draw/v1" | secret | block hash of h | job |
//     operator), drawn iff x mod (10,000 × N) < canary_rate_bps, where
//     secret = sha256("ogpu/canary-secret/v1" | operator private key). It
//     is deterministic (the validator can recompute every draw it made)
//     but unpredictable to others: with public inputs only, a cartel
//     could compute which jobs spawn a canary and be honest on their
//     look-alikes. The canary is posted 1 + (x's ninth byte mod MaxDelay)
//     blocks after h.
//   - The shape. A canary mirrors the job it was drawn from: kind, mode,
//     model and model size, stages, redundancy, max price, requirements,
//     windows, max tokens and declared prompt tokens. Only the prompt (a
//     sentence from a built-in list, picked by the draw, fitted to the
//     declared prompt length), the client (a shell account), the seal and
//     the heights differ, which is what differs between any two client
//     jobs. Pipeline (CKKS) jobs draw no canary yet.
//   - The known answer. Before posting, the validator generates the
//     greedy answer in the job's determinism class with its own model
//     cache (the path the dispute check takes) and hashes it exactly as a
//     provider does (LLMOutput{input, tokens, text}). The output names
//     the job's input hash, which the validator chose, not the job id the
//     chain assigns at the post, so the seal is right whatever id the
//     canary gets.
//   - The seal is verifier.CanarySeal(operator, [CanaryStageHash(answer,
//     salt)]). Salt and answer are kept in Dir, so a restart can claim.
//   - The claim. When a canary's task confirms (task_confirming) on a
//     result other than the known answer, the validator re-executes it as
//     its dispute check would; if that re-execution is its sealed answer
//     it sends MsgRevealCanary from the operator before SettlesAt, and its
//     dispute pool then votes its re-executed result like in any dispute.
//     A canary the providers got right is never revealed.
//   - Shells. Canaries are posted from shell accounts whose keys derive
//     from the operator key and a counter, sha256("ogpu/canary-shell/v1" |
//     operator key | counter); each shell posts one canary and serves its
//     prompt as any client does (the Client code, on a libp2p host whose
//     identity is the shell key). The operator funds Batch shells at a
//     time in one transaction, ahead of need and never in a block next to
//     a post. Limits, stated plainly: the funding transfer is public, so
//     whoever indexes transfers from validator operators can list their
//     shells (funding through an exchange or bridge would cut that link,
//     which this agent does not do); the shells' hosts run on the
//     validator's machine, so a provider that records client IP
//     addresses can link them (run the validator behind the same egress as
//     clients, or a relay); and a canary follows its source job by a few
//     blocks with the same parameters, which tells a watcher only as much
//     as any client that posts the same job twice.
type CanaryConfig struct {
	// Dir keeps the canary secrets (salts, answers) and the shell counter.
	// Empty: the agent posts no canaries (it could not claim them after a
	// restart).
	Dir string
	// Fund is what the operator sends each shell (default DefaultCanaryFund);
	// a canary whose job locks more than its shell holds is skipped.
	Fund *uint256.Int
	// Batch is how many shells one funding transaction funds (default 3).
	Batch int
	// MaxDelay bounds the blocks between the source job and its canary
	// (default 3).
	MaxDelay uint64
	// Listen is where the shells' libp2p hosts listen (default
	// p2p.DefaultListen()).
	Listen []string
}

// DefaultCanaryFund is what a shell account is funded with.
var DefaultCanaryFund = types.OGPU(20)

// canaryPrompts are the sentences a canary's prompt is made of.
var canaryPrompts = []string{
	"Once upon a time", "One day a little girl", "The sun was shining and", "Tom had a big red ball",
	"There was a small dog named", "In a quiet town lived", "The cat looked at the bird", "Lily wanted to play with",
	"A boy found a shiny box", "Mom said it was time to", "The little bear was sad because", "On a rainy day, Ben",
}

// CanaryStatus is what the validator knows of one canary it posted.
type CanaryStatus struct {
	Job    uint64        `json:"job"`
	Source uint64        `json:"source"`
	Shell  types.Address `json:"shell"`
	Prompt string        `json:"prompt"`
	Input  types.Hash    `json:"input"`
	Posted int64         `json:"posted"`
	// Answer is the known result hash (the LLMOutput of the greedy
	// re-generation for the canary's input).
	Answer      types.Hash   `json:"answer"`
	Salt        types.Hash   `json:"salt"`
	StageHashes []types.Hash `json:"stage_hashes"`
	Seal        types.Hash   `json:"seal"`
	// Void: never set since outputs name the input, not the job id; kept
	// so canary files written before still read.
	Void bool `json:"void,omitempty"`
	// Claimed: MsgRevealCanary was accepted.
	Claimed bool `json:"claimed,omitempty"`
	// Agreed is the result the providers agreed on (task_confirming).
	Agreed types.Hash `json:"agreed"`
	// Outcome is how the task settled ("" until then).
	Outcome string     `json:"outcome,omitempty"`
	Result  types.Hash `json:"result"`
	Done    bool       `json:"done,omitempty"`
}

// canaryFile is what Dir keeps.
type canaryFile struct {
	NextShell uint64          `json:"next_shell"`
	Funded    []uint64        `json:"funded"` // funded shells no canary used yet
	LastPost  int64           `json:"last_post"`
	Canaries  []*CanaryStatus `json:"canaries"`
}

// canaries is the validator agent's canary state.
type canaries struct {
	v      *Validator
	secret [32]byte

	mu      sync.Mutex
	st      canaryFile
	pending []drawnCanary
	shells  map[types.Address]bool
	funding bool
	queue   chan node.BlockEvents
	wg      sync.WaitGroup
	postMu  sync.Mutex // one post at a time (the shells' nonces)
}

type drawnCanary struct {
	source uint64
	due    int64
	seed   types.Hash
}

// canaryBlock is the Run loop's hook: it hands block b to the canary
// worker (started on the first block). It never blocks the loop.
func (v *Validator) canaryBlock(ctx context.Context, b node.BlockEvents) {
	if v.Canary.Dir == "" {
		return
	}
	v.canaryOnce.Do(func() {
		cs, err := v.openCanaries(ctx)
		if err != nil {
			v.Logger.Error("canaries off: cannot open the canary state", "dir", v.Canary.Dir, "err", err)
			return
		}
		v.canaryState.Store(cs)
	})
	cs := v.canaryState.Load()
	if cs == nil {
		return
	}
	select {
	case cs.queue <- b:
	default:
		v.Logger.Error("canary worker behind: skipping a block's canary events", "height", b.Height)
	}
}

// canaryWait stops the canary worker once Run's loop ended.
func (v *Validator) canaryWait() {
	if cs := v.canaryState.Load(); cs != nil {
		close(cs.queue)
		cs.wg.Wait()
	}
}

// Canaries lists the canaries this validator posted (tests, devnet).
func (v *Validator) Canaries() []CanaryStatus {
	cs := v.canaryState.Load()
	if cs == nil {
		return nil
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]CanaryStatus, len(cs.st.Canaries))
	for i, c := range cs.st.Canaries {
		out[i] = *c
	}
	return out
}

func (v *Validator) openCanaries(ctx context.Context) (*canaries, error) {
	if err := os.MkdirAll(v.Canary.Dir, 0o700); err != nil {
		return nil, err
	}
	cs := &canaries{v: v, shells: map[types.Address]bool{}, queue: make(chan node.BlockEvents, 256)}
	h := sha256.New()
	h.Write([]byte("ogpu/canary-secret/v1"))
	h.Write(ethcrypto.FromECDSA(v.Key))
	copy(cs.secret[:], h.Sum(nil))
	bz, err := os.ReadFile(cs.file())
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(bz, &cs.st); err != nil {
			return nil, fmt.Errorf("%s is corrupt (move it away to start afresh; its canaries can then no longer be claimed): %w", cs.file(), err)
		}
	}
	for i := range cs.st.NextShell {
		k, err := cs.shellKey(i)
		if err != nil {
			return nil, err
		}
		cs.shells[ethcrypto.PubkeyToAddress(k.PublicKey)] = true
	}
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		cs.resume(ctx)
		for b := range cs.queue {
			cs.onBlock(ctx, b)
		}
	}()
	return cs, nil
}

func (cs *canaries) file() string { return filepath.Join(cs.v.Canary.Dir, "canaries.json") }

// save writes the state (cs.mu held).
func (cs *canaries) saveLocked() {
	bz, _ := json.MarshalIndent(&cs.st, "", " ")
	tmp := cs.file() + ".tmp"
	if err := os.WriteFile(tmp, bz, 0o600); err == nil {
		err = os.Rename(tmp, cs.file())
		if err == nil {
			return
		}
	}
	cs.v.Logger.Error("cannot save the canary secrets: a restart could not claim these canaries", "file", cs.file())
}

// shellKey derives shell i's key from the operator key.
func (cs *canaries) shellKey(i uint64) (*ecdsa.PrivateKey, error) {
	for n := uint64(0); ; n++ {
		h := sha256.New()
		h.Write([]byte("ogpu/canary-shell/v1"))
		h.Write(ethcrypto.FromECDSA(cs.v.Key))
		h.Write(binary.BigEndian.AppendUint64(nil, i))
		if n > 0 {
			h.Write(binary.BigEndian.AppendUint64(nil, n)) // a hash outside the curve order: next
		}
		if k, err := ethcrypto.ToECDSA(h.Sum(nil)); err == nil {
			return k, nil
		} else if n > 8 {
			return nil, err
		}
	}
}

// draw is the canary coin of job in the block with hash blockHash: the
// hash whose first 8 bytes decide and whose ninth sets the delay.
func (cs *canaries) draw(blockHash []byte, job uint64) types.Hash {
	h := sha256.New()
	h.Write([]byte("ogpu/canary-draw/v1"))
	h.Write(cs.secret[:])
	h.Write(blockHash)
	h.Write(binary.BigEndian.AppendUint64(nil, job))
	op := cs.v.Address()
	h.Write(op[:])
	return types.Hash(h.Sum(nil))
}

// drawn reports whether coin x draws a canary at rate bps among n active
// validators.
func canaryDrawn(x types.Hash, rateBps, n uint64) bool {
	if rateBps == 0 || n == 0 {
		return false
	}
	return binary.BigEndian.Uint64(x[:8])%(10_000*n) < rateBps
}

// resume, after a restart, claims canaries whose task confirmed on a
// wrong result while the agent was down, and serves the prompts of the
// canaries still running.
func (cs *canaries) resume(ctx context.Context) {
	cs.mu.Lock()
	var open []*CanaryStatus
	for _, c := range cs.st.Canaries {
		if !c.Done && c.Job != 0 {
			cp := *c
			open = append(open, &cp)
		}
	}
	cs.mu.Unlock()
	for _, c := range open {
		j, err := cs.v.Chain.Job(ctx, c.Job)
		if err != nil {
			continue
		}
		if !j.State.Open() {
			cs.update(c.Job, func(r *CanaryStatus) { r.Done = true })
			continue
		}
		cs.follow(ctx, c, c.Posted)
		for _, t := range j.Tasks {
			if t.Status == "confirming" && len(t.Slots) > 0 {
				for _, s := range t.Slots {
					if s.Result != nil {
						cs.spawnClaim(ctx, c.Job, t.Stage, *s.Result)
						break
					}
				}
			}
		}
	}
}

func (cs *canaries) update(job uint64, f func(*CanaryStatus)) *CanaryStatus {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range cs.st.Canaries {
		if c.Job == job {
			f(c)
			cs.saveLocked()
			cp := *c
			return &cp
		}
	}
	return nil
}

func (cs *canaries) record(job uint64) *CanaryStatus {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range cs.st.Canaries {
		if c.Job == job {
			cp := *c
			return &cp
		}
	}
	return nil
}

// onBlock handles one block: claims, settlements, draws, due posts and
// shell funding.
func (cs *canaries) onBlock(ctx context.Context, b node.BlockEvents) {
	v := cs.v
	for _, e := range node.EventsOf[market.EventTaskConfirming](b.Events) {
		c := cs.record(e.Job)
		if c == nil || c.Void {
			continue
		}
		cs.update(e.Job, func(r *CanaryStatus) { r.Agreed = e.Result })
		if e.Result == c.Answer {
			v.Logger.Info("canary answered right: it stays hidden", "job", e.Job, "stage", e.Stage)
			continue
		}
		cs.spawnClaim(ctx, e.Job, e.Stage, e.Result)
	}
	for _, e := range node.EventsOf[market.EventTaskSettled](b.Events) {
		if cs.update(e.Job, func(r *CanaryStatus) { r.Outcome, r.Result, r.Done = e.Outcome, e.Result, true }) != nil {
			v.Logger.Info("canary settled", "job", e.Job, "outcome", e.Outcome, "result", fmt.Sprintf("%x", e.Result[:8]))
		}
	}
	for _, e := range node.EventsOf[market.EventJobExpired](b.Events) {
		cs.update(e.Job, func(r *CanaryStatus) { r.Outcome, r.Done = "expired", true })
	}
	var posted []market.EventJobPosted
	for _, e := range node.EventsOf[market.EventJobPosted](b.Events) {
		cs.mu.Lock()
		mine := cs.shells[e.Client]
		cs.mu.Unlock()
		if !mine && e.Kind == market.KindInference {
			posted = append(posted, e)
		}
	}
	if len(posted) > 0 {
		cs.drawBlock(ctx, b.Height, posted)
	}
	cs.mu.Lock()
	var due []drawnCanary
	rest := cs.pending[:0]
	for _, d := range cs.pending {
		if d.due <= b.Height {
			due = append(due, d)
		} else {
			rest = append(rest, d)
		}
	}
	cs.pending = rest
	refill := len(cs.st.Funded) == 0 && !cs.funding && len(due) == 0 && len(cs.pending) == 0 && b.Height > cs.st.LastPost+2
	if refill {
		cs.funding = true
	}
	cs.mu.Unlock()
	for _, d := range due {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			if _, err := cs.post(ctx, d.source, d.seed); err != nil && ctx.Err() == nil {
				v.Logger.Warn("canary not posted", "source", d.source, "err", err)
			}
		}()
	}
	if refill {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			if err := cs.fund(ctx); err != nil && ctx.Err() == nil {
				v.Logger.Warn("cannot fund canary shells", "err", err)
			}
		}()
	}
}

// drawBlock draws the coin for each job posted in block height.
func (cs *canaries) drawBlock(ctx context.Context, height int64, posted []market.EventJobPosted) {
	v := cs.v
	params, err := v.Chain.Params(ctx)
	if err != nil {
		return
	}
	rate := params.Market.CanaryRateBps
	if rate == 0 {
		return
	}
	blk, err := v.Chain.RPC.Block(ctx, &height)
	if err != nil {
		v.Logger.Warn("no canary draw: cannot read the block hash", "height", height, "err", err)
		return
	}
	n, err := activeValidatorCount(ctx, v.Chain)
	if err != nil || n == 0 {
		return
	}
	maxDelay := v.Canary.MaxDelay
	if maxDelay == 0 {
		maxDelay = 3
	}
	for _, e := range posted {
		x := cs.draw(blk.BlockID.Hash, e.Job)
		if !canaryDrawn(x, rate, n) {
			continue
		}
		d := drawnCanary{source: e.Job, due: height + 1 + int64(uint64(x[8])%maxDelay), seed: x}
		cs.mu.Lock()
		cs.pending = append(cs.pending, d)
		cs.mu.Unlock()
		v.Logger.Debug("canary drawn", "source", e.Job, "post_at", d.due)
	}
}

func activeValidatorCount(ctx context.Context, c *node.Client) (uint64, error) {
	vals, err := c.Validators(ctx)
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, val := range vals {
		if val.Active && val.Power > 0 && !val.Jailed && !val.Tombstoned {
			n++
		}
	}
	return n, nil
}

// fund sends Fund to each of the next Batch shells in one transaction.
func (cs *canaries) fund(ctx context.Context) error {
	defer func() {
		cs.mu.Lock()
		cs.funding = false
		cs.mu.Unlock()
	}()
	v := cs.v
	amount := v.Canary.Fund
	if amount == nil {
		amount = DefaultCanaryFund
	}
	batch := v.Canary.Batch
	if batch <= 0 {
		batch = 3
	}
	cs.mu.Lock()
	first := cs.st.NextShell
	cs.mu.Unlock()
	var msgs []types.RawMsg
	var idx []uint64
	var addrs []types.Address
	for i := first; i < first+uint64(batch); i++ {
		k, err := cs.shellKey(i)
		if err != nil {
			return err
		}
		a := ethcrypto.PubkeyToAddress(k.PublicKey)
		msgs = append(msgs, (&escrow.MsgSend{To: a, Amount: amount}).Raw())
		idx, addrs = append(idx, i), append(addrs, a)
	}
	// Shells are known as ours before the transfer lands: their jobs are
	// never drawn from.
	cs.mu.Lock()
	cs.st.NextShell = first + uint64(batch)
	for _, a := range addrs {
		cs.shells[a] = true
	}
	cs.saveLocked()
	cs.mu.Unlock()
	if _, err := v.sender.Send(ctx, msgs...); err != nil {
		return err
	}
	cs.mu.Lock()
	cs.st.Funded = append(cs.st.Funded, idx...)
	cs.saveLocked()
	cs.mu.Unlock()
	v.Logger.Info("funded canary shells", "shells", len(idx), "each", types.FormatAmount(amount))
	return nil
}

// PostCanary posts a canary mirroring job source now, through the same
// path as a drawn one (the devnet uses it to show one): it returns the
// canary's job id. The validator needs a canary directory.
func (v *Validator) PostCanary(ctx context.Context, source uint64) (uint64, error) {
	cs := v.canaryState.Load()
	if v.Canary.Dir == "" {
		return 0, errors.New("this validator agent has no canary directory (CanaryConfig.Dir): it posts no canaries")
	}
	if cs == nil {
		return 0, errors.New("the validator agent is not running yet")
	}
	var seed types.Hash
	if _, err := rand.Read(seed[:]); err != nil {
		return 0, err
	}
	return cs.post(ctx, source, seed)
}

// post posts a canary mirroring job source from a funded shell, with a
// prompt picked by seed, and serves its prompt as its client.
func (cs *canaries) post(ctx context.Context, source uint64, seed types.Hash) (uint64, error) {
	v := cs.v
	src, err := v.Chain.Job(ctx, source)
	if err != nil {
		return 0, err
	}
	if src.Kind != market.KindInference {
		return 0, fmt.Errorf("job %d is a %s job: canaries mirror inference jobs only", source, src.Kind)
	}
	shell, key, err := cs.takeShell(ctx)
	if err != nil {
		return 0, err
	}
	// The known answer: the greedy generation in the job's class, with
	// the model cache the dispute check uses.
	m, release, err := v.model(ctx, src, src.Req.Class, nil)
	if err != nil {
		cs.returnShell(shell)
		return 0, fmt.Errorf("canary model: %w", err)
	}
	prompt, err := canaryPrompt(m, seed, src.PromptTokens)
	if err != nil {
		release()
		cs.returnShell(shell)
		return 0, err
	}
	out, err := m.Generate(ctx, llm.Request{Prompt: prompt, MaxTokens: int(src.MaxTokens)}, nil)
	release()
	if err != nil {
		cs.returnShell(shell)
		return 0, fmt.Errorf("canary generation: %w", err)
	}
	in := &LLMInput{Version: 1, Prompt: prompt}
	inHash, err := v.Store.Put(in.Encode())
	if err != nil {
		cs.returnShell(shell)
		return 0, err
	}
	h, err := p2p.New(ctx, p2p.Config{Key: key, Listen: cmpList(v.Canary.Listen, p2p.DefaultListen()), Store: v.Store, Logger: v.Logger})
	if err != nil {
		cs.returnShell(shell)
		return 0, fmt.Errorf("shell host: %w", err)
	}
	cl := NewClient(v.Chain, key, h, v.Store, NewAccess(v.Chain))
	cl.Logger = v.Logger
	msg := &market.MsgPostJob{
		Kind: src.Kind, Mode: src.Mode, Model: src.Model, ModelSize: src.ModelSize, Stages: src.Stages,
		Redundancy: src.Redundancy, MaxPrice: new(uint256.Int).Set(src.MaxPrice), Req: cloneReq(src.Req),
		Input: inHash, Windows: src.Windows, MaxTokens: src.MaxTokens, PromptTokens: src.PromptTokens,
	}
	if bal, err := v.Chain.Account(ctx, cl.Address()); err != nil || bal.Balance.Lt(lockOf(msg, src.ValidatorFee)) {
		_ = h.Close()
		return 0, fmt.Errorf("shell %s cannot lock job %d's escrow (%s): raise CanaryConfig.Fund", cl.Address().Hex(), source, types.FormatAmount(lockOf(msg, src.ValidatorFee)))
	}
	rec := &CanaryStatus{Source: source, Shell: cl.Address(), Prompt: prompt, Input: inHash}
	cs.postMu.Lock()
	res := &LLMOutput{Version: LLMOutputVersion, Input: inHash, Tokens: out.Tokens, Text: out.Text}
	rec.Answer = res.Hash()
	if _, err := rand.Read(rec.Salt[:]); err != nil {
		cs.postMu.Unlock()
		_ = h.Close()
		return 0, err
	}
	rec.StageHashes = []types.Hash{verifier.CanaryStageHash(rec.Answer, rec.Salt)}
	rec.Seal = verifier.CanarySeal(v.Address(), rec.StageHashes)
	msg.Seal = rec.Seal
	// The salt is on disk before the seal is on chain.
	cs.mu.Lock()
	cs.st.Canaries = append(cs.st.Canaries, rec)
	cs.saveLocked()
	cs.mu.Unlock()
	height, posted, err := cl.postJob(ctx, msg, Runtime, inHash)
	cs.postMu.Unlock()
	if err != nil {
		_ = h.Close()
		cs.mu.Lock()
		cs.st.Canaries = cs.st.Canaries[:len(cs.st.Canaries)-1]
		cs.saveLocked()
		cs.mu.Unlock()
		return 0, err
	}
	cs.mu.Lock()
	rec.Job, rec.Posted = posted.Job, height
	cs.st.LastPost = height
	cs.saveLocked()
	snap := *rec
	cs.mu.Unlock()
	v.Logger.Info("posted a canary", "job", posted.Job, "source", source, "shell", snap.Shell.Hex())
	cs.serve(ctx, cl, &snap, height)
	return posted.Job, nil
}

// follow opens shell c's host again (after a restart) and serves its
// prompt as its client.
func (cs *canaries) follow(ctx context.Context, c *CanaryStatus, from int64) {
	v := cs.v
	cs.mu.Lock()
	var key *ecdsa.PrivateKey
	for i := range cs.st.NextShell {
		if k, err := cs.shellKey(i); err == nil && ethcrypto.PubkeyToAddress(k.PublicKey) == c.Shell {
			key = k
		}
	}
	cs.mu.Unlock()
	if key == nil {
		return
	}
	h, err := p2p.New(ctx, p2p.Config{Key: key, Listen: cmpList(v.Canary.Listen, p2p.DefaultListen()), Store: v.Store, Logger: v.Logger})
	if err != nil {
		v.Logger.Warn("cannot serve a canary's prompt", "job", c.Job, "err", err)
		return
	}
	cl := NewClient(v.Chain, key, h, v.Store, NewAccess(v.Chain))
	cl.Logger = v.Logger
	if err := cl.Access.Bind(c.Input, Grant{Job: c.Job, Client: c.Shell, Kind: GrantInput}); err != nil {
		_ = h.Close()
		return
	}
	cs.serve(ctx, cl, c, from)
}

// serve runs the shell's client side of canary c (serving the prompt to
// the winners, reading the stream, fetching the text) until it ends.
func (cs *canaries) serve(ctx context.Context, cl *Client, c *CanaryStatus, from int64) {
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		defer cl.Host.Close()
		_, err := cl.follow(ctx, c.Job, from, c.Input, func(string, ...any) {}, nil)
		if err != nil && ctx.Err() == nil {
			cs.v.Logger.Debug("canary client ended", "job", c.Job, "err", err)
		}
	}()
}

// spawnClaim claims canary job's answer for stage if the validator's own
// re-execution is its sealed answer and not the agreed one.
func (cs *canaries) spawnClaim(ctx context.Context, job uint64, stage uint16, agreed types.Hash) {
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		if err := cs.claim(ctx, job, stage, agreed); err != nil && ctx.Err() == nil {
			cs.v.Logger.Error("canary not claimed", "job", job, "stage", stage, "err", err)
		}
	}()
}

func (cs *canaries) claim(ctx context.Context, job uint64, stage uint16, agreed types.Hash) error {
	v := cs.v
	c := cs.record(job)
	if c == nil || c.Void || c.Claimed || int(stage) >= len(c.StageHashes) || agreed == c.Answer {
		return nil
	}
	// Re-execute exactly as the dispute check will (in the revealing
	// providers' class): claim only what this validator's vote will back.
	rc, err := v.Reexecute(ctx, job, stage)
	if err != nil {
		return fmt.Errorf("re-execute before claiming: %w", err)
	}
	switch rc.Result {
	case agreed:
		v.Logger.Info("canary: the providers' result is the re-execution (the sealed answer was made in another class): not claimed", "job", job)
		return nil
	case c.Answer:
	default:
		return fmt.Errorf("the re-execution %x is neither the sealed answer %x nor the agreed result: not claimed", rc.Result[:8], c.Answer[:8])
	}
	m := &verifier.MsgRevealCanary{Job: job, Stage: stage, Answer: c.Answer, Salt: c.Salt, StageHashes: c.StageHashes}
	if _, err := v.sender.Send(ctx, m.Raw()); err != nil {
		return fmt.Errorf("reveal canary: %w", err)
	}
	cs.update(job, func(r *CanaryStatus) { r.Claimed = true })
	v.Logger.Warn("canary answered wrong: claimed its known answer, the validators vote", "job", job, "stage", stage,
		"agreed", fmt.Sprintf("%x", agreed[:8]), "known", fmt.Sprintf("%x", c.Answer[:8]))
	return nil
}

// takeShell returns an unused funded shell, funding a batch first if none
// is left (only when there is no funded shell at all: normally the
// batches are funded ahead, in blocks without a post).
func (cs *canaries) takeShell(ctx context.Context) (uint64, *ecdsa.PrivateKey, error) {
	for range 2 {
		cs.mu.Lock()
		if len(cs.st.Funded) > 0 {
			i := cs.st.Funded[0]
			cs.st.Funded = cs.st.Funded[1:]
			cs.saveLocked()
			cs.mu.Unlock()
			k, err := cs.shellKey(i)
			return i, k, err
		}
		busy := cs.funding
		if !busy {
			cs.funding = true
		}
		cs.mu.Unlock()
		if busy {
			return 0, nil, errors.New("no funded shell yet (a funding transaction is under way)")
		}
		if err := cs.fund(ctx); err != nil {
			return 0, nil, fmt.Errorf("fund canary shells: %w", err)
		}
	}
	return 0, nil, errors.New("no funded shell")
}

// returnShell puts an unused shell back.
func (cs *canaries) returnShell(i uint64) {
	cs.mu.Lock()
	cs.st.Funded = append([]uint64{i}, cs.st.Funded...)
	cs.saveLocked()
	cs.mu.Unlock()
}

// canaryPrompt picks sentences by seed and fits them to the declared
// prompt length (tokens as the model counts them): at most tokens, as
// close to it as the sentences allow; any length if tokens is 0.
func canaryPrompt(m *llm.Model, seed types.Hash, tokens uint64) (string, error) {
	start := int(binary.BigEndian.Uint32(seed[12:16]) % uint32(len(canaryPrompts)))
	prompt := canaryPrompts[start]
	if tokens == 0 {
		return prompt, nil
	}
	count := func(s string) (uint64, error) {
		t, err := m.Tokenize(s)
		return uint64(len(t)), err
	}
	n, err := count(prompt)
	if err != nil {
		return "", err
	}
	words := strings.Fields(prompt)
	for n > tokens && len(words) > 1 {
		words = words[:len(words)-1]
		if n, err = count(strings.Join(words, " ")); err != nil {
			return "", err
		}
	}
	prompt = strings.Join(words, " ")
	if n > tokens {
		return "", fmt.Errorf("no canary prompt fits %d tokens", tokens)
	}
	for i := 1; n < tokens && i < 4*len(canaryPrompts); i++ {
		for _, w := range strings.Fields(canaryPrompts[(start+i)%len(canaryPrompts)]) {
			next := prompt + " " + strings.ToLower(w)
			k, err := count(next)
			if err != nil {
				return "", err
			}
			if k > tokens {
				return prompt, nil
			}
			prompt, n = next, k
			if n == tokens {
				return prompt, nil
			}
		}
	}
	return prompt, nil
}

// lockOf is what posting m locks: stages × redundancy × max price and
// the validator fee (as the source job's, plus a margin for gas).
func lockOf(m *market.MsgPostJob, fee *uint256.Int) *uint256.Int {
	l := new(uint256.Int).Mul(m.MaxPrice, uint256.NewInt(uint64(m.Stages)*uint64(m.Redundancy)))
	if fee != nil {
		l.Add(l, fee)
	}
	return l.Add(l, types.OGPU(1))
}

func cloneReq(r market.Requirements) market.Requirements {
	out := r
	if r.MinStake != nil {
		out.MinStake = new(uint256.Int).Set(r.MinStake)
	}
	out.Attributes = append([]string(nil), r.Attributes...)
	if r.Attributes == nil {
		out.Attributes = nil
	}
	return out
}

func cmpList(a, def []string) []string {
	if len(a) == 0 {
		return def
	}
	return a
}
