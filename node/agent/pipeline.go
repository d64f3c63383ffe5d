package agent

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// RuntimeCKKS is the runtime of encrypted pipeline stages. The version is
// part of it: replicas agree bit for bit only on the same lattigo and he
// wire format.
const RuntimeCKKS = "ckks:lattigo-v5.0.7:he-v1"

// PipelineInput is the input of a pipeline job, the blob its Input hash
// names: the model, the client's evaluation keys and the encrypted input.
// Only the client can decrypt anything a pipeline produces.
type PipelineInput struct {
	Version    int        `json:"version"`
	Model      types.Hash `json:"model"`
	Keys       types.Hash `json:"keys"`
	Ciphertext types.Hash `json:"ciphertext"`
}

// Encode is the canonical encoding.
func (in *PipelineInput) Encode() []byte {
	bz, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	return bz
}

// DecodePipelineInput decodes and checks a pipeline input manifest.
func DecodePipelineInput(bz []byte) (*PipelineInput, error) {
	var in PipelineInput
	if err := strictJSON(bz, &in); err != nil {
		return nil, fmt.Errorf("pipeline input: %w", err)
	}
	switch {
	case in.Version != 1:
		return nil, fmt.Errorf("pipeline input version %d: this build reads version 1", in.Version)
	case in.Model == (types.Hash{}) || in.Keys == (types.Hash{}) || in.Ciphertext == (types.Hash{}):
		return nil, fmt.Errorf("pipeline input must name a model, evaluation keys and a ciphertext")
	}
	return &in, nil
}

// PipelineProtocol carries a stage's output ciphertext to the provider of
// the next stage in the same replica chain. The sender writes one JSON
// line (pushHeader); the receiver answers one JSON line (pushReply): go
// ahead, or why not, so a refused push costs no transfer; then the sender
// writes the ciphertext's bytes and the receiver answers whether it took
// them.
const PipelineProtocol = "/ogpu/pipeline/1"

// maxPush bounds a pushed ciphertext (a fresh N14 ciphertext is ~2 MB).
const maxPush = 64 << 20

type pushHeader struct {
	Job   uint64     `json:"job"`
	Stage uint16     `json:"stage"` // the stage whose output this is
	Hash  types.Hash `json:"hash"`
	Size  int64      `json:"size"`
}

type pushReply struct {
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
}

// pushOutput streams a stage output to peer.
func pushOutput(ctx context.Context, h *p2p.Host, to peer.ID, hd pushHeader, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	s, err := h.Host().NewStream(ctx, to, PipelineProtocol)
	if err != nil {
		return fmt.Errorf("cannot open a pipeline stream to %s: %w", to, err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if err := json.NewEncoder(s).Encode(hd); err != nil {
		return err
	}
	br := bufio.NewReader(io.LimitReader(s, 8192))
	answer := func() error {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("no answer from %s: %w", to, err)
		}
		var r pushReply
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("bad answer from %s: %w", to, err)
		}
		if !r.OK {
			return fmt.Errorf("%s refused the ciphertext: %s", to, r.Error)
		}
		return nil
	}
	if err := answer(); err != nil {
		return err
	}
	if _, err := s.Write(data); err != nil {
		return err
	}
	if err := s.CloseWrite(); err != nil {
		return err
	}
	return answer()
}

