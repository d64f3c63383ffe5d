package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/types"
)

// Grant kinds: what a blob is to its job.
const (
	// GrantInput is a job's input: an LLM prompt; a pipeline's input
	// manifest, model, evaluation keys and ciphertext.
	GrantInput = "input"
	// GrantOutput is the output of one stage of a job.
	GrantOutput = "output"
)

// Grant binds a blob to a job: the blob is served to the parties the
// chain names for that job and that kind of blob (see Access).
type Grant struct {
	Job uint64 `json:"job"`
	// Client is the job's client, the blob's owner: a blob bound to one
	// client's job is never bound to another client's (job inputs are
	// public hashes, and anyone may post a job naming one).
	Client types.Address `json:"client"`
	Kind   string        `json:"kind"`
	Stage  uint16        `json:"stage,omitempty"` // GrantOutput: the stage it is the output of
}

// ErrOtherOwner: a blob already bound to one client's job cannot be bound
// to another client's job.
var ErrOtherOwner = errors.New("the blob belongs to another client's job")

// Access decides which peers may fetch which blobs and read which token
// streams. It refuses by default: a blob is served only if it is public
// (Public: the GGUF models a provider serves) or bound to a job (Bind), and
// then only to the parties the chain names for that job, at the time of
// the request:
//
//   - the job's client (a peer whose secp256k1 identity is the client's
//     account key) gets every blob of its job;
//   - an input goes to the providers holding a live slot in the job (by
//     the peer id of their provider record), and to active validators
//     (bonded, power > 0, not jailed) while a stage of the job is
//     disputed or in an input check (a validator that found the input
//     available binds it too, and serves it to the providers that
//     reported it);
//   - the output of stage s goes to the providers holding a live slot of
//     stage s+1 (the next stage needs it as its input), but to one that
//     also holds a slot of stage s only once its own commitment for stage
//     s is on chain (or its commit window is over); and to active
//     validators while stage s or s+1 is disputed. Never to a co-provider
//     of stage s otherwise: it would copy the result instead of computing.
//
// An Access opened on a directory (OpenAccess) keeps its bindings on disk:
// a restart keeps every blob as private as before, and memory holds only
// the jobs in progress. Decisions are cached per peer and blob for a few
// seconds, so that a fetch's many piece requests cost one set of chain
// queries. When the chain cannot be read (the node is down or catching
// up) and the peer is not found a party otherwise, the answer is
// p2p.ErrUnavailable, "ask again", never a refusal, and it is not cached.
type Access struct {
	Chain *node.Client

	dir string // "": bindings in memory only

	mu     sync.Mutex
	public map[types.Hash]bool
	// grants holds every binding (no dir), or the bindings read or
	// written lately (dir: a cache of the files, bounded, pruned when a
	// job closes).
	grants    map[types.Hash][]Grant
	decisions map[decisionKey]decision
	provPeers map[types.Address]cachedPeer
	vals      []chain.ValidatorView
	minVal    *uint256.Int // MinValidatorStake, with vals
	valsUntil time.Time
}

type decisionKey struct {
	peer   peer.ID
	hash   types.Hash // zero for a stream
	job    uint64     // a stream's job
	stream bool
}

type decision struct {
	err   error
	until time.Time
}

type cachedPeer struct {
	id    string
	until time.Time
}

// Cache bounds and lifetimes.
const (
	decisionTTL     = 2 * time.Second
	maxDecisions    = 4096
	maxCachedGrants = 4096
	providerTTL     = 10 * time.Second
	maxProviders    = 1024
	validatorsTTL   = 3 * time.Second
)

// NewAccess returns an Access that keeps its bindings in memory (for
// short-lived agents and tests; a long-running agent uses OpenAccess).
func NewAccess(c *node.Client) *Access {
	return &Access{Chain: c, public: map[types.Hash]bool{}, grants: map[types.Hash][]Grant{},
		decisions: map[decisionKey]decision{}, provPeers: map[types.Address]cachedPeer{}}
}

