package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// The client's side of the console: an account's jobs, sessions and
// escrow on its page, why a job has no bids, and — when the console's
// process holds that account's key — posting and cancelling jobs.

// Bounds of the post form: a page is not the place for a book-length
// prompt or a job without a price.
const (
	maxPromptBytes  = 4096
	maxFormTokens   = 4096
	maxFormReplicas = 8
	maxListedJobs   = 50
	maxListedSess   = 20
	postTimeout     = 60 * time.Second
)

// clientView is the client part of an account page.
type clientView struct {
	Jobs     []chain.JobView
	MoreJobs int
	// Locked is what the account's jobs hold in escrow now.
	Locked   *uint256.Int
	Sessions []sessionRow
	SessErr  string
	// Own: the console holds this account's key (post and cancel).
	Own    bool
	Models []ModelChoice
	Flash  string
}

// sessionRow is one of an account's sessions with its budget.
type sessionRow struct {
	ID                  uint64
	Phase               string
	Lanes               int
	Budget, Paid        *uint256.Int
	PriceIn, PriceOut   *uint256.Int
	Expiry, Height, Due uint64
}

// ownAddress is the account whose key the console's process holds.
func (s *Server) ownAddress() (types.Address, bool) {
	if s.opt.Client == nil {
		return types.Address{}, false
	}
	return s.opt.Client.Address(), true
}

// ownOr404 is ownAddress, or a 404 page saying how to give the console a
// key.
func (s *Server) ownOr404(w http.ResponseWriter, r *http.Request) (types.Address, bool) {
	own, ok := s.ownAddress()
	if !ok {
		s.fail(w, r, http.StatusNotFound, "No client account", "This console holds no client key. Start it with `ogpu console --from NAME` to post and follow jobs from this page.")
	}
	return own, ok
}

// clientOf reads addr's jobs and sessions for its account page.
func (s *Server) clientOf(ctx context.Context, addr types.Address, flash string) *clientView {
	v := &clientView{Locked: new(uint256.Int), Flash: flash}
	if own, ok := s.ownAddress(); ok && own == addr {
		v.Own, v.Models = true, s.opt.Client.Models()
	}
	jobs, err := s.c.Jobs(ctx, "/client/"+addr.Hex())
	if err == nil {
		sort.Slice(jobs, func(i, k int) bool { return jobs[i].ID > jobs[k].ID })
		for _, j := range jobs {
			if j.Locked != nil {
				v.Locked.Add(v.Locked, j.Locked)
			}
		}
		if len(jobs) > maxListedJobs {
			v.MoreJobs = len(jobs) - maxListedJobs
			jobs = jobs[:maxListedJobs]
		}
		v.Jobs = jobs
	}
	ids, err := s.sessionsOf(ctx, addr)
	if err != nil {
		v.SessErr = "sessions cannot be read from the node's indexer: " + err.Error()
	}
	for _, id := range ids {
		sv, err := s.c.Session(ctx, id)
		if err != nil || sv.Session == nil {
			continue
		}
		r := sessionRow{ID: id, Phase: sv.Phase, Lanes: len(sv.Lanes), Budget: new(uint256.Int), Paid: new(uint256.Int),
			PriceIn: sv.PriceIn, PriceOut: sv.PriceOut, Expiry: sv.Expiry, Height: sv.Height, Due: sv.Due}
		for _, l := range sv.Lanes {
			if l.Budget != nil {
				r.Budget.Add(r.Budget, l.Budget)
			}
			if l.Paid != nil {
				r.Paid.Add(r.Paid, l.Paid)
			}
		}
		v.Sessions = append(v.Sessions, r)
	}
	return v
}