// servePushes installs the pipeline handler: a ciphertext is accepted
// only from the provider upstream of this one in its replica chain (see
// pushAllowed); it must hash to what the header says and parse as a
// ciphertext. Accepted ones go to the store (served as the stage's output:
// see Access) and to deliver.
func servePushes(h *p2p.Host, c *node.Client, store *blobstore.Store, access *Access, self func() string,
	deliver func(job uint64, stage uint16, hash types.Hash)) {
	h.Host().SetStreamHandler(PipelineProtocol, func(s network.Stream) {
		defer s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = s.SetReadDeadline(time.Now().Add(2 * time.Minute))
		reply := func(err error) {
			r := pushReply{OK: err == nil}
			if err != nil {
				r.Error = err.Error()
			}
			_ = json.NewEncoder(s).Encode(r)
		}
		br := bufio.NewReader(s)
		line, err := br.ReadSlice('\n')
		if err != nil {
			_ = s.Reset()
			return
		}
		var hd pushHeader
		if err := strictJSON(line, &hd); err != nil {
			reply(fmt.Errorf("bad header: %v", err))
			return
		}
		if hd.Size <= 0 || hd.Size > maxPush {
			reply(fmt.Errorf("size %d is not within (0, %d]", hd.Size, maxPush))
			return
		}
		j, err := c.Job(ctx, hd.Job)
		if err != nil {
			reply(err)
			return
		}
		if err := pushAllowed(ctx, c, j, hd.Stage, s.Conn().RemotePeer().String(), self()); err != nil {
			reply(err)
			return
		}
		reply(nil) // go ahead
		data := make([]byte, hd.Size)
		if _, err := io.ReadFull(br, data); err != nil {
			reply(fmt.Errorf("read %d bytes: %v", hd.Size, err))
			return
		}
		if sum := sha256.Sum256(data); types.Hash(sum) != hd.Hash {
			reply(fmt.Errorf("the bytes hash to %x, the header says %x", sum[:8], hd.Hash[:8]))
			return
		}
		if _, err := he.UnmarshalCiphertext(data); err != nil {
			reply(err)
			return
		}
		if err := access.BindOutput(hd.Hash, j, hd.Stage); err != nil {
			reply(err)
			return
		}
		if _, err := store.Put(data); err != nil {
			reply(fmt.Errorf("cannot store it: %v", err))
			return
		}
		deliver(hd.Job, hd.Stage+1, hd.Hash)
		reply(nil)
	})
}

// pushAllowed checks that peer `from` is upstream of peer `to` in a
// replica chain of pipeline job j: `to` holds live slot i of stage+1 and
// `from` holds live slot i of stage, for the same i.
//
// Replica chain i is slot i of every stage, for i < j.Redundancy: the
// award fills slots 0..r-1 of each stage, and stage s's slot i pushes its
// output to stage s+1's slot i. A no-show's slot stays where it was
// (marked dead) and its backup is appended at an index >= r: the backup
// belongs to no chain. It takes its input from the settled previous stage
// (fetchVerdict) and its output reaches the next stage after settlement,
// and the dead slot's former holder may push nothing. So a chain broken
// by a reassignment goes on through the chain's agreed results, never
// through another chain's provider.
func pushAllowed(ctx context.Context, c *node.Client, j *chain.JobView, stage uint16, from, to string) error {
	if j.Kind != market.KindPipeline {
		return fmt.Errorf("job %d is not a pipeline job", j.ID)
	}
	cur, next := taskOf(j, int(stage)), taskOf(j, int(stage)+1)
	if cur == nil || next == nil {
		return fmt.Errorf("job %d has no stage after %d", j.ID, stage)
	}
	holder := func(t *chain.TaskView, i int) string {
		if i >= len(t.Slots) || i >= int(j.Redundancy) || t.Slots[i].NoShow {
			return ""
		}
		pv, err := c.Provider(ctx, t.Slots[i].Provider)
		if err != nil {
			return ""
		}
		return pv.PeerID
	}
	for i := range next.Slots {
		if holder(next, i) != to {
			continue
		}
		if up := holder(cur, i); up != from {
			return fmt.Errorf("peer %s holds no slot of job %d stage %d upstream of this provider: only the holder of slot %d (its replica chain) pushes to it", from, j.ID, stage, i)
		}
		if j.State != market.JobRunning {
			return fmt.Errorf("job %d is %s: it takes no more stage outputs", j.ID, j.StateName)
		}
		return nil
	}
	return fmt.Errorf("this provider holds no replica chain's slot of job %d stage %d (a backup takes the settled input instead)", j.ID, stage+1)
}

// fetchVerdict makes sure the store holds blob want, the settled result of
// stage of job j: it is fetched from the providers of that stage that
// revealed it. While none serves it for a reason that may pass (a provider
// or this agent's chain node cannot be reached, or a provider cannot read
// its chain to check this peer: p2p.ErrUnavailable) it asks again, with a
// bounded backoff, until ctx ends (without a deadline: for
// fetchVerdictPatience). A refusal by every provider (forbidden, not held,
// a false blob) ends it at once: asking again would not change it.
func fetchVerdict(ctx context.Context, h *p2p.Host, c *node.Client, store *blobstore.Store, j *chain.JobView, stage int, want types.Hash) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, fetchVerdictPatience)
		defer cancel()
	}
	wait := fetchRetryMin
	for attempt := 1; ; attempt++ {
		err := fetchVerdictOnce(ctx, h, c, store, j, stage, want)
		if err == nil || ctx.Err() != nil || refusedByAll(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (asked %d times: %w)", err, attempt, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, fetchRetryMax)
	}
}