// OpenAccess returns an Access whose bindings live in dir (created if
// missing), one small file per blob, so that they survive a restart.
func OpenAccess(c *node.Client, dir string) (*Access, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("blob access directory: %w", err)
	}
	a := NewAccess(c)
	a.dir = dir
	return a, nil
}

// Public marks blob h as public: anyone may fetch it (a model).
func (a *Access) Public(h types.Hash) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.public[h] = true
}

// BindInput binds h as an input of job j.
func (a *Access) BindInput(h types.Hash, j *chain.JobView) error {
	return a.Bind(h, Grant{Job: j.ID, Client: j.Client, Kind: GrantInput})
}

// BindOutput binds h as the output of stage of job j.
func (a *Access) BindOutput(h types.Hash, j *chain.JobView, stage uint16) error {
	return a.Bind(h, Grant{Job: j.ID, Client: j.Client, Kind: GrantOutput, Stage: stage})
}

// Bind adds g to blob h's grants (and to disk, with a directory). A blob
// bound to another client's job is refused with ErrOtherOwner: it stays
// served to that job's parties only.
func (a *Access) Bind(h types.Hash, g Grant) error { return a.bind(h, g, false) }

// BindShared adds g to blob h's grants even if the blob is bound to
// another client's job. Only for a blob g's client is known to hold too:
// an input it proved it holds (p2p.Host.ProveHeld), or the output this
// agent computed from such an input (two clients with the same prompt get
// the same greedy output; each may fetch it, and it tells neither
// anything its own prompt did not).
func (a *Access) BindShared(h types.Hash, g Grant) error { return a.bind(h, g, true) }

func (a *Access) bind(h types.Hash, g Grant, shared bool) error {
	if g.Kind != GrantInput && g.Kind != GrantOutput {
		return fmt.Errorf("grant kind %q: want %s or %s", g.Kind, GrantInput, GrantOutput)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	have, err := a.grantsLocked(h)
	if err != nil {
		return err
	}
	for _, o := range have {
		if o == g {
			return nil
		}
		if o.Client != g.Client && !shared {
			return fmt.Errorf("blob %x is bound to job %d of client %s, not offered to job %d of %s: %w", h[:8], o.Job, o.Client.Hex(), g.Job, g.Client.Hex(), ErrOtherOwner)
		}
	}
	next := append(slices.Clone(have), g)
	if a.dir != "" {
		bz, _ := json.Marshal(next)
		path := a.file(h)
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, bz, 0o600); err != nil {
			return fmt.Errorf("save the access rule of blob %x: %w", h[:8], err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("save the access rule of blob %x: %w", h[:8], err)
		}
	}
	a.cacheGrants(h, next)
	for k := range a.decisions {
		if k.hash == h {
			delete(a.decisions, k)
		}
	}
	return nil
}

// Grants returns blob h's grants.
func (a *Access) Grants(h types.Hash) ([]Grant, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g, err := a.grantsLocked(h)
	return slices.Clone(g), err
}

// Forget drops what memory holds for job once it is closed: its cached
// bindings (with a directory they stay on disk and are read again if a
// peer asks) and cached decisions. Without a directory the bindings are
// all there is, and they stay.
func (a *Access) Forget(job uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dir != "" {
		for h, gs := range a.grants {
			if slices.ContainsFunc(gs, func(g Grant) bool { return g.Job == job }) {
				delete(a.grants, h)
			}
		}
	}
	for k := range a.decisions {
		if k.job == job {
			delete(a.decisions, k)
		}
	}
}

func (a *Access) file(h types.Hash) string { return filepath.Join(a.dir, fmt.Sprintf("%x.json", h)) }

func (a *Access) cacheGrants(h types.Hash, gs []Grant) {
	if a.dir != "" && len(a.grants) >= maxCachedGrants {
		clear(a.grants)
	}
	a.grants[h] = gs
}

// grantsLocked returns h's grants from memory or disk (a.mu held).
func (a *Access) grantsLocked(h types.Hash) ([]Grant, error) {
	if gs, ok := a.grants[h]; ok || a.dir == "" {
		return gs, nil
	}
	bz, err := os.ReadFile(a.file(h))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the access rule of blob %x: %w", h[:8], err)
	}
	var gs []Grant
	if err := json.Unmarshal(bz, &gs); err != nil {
		return nil, fmt.Errorf("the access rule of blob %x (%s) is corrupt, so the blob is served to nobody: %w", h[:8], a.file(h), err)
	}
	a.cacheGrants(h, gs)
	return gs, nil
}