// sessionsOf are addr's latest sessions, from the indexed session_opened
// event (the chain keeps no per-client session list).
func (s *Server) sessionsOf(ctx context.Context, addr types.Address) ([]uint64, error) {
	typ := session.EventOpened{}.EventType()
	q := fmt.Sprintf("%s.client='%s'", typ, addr.Hex())
	perPage, page := maxListedSess, 1
	heights := map[int64]bool{}
	txs, err := s.c.RPC.TxSearch(ctx, q, false, &page, &perPage, "desc")
	if err != nil {
		return nil, fmt.Errorf("tx_search %q: %w", q, err)
	}
	for _, tx := range txs.Txs {
		heights[tx.Height] = true
	}
	blocks, err := s.c.RPC.BlockSearch(ctx, q, &page, &perPage, "desc")
	if err != nil {
		return nil, fmt.Errorf("block_search %q: %w", q, err)
	}
	for _, b := range blocks.Blocks {
		heights[b.Block.Height] = true
	}
	seen := map[uint64]bool{}
	var ids []uint64
	for h := range heights {
		b, err := s.c.BlockEventsAt(ctx, h)
		if err != nil {
			return ids, err
		}
		for _, ev := range b.Events {
			if ev.Type != typ {
				continue
			}
			c, _ := attr(ev, "client")
			v, _ := attr(ev, "session")
			if id, err := strconv.ParseUint(v, 10, 64); err == nil && !seen[id] && strings.EqualFold(c, addr.Hex()) {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	sort.Slice(ids, func(i, k int) bool { return ids[i] > ids[k] })
	if len(ids) > maxListedSess {
		ids = ids[:maxListedSess]
	}
	return ids, nil
}

// client sends the console's own account to its page.
func (s *Server) client(w http.ResponseWriter, r *http.Request) {
	own, ok := s.ownOr404(w, r)
	if !ok {
		return
	}
	http.Redirect(w, r, "/accounts/"+own.Hex(), http.StatusSeeOther)
}

// postJob posts an inference job from the form of the client page, signed
// by this process, and sends the browser to the job's page.
func (s *Server) postJob(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.ownOr404(w, r); !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 2*maxPromptBytes)
	p, err := parsePostForm(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "The job was not posted", err.Error()+" Nothing was sent to the chain; go back and correct the form.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), postTimeout)
	defer cancel()
	id, _, err := s.opt.Client.PostLLM(ctx, p)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "The job was not posted", err.Error())
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/jobs/%d?msg=%s", id, url.QueryEscape("Posted: the job is on chain and its escrow locked.")), http.StatusSeeOther)
}

// parsePostForm reads and checks the post form.
func parsePostForm(r *http.Request) (PostLLM, error) {
	var p PostLLM
	if err := r.ParseForm(); err != nil {
		return p, fmt.Errorf("the form cannot be read (%v): the prompt may be over %d bytes.", err, maxPromptBytes)
	}
	f := r.PostForm
	mh := strings.TrimSpace(f.Get("model"))
	if !hashRE.MatchString(mh) {
		return p, fmt.Errorf("model %q is not a model hash: pick a model from the list.", mh)
	}
	p.Model = types.Hash(common.HexToHash(mh))
	p.Prompt = f.Get("prompt")
	if strings.TrimSpace(p.Prompt) == "" {
		return p, fmt.Errorf("the prompt is empty: write what the model should continue.")
	}
	if len(p.Prompt) > maxPromptBytes {
		return p, fmt.Errorf("the prompt has %d bytes: at most %d from this page.", len(p.Prompt), maxPromptBytes)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(f.Get("max_tokens")), 10, 64)
	if err != nil || n == 0 || n > maxFormTokens {
		return p, fmt.Errorf("max tokens %q: want a whole number from 1 to %d.", f.Get("max_tokens"), maxFormTokens)
	}
	p.MaxTokens = n
	rep, err := strconv.ParseUint(strings.TrimSpace(f.Get("redundancy")), 10, 16)
	if err != nil || rep < 2 || rep > maxFormReplicas {
		return p, fmt.Errorf("redundancy %q: want 2 to %d providers (the chain verifies a result by comparing replicas).", f.Get("redundancy"), maxFormReplicas)
	}
	p.Redundancy = uint16(rep)
	if p.MaxPrice, err = types.ParseAmount(f.Get("max_price")); err != nil {
		return p, fmt.Errorf("price cap: %v.", err)
	}
	if p.MaxPrice.IsZero() {
		return p, fmt.Errorf("the price cap is 0: nobody would run the job; offer e.g. 1ogpu.")
	}
	switch p.Mode = f.Get("mode"); p.Mode {
	case "", market.ModeAuction:
		p.Mode = market.ModeAuction
	case market.ModePool:
	default:
		return p, fmt.Errorf("mode %q: want %q or %q.", p.Mode, market.ModeAuction, market.ModePool)
	}
	return p, nil
}

// cancelJob cancels one of the console's own jobs.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	own, ok := s.ownOr404(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		s.fail(w, r, http.StatusBadRequest, "Bad job id", fmt.Sprintf("job %q: want a job id, a number from 1", r.PathValue("id")))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), postTimeout)
	defer cancel()
	j, err := s.c.Job(ctx, id)
	if err != nil {
		s.failNode(w, r, fmt.Sprintf("Job %d", id), err)
		return
	}
	if j.Client != own {
		s.fail(w, r, http.StatusForbidden, "Not your job", fmt.Sprintf("job %d was posted by %s; this console holds %s", id, j.Client.Hex(), own.Hex()))
		return
	}
	if err := s.opt.Client.Cancel(ctx, id); err != nil {
		s.fail(w, r, http.StatusConflict, "The job was not cancelled", err.Error())
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/jobs/%d?msg=%s", id, url.QueryEscape("Cancelled: the escrow is refunded.")), http.StatusSeeOther)
}

// closeSession closes one of the console's own sessions early.
func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	own, ok := s.ownOr404(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		s.fail(w, r, http.StatusBadRequest, "Bad session id", fmt.Sprintf("session %q: want a session id, a number from 1", r.PathValue("id")))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), postTimeout)
	defer cancel()
	if err := s.opt.Client.CloseSession(ctx, id); err != nil {
		s.fail(w, r, http.StatusConflict, "The session was not closed", err.Error())
		return
	}
	http.Redirect(w, r, "/accounts/"+own.Hex()+"?msg="+url.QueryEscape(fmt.Sprintf("Session %d closed: what no voucher claimed is refunded after its grace window.", id)), http.StatusSeeOther)
}

// textSource is a ClientSide that relays the text of the jobs it runs.
type textSource interface {
	setTextSink(func(job uint64, text string))
	Output(job uint64) (text string, done, ok bool)
}

// whyNoBids reads why a job in or past its auction has no bids, for its
// page; nil when it has bids or the question does not arise.
func (s *Server) whyNoBids(ctx context.Context, j *chain.JobView) *chain.WhyNoBidsView {
	switch j.StateName {
	case "bidding", "revealing", "expired":
	default:
		return nil
	}
	v, err := s.c.WhyNoBids(ctx, j.ID)
	if err != nil || v.Bids > 0 {
		return nil
	}
	return v
}