// fetchVerdict's retries.
const (
	fetchRetryMin        = 200 * time.Millisecond
	fetchRetryMax        = 5 * time.Second
	fetchVerdictPatience = 2 * time.Minute
)

func fetchVerdictOnce(ctx context.Context, h *p2p.Host, c *node.Client, store *blobstore.Store, j *chain.JobView, stage int, want types.Hash) error {
	if store.Has(want) {
		return nil
	}
	var peers []peer.ID
	var unreachable []error
	for _, s := range j.Tasks[stage].Slots {
		if s.Result == nil || *s.Result != want {
			continue
		}
		pid, err := connectProvider(ctx, h, c, s.Provider)
		if err != nil {
			unreachable = append(unreachable, err)
			continue
		}
		peers = append(peers, pid)
	}
	if len(peers) == 0 && len(unreachable) == 0 {
		return fmt.Errorf("job %d stage %d: %w %x", j.ID, stage, errNoRevealer, want[:8])
	}
	if len(peers) == 0 {
		return fmt.Errorf("job %d stage %d: no provider that revealed result %x is reachable: %w", j.ID, stage, want[:8], errors.Join(unreachable...))
	}
	if _, err := h.Fetch(ctx, want, p2p.FetchOptions{Peers: peers}); err != nil {
		return fmt.Errorf("fetch result %x of job %d stage %d: %w", want[:8], j.ID, stage, err)
	}
	return nil
}

// errNoRevealer: no provider of the stage revealed the wanted result.
var errNoRevealer = errors.New("no provider revealed the result")

// refusedByAll reports whether err, a fetch's failure, is a refusal by
// every peer asked: each one forbade it, does not hold it, broke the
// protocol or served a false blob. A peer that could not be reached or
// answered p2p.ErrUnavailable may serve it later.
func refusedByAll(err error) bool {
	switch err {
	case nil, p2p.ErrUnavailable:
		return false
	case errNoRevealer, p2p.ErrForbidden, p2p.ErrNotHeld, p2p.ErrProtocol, p2p.ErrTooLarge, blobstore.ErrHashMismatch, blobstore.ErrBadPiece:
		return true
	}
	switch x := err.(type) {
	case interface{ Unwrap() []error }:
		es := x.Unwrap()
		for _, e := range es {
			if !refusedByAll(e) {
				return false
			}
		}
		return len(es) > 0
	case interface{ Unwrap() error }:
		return refusedByAll(x.Unwrap())
	}
	return false
}

// fetchFromParties makes sure the store holds blob want of job j, fetching
// it from the job's client (looked up in the DHT if it is not connected:
// findClient), and, once an attempt has failed, from the providers of its
// slots too (dialed again every widenEvery), until ctx ends. Connected active validators
// are asked too: after an input check found the input available they
// serve it (see Validator). (A job's blobs are never announced in the
// DHT: only its parties hold them.)
func fetchFromParties(ctx context.Context, h *p2p.Host, c *node.Client, store *blobstore.Store, j *chain.JobView, want types.Hash) error {
	return fetchFromPartiesMax(ctx, h, c, store, j, want, 0)
}