// Authorize is p2p.Config.Authorize (install it with Host.SetAuthorize).
func (a *Access) Authorize(ctx context.Context, remote peer.ID, h types.Hash) error {
	a.mu.Lock()
	public := a.public[h]
	gs, err := a.grantsLocked(h)
	a.mu.Unlock()
	switch {
	case public:
		return nil
	case err != nil:
		return err
	case len(gs) == 0:
		return fmt.Errorf("blob %x is not offered to peers here (not a public model, and bound to no job this node works on)", h[:8])
	}
	return a.decide(decisionKey{peer: remote, hash: h}, func() error {
		var errs, down []error
		for _, g := range gs {
			err := a.allowed(ctx, g, remote)
			switch {
			case err == nil:
				return nil
			case chainDown(err):
				down = append(down, err)
			default:
				errs = append(errs, err)
			}
		}
		if len(down) > 0 {
			// Not a refusal: the peer may be a party, and the chain
			// will say once the node answers. The fetcher sees
			// p2p.ErrUnavailable and asks again.
			return fmt.Errorf("%w: this provider cannot read the chain to check the requester now (ask again shortly): %w",
				p2p.ErrUnavailable, errors.Join(append(down, errs...)...))
		}
		return errors.Join(errs...)
	})
}

// StreamParty returns nil if remote may read job's token stream: the
// job's client, or an active validator while a stage of the job is
// disputed. Never a provider: a co-provider would copy the result hash
// the stream ends with instead of computing it.
func (a *Access) StreamParty(ctx context.Context, job uint64, remote peer.ID) error {
	return a.decide(decisionKey{peer: remote, job: job, stream: true}, func() error {
		j, err := a.Chain.Job(ctx, job)
		if err != nil {
			return errChain{fmt.Errorf("job %d: %w", job, err)}
		}
		addr, aerr := p2p.AddressOf(remote)
		if aerr == nil && addr == j.Client {
			return nil
		}
		if aerr == nil && disputed(j, -1) && a.activeValidator(ctx, addr) == nil {
			return nil
		}
		return fmt.Errorf("peer %s may not read job %d's token stream: it goes to the job's client only (and to validators while the job is disputed)", remote, job)
	})
}

// decide returns the cached decision for k, or computes and caches it.
// A failure to reach the chain is not cached (a refusal by the chain's
// query, e.g. an unknown job, is).
func (a *Access) decide(k decisionKey, f func() error) error {
	now := time.Now()
	a.mu.Lock()
	d, ok := a.decisions[k]
	a.mu.Unlock()
	if ok && now.Before(d.until) {
		return d.err
	}
	err := f()
	if !errors.Is(err, p2p.ErrUnavailable) && !chainDown(err) {
		a.mu.Lock()
		if len(a.decisions) >= maxDecisions {
			clear(a.decisions)
		}
		a.decisions[k] = decision{err: err, until: now.Add(decisionTTL)}
		a.mu.Unlock()
	}
	return err
}

// errChain marks a failure to read the chain (not a refusal).
type errChain struct{ err error }

func (e errChain) Error() string { return e.err.Error() }
func (e errChain) Unwrap() error { return e.err }

// chainDown reports whether err (one decision's) is a failure to reach
// the chain: marked errChain, and not a query the app refused (an unknown
// job is an answer).
func chainDown(err error) bool {
	var ec errChain
	var qe *node.QueryError
	return errors.As(err, &ec) && !errors.As(ec.err, &qe)
}

// allowed returns nil if remote is a party that may fetch a blob granted
// by g, as the chain stands now.
func (a *Access) allowed(ctx context.Context, g Grant, remote peer.ID) error {
	j, err := a.Chain.Job(ctx, g.Job)
	if err != nil {
		return errChain{fmt.Errorf("job %d: %w", g.Job, err)}
	}
	if j.Client != g.Client {
		return fmt.Errorf("job %d's client is %s, not the blob's owner %s", g.Job, j.Client.Hex(), g.Client.Hex())
	}
	addr, aerr := p2p.AddressOf(remote)
	if aerr == nil && addr == j.Client {
		return nil
	}
	// down is the last failure to read the chain while looking for
	// remote among the parties: if remote is found nowhere, the answer
	// is "cannot decide now", not a refusal.
	var down error
	liveSlot := func(t *chain.TaskView) (chain.SlotView, bool) {
		sl, ok, err := a.liveSlot(ctx, t, remote)
		if err != nil {
			down = err
		}
		return sl, ok
	}
	validator := func(stages ...int) bool {
		if aerr != nil {
			return false
		}
		for _, s := range stages {
			if disputed(j, s) {
				err := a.activeValidator(ctx, addr)
				if chainDown(err) {
					down = err
				}
				return err == nil
			}
		}
		return false
	}
	switch g.Kind {
	case GrantInput:
		for i := range j.Tasks {
			if _, ok := liveSlot(&j.Tasks[i]); ok {
				return nil
			}
		}
		if validator(-1) {
			return nil
		}
		if down != nil {
			return down
		}
		return fmt.Errorf("peer %s is not a party to job %d (its client, a provider holding a slot, or a validator while the job is disputed)", remote, g.Job)
	case GrantOutput:
		s := int(g.Stage)
		if next := taskOf(j, s+1); next != nil {
			if _, ok := liveSlot(next); ok {
				if cur := taskOf(j, s); cur != nil {
					if sl, mine := liveSlot(cur); mine && !sl.Committed && (cur.Status == "executing" || cur.Status == "waiting") {
						return fmt.Errorf("peer %s holds a slot of job %d stage %d too and has not committed its own result: the stage's outputs reach it once its commitment is on chain", remote, g.Job, s)
					}
				}
				return nil
			}
		}
		if validator(s, s+1) {
			return nil
		}
		if down != nil {
			return down
		}
		return fmt.Errorf("peer %s may not fetch the output of job %d stage %d (its client, a provider of the next stage, or a validator while the stage is disputed)", remote, g.Job, s)
	}
	return fmt.Errorf("grant kind %q is unknown", g.Kind)
}

// liveSlot returns the live slot of t whose provider's record names peer
// remote. err: none was found and some provider's record could not be
// read (an errChain).
func (a *Access) liveSlot(ctx context.Context, t *chain.TaskView, remote peer.ID) (chain.SlotView, bool, error) {
	var down error
	for _, sl := range t.Slots {
		if sl.NoShow {
			continue
		}
		id, err := a.providerPeer(ctx, sl.Provider)
		if err == nil && id == remote.String() {
			return sl, true, nil
		}
		if err != nil {
			down = errChain{fmt.Errorf("provider %s: %w", sl.Provider.Hex(), err)}
		}
	}
	return chain.SlotView{}, false, down
}

// providerPeer is the peer id provider addr's record publishes (cached).
func (a *Access) providerPeer(ctx context.Context, addr types.Address) (string, error) {
	now := time.Now()
	a.mu.Lock()
	c, ok := a.provPeers[addr]
	a.mu.Unlock()
	if ok && now.Before(c.until) {
		return c.id, nil
	}
	pv, err := a.Chain.Provider(ctx, addr)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	if len(a.provPeers) >= maxProviders {
		clear(a.provPeers)
	}
	a.provPeers[addr] = cachedPeer{id: pv.PeerID, until: now.Add(providerTTL)}
	a.mu.Unlock()
	return pv.PeerID, nil
}