// fetchFromPartiesMax is fetchFromParties refusing a blob larger than max
// bytes (0: no bound).
func fetchFromPartiesMax(ctx context.Context, h *p2p.Host, c *node.Client, store *blobstore.Store, j *chain.JobView, want types.Hash, max int64) error {
	var lastErr error
	var vals []types.Address
	var client peer.ID
	var widened time.Time
	for attempt := 0; ; attempt++ {
		if store.Has(want) {
			return nil
		}
		peers := peersOf(h, j.Client)
		if len(peers) == 0 && attempt%10 == 0 {
			// The client dials the winners at the award, but a provider
			// it did not reach, or whose connection dropped, would never
			// see it again (the soak's job 39): look it up as validators
			// do (its key from the job's posting transaction, its
			// addresses from the DHT).
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			id, err := findClient(lctx, h, c, j, client)
			cancel()
			if id != "" {
				client = id
			}
			if err == nil {
				peers = peersOf(h, j.Client)
			}
		}
		// The slot providers hold the job's inputs too (they bind what
		// they fetched); they are dialed once the first attempt has
		// failed, and again every widenEvery. Counted in attempts (every
		// tenth), this came after 90 s when the client held each request
		// until its access check gave up: three validators' input check
		// ran out of time while a provider held the evaluation keys
		// (soak finding 19).
		wider := attempt > 0 && time.Since(widened) >= widenEvery
		if wider {
			widened = time.Now()
		}
		if attempt%10 == 0 {
			vals = activeOperators(ctx, c)
		}
		for _, v := range vals {
			peers = append(peers, peersOf(h, v)...)
		}
		if wider {
			for _, a := range slotProviders(j) {
				if pid, err := connectProvider(ctx, h, c, a); err == nil {
					peers = append(peers, pid)
				}
			}
		}
		if len(peers) > 0 {
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := h.Fetch(fctx, want, p2p.FetchOptions{Peers: peers, MaxSize: max})
			cancel()
			if err == nil {
				continue
			}
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr == nil {
				lastErr = errors.New("none of the job's parties was reachable")
			}
			return fmt.Errorf("cannot fetch %x of job %d: %v (%w)", want[:8], j.ID, lastErr, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// widenEvery is how often fetchFromPartiesMax dials the job's slot
// providers while the blob is still missing.
const widenEvery = 5 * time.Second

// activeOperators lists the operators of the active validators (nil if
// the chain cannot say).
func activeOperators(ctx context.Context, c *node.Client) []types.Address {
	vals, err := c.Validators(ctx)
	if err != nil {
		return nil
	}
	var out []types.Address
	for _, v := range vals {
		if v.Active && v.Power > 0 {
			out = append(out, v.Operator)
		}
	}
	return out
}

// untilHeight is ctx, cancelled once the chain has committed height.
func untilHeight(ctx context.Context, c *node.Client, height uint64) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		if c.WaitHeight(ctx, int64(height)) == nil {
			cancel()
		}
	}()
	return ctx, cancel
}

// pipelineParts is what a stage needs: the input manifest and the model
// (checked against the job); the client's evaluation keys are in the
// store (parse them with evalKeys).
type pipelineParts struct {
	In    *PipelineInput
	Model *he.Model
}

// evaluator parses the evaluation keys from store and prepares the model.
func (pp *pipelineParts) evaluator(store *blobstore.Store, m *he.Model) (*he.Evaluator, error) {
	kb, err := store.Get(pp.In.Keys)
	if err != nil {
		return nil, err
	}
	keys, err := he.UnmarshalEvalKeys(kb)
	if err != nil {
		return nil, err
	}
	return he.NewEvaluator(m, keys)
}

func loadPipelineParts(ctx context.Context, h *p2p.Host, c *node.Client, store *blobstore.Store, j *chain.JobView) (*pipelineParts, error) {
	if err := fetchFromParties(ctx, h, c, store, j, j.Input); err != nil {
		return nil, err
	}
	bz, err := store.Get(j.Input)
	if err != nil {
		return nil, err
	}
	in, err := DecodePipelineInput(bz)
	if err != nil {
		return nil, err
	}
	if in.Model != j.Model {
		return nil, fmt.Errorf("job %d's input names model %x, the job %x", j.ID, in.Model[:8], j.Model[:8])
	}
	for _, want := range []types.Hash{in.Model, in.Keys} {
		if err := fetchFromParties(ctx, h, c, store, j, want); err != nil {
			return nil, err
		}
	}
	mb, err := store.Get(in.Model)
	if err != nil {
		return nil, err
	}
	m, err := he.ParseModel(mb)
	if err != nil {
		return nil, err
	}
	if len(m.Stages) != int(j.Stages) {
		return nil, fmt.Errorf("job %d has %d stages, its model %d", j.ID, j.Stages, len(m.Stages))
	}
	return &pipelineParts{In: in, Model: m}, nil
}

// stageInput returns the agreed input of stage s: the client's ciphertext
// for stage 0, else the settled result of stage s-1 (zero if not yet).
func stageInput(j *chain.JobView, in *PipelineInput, s int) types.Hash {
	if s == 0 {
		return in.Ciphertext
	}
	if s-1 < len(j.Tasks) && j.Tasks[s-1].Status == "settled" {
		return j.Tasks[s-1].Verdict
	}
	return types.Hash{}
}

// evalStage evaluates stage s on the ciphertext encoded in inBytes and
// returns the output's encoding.
func evalStage(ev *he.Evaluator, s int, inBytes []byte) ([]byte, error) {
	ct, err := he.UnmarshalCiphertext(inBytes)
	if err != nil {
		return nil, err
	}
	out, err := ev.EvalStage(s, ct)
	if err != nil {
		return nil, err
	}
	return out.Marshal()
}