// activeValidator returns nil if addr operates a validator that counts:
// power > 0, bonded at least the minimum validator stake, not jailed, not
// tombstoned. A record with no power (one that unbonded, or never had
// enough stake) has no validator privilege.
func (a *Access) activeValidator(ctx context.Context, addr types.Address) error {
	vals, min, err := a.validators(ctx)
	if err != nil {
		return err
	}
	for _, v := range vals {
		if v.Operator != addr {
			continue
		}
		switch {
		case !v.Active:
			return fmt.Errorf("validator %s is not active (the chain's escrow.IsActiveValidator)", addr.Hex())
		case v.Power == 0:
			return fmt.Errorf("validator %s has no voting power", addr.Hex())
		case v.Jailed || v.Tombstoned:
			return fmt.Errorf("validator %s is jailed", addr.Hex())
		case v.Stake == nil || v.Stake.Cmp(min) < 0:
			return fmt.Errorf("validator %s has less than the minimum validator stake bonded", addr.Hex())
		}
		return nil
	}
	return fmt.Errorf("%s is not a validator", addr.Hex())
}

// validators returns the validator set and the minimum validator stake
// (cached for validatorsTTL).
func (a *Access) validators(ctx context.Context) ([]chain.ValidatorView, *uint256.Int, error) {
	now := time.Now()
	a.mu.Lock()
	if now.Before(a.valsUntil) {
		vals, min := a.vals, a.minVal
		a.mu.Unlock()
		return vals, min, nil
	}
	a.mu.Unlock()
	vals, err := a.Chain.Validators(ctx)
	if err != nil {
		return nil, nil, errChain{fmt.Errorf("validators: %w", err)}
	}
	params, err := a.Chain.Params(ctx)
	if err != nil {
		return nil, nil, errChain{fmt.Errorf("params: %w", err)}
	}
	min := new(uint256.Int)
	if params.Staking.MinValidatorStake != nil {
		min.Set(params.Staking.MinValidatorStake)
	}
	a.mu.Lock()
	a.vals, a.minVal, a.valsUntil = vals, min, now.Add(validatorsTTL)
	a.mu.Unlock()
	return vals, min, nil
}

// taskOf returns stage s of j, or nil.
func taskOf(j *chain.JobView, s int) *chain.TaskView {
	for i := range j.Tasks {
		if int(j.Tasks[i].Stage) == s {
			return &j.Tasks[i]
		}
	}
	return nil
}

// disputed reports whether validators vote on stage s of j (s < 0: any
// stage): a dispute, or an input check (a provider reported it could not
// get or use the input; the validators fetch it to vote, and serve it
// afterwards).
func disputed(j *chain.JobView, s int) bool {
	for _, t := range j.Tasks {
		if (s < 0 || int(t.Stage) == s) && (t.Status == "disputed" || t.Status == "input_check" || t.Status == "game") {
			return true
		}
	}
	return false
}

// slotProviders lists the providers holding a slot in any of j's stages.
func slotProviders(j *chain.JobView) []types.Address {
	var out []types.Address
	for _, t := range j.Tasks {
		for _, s := range t.Slots {
			out = append(out, s.Provider)
		}
	}
	return out
}

// connectProvider dials a provider at the peer id and addresses its
// on-chain record publishes, and returns the peer id.
func connectProvider(ctx context.Context, h *p2p.Host, c *node.Client, addr types.Address) (peer.ID, error) {
	pv, err := c.Provider(ctx, addr)
	if err != nil {
		return "", err
	}
	id, err := peer.Decode(pv.PeerID)
	if err != nil {
		return "", fmt.Errorf("provider %s publishes a bad peer id %q: %w", addr, pv.PeerID, err)
	}
	if err := h.ConnectPeer(ctx, id, pv.Addrs); err != nil {
		return "", fmt.Errorf("cannot reach provider %s at %v: %w", addr, pv.Addrs, err)
	}
	return id, nil
}

// peersOf lists the connected peers whose identity is addr's account key.
func peersOf(h *p2p.Host, addr types.Address) []peer.ID {
	var out []peer.ID
	for _, id := range h.Host().Network().Peers() {
		if a, err := p2p.AddressOf(id); err == nil && a == addr {
			out = append(out, id)
		}
	}
	return out
}
