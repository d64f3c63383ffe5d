package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// Chart assets: uPlot's files, copied by `make console-assets` into
// web/static/vendor (gitignored) and embedded from there.
const (
	uplotJS  = "web/static/vendor/uPlot.iife.min.js"
	uplotCSS = "web/static/vendor/uPlot.min.css"
)

// ChartsEmbedded reports whether this binary embeds the chart library.
// Without it (a plain go build) the pages show the charts' data as
// tables, with a line saying to run `make console-assets`.
func ChartsEmbedded() bool {
	for _, n := range []string{uplotJS, uplotCSS} {
		if _, err := fs.Stat(webFS, n); err != nil {
			return false
		}
	}
	return true
}

// maxProviderJobs bounds the jobs listed on a provider page (newest first).
const maxProviderJobs = 100

// maxPaymentRows bounds the payments listed on a provider page (newest
// first); the chart and the totals use every payment read.
const maxPaymentRows = 50

// providerRow is one line of /providers.
type providerRow struct {
	Address types.Address
	Moniker string
	Models  int
	Bonded  *uint256.Int
	Score   uint64
	Jailed  bool
	Tomb    bool
}

// providers lists the registered providers, a chain query's page at a
// time (?after=ADDR pages on).
func (s *Server) providers(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	path := chain.QueryProviders
	after := r.URL.Query().Get("after")
	if after != "" {
		if !common.IsHexAddress(after) {
			s.fail(w, r, http.StatusBadRequest, "Bad address", fmt.Sprintf("after=%q is not an address: want 0x and 40 hex digits", after))
			return
		}
		path += "?after=" + common.HexToAddress(after).Hex()
	}
	var list []chain.ProviderView
	if _, err := s.c.QueryJSON(ctx, path, nil, &list); err != nil {
		s.failNode(w, r, "providers", err)
		return
	}
	v := struct {
		Rows []providerRow
		Next string
	}{}
	for _, p := range list {
		row := providerRow{Address: p.Address, Bonded: p.Bonded, Score: p.Score}
		if p.Provider != nil {
			row.Moniker, row.Models, row.Jailed, row.Tomb = p.Moniker, len(p.Models), p.Jailed, p.Tombstoned
		}
		v.Rows = append(v.Rows, row)
	}
	// The chain examines at most MaxScanned records per query (and lists
	// at most MaxListed): a full page may have more after it.
	if len(list) >= min(chain.MaxScanned, chain.MaxListed) {
		v.Next = list[len(list)-1].Address.Hex()
	}
	s.render(w, http.StatusOK, "providers", page{Title: "Providers", Nav: "providers", Data: v})
}

// jailView is the jail banner: until when, why, and what to do.
type jailView struct {
	Until      uint64
	Height     int64
	Reason     string
	Tombstoned bool
	// BondFirst is how much stake is missing to the minimum (nil: none).
	BondFirst *uint256.Int
	Min       *uint256.Int
}

// taskRow is one job of the provider.
type taskRow struct {
	Job       uint64
	State     string
	Phase     string
	Stages    []taskStage
	Paid      *uint256.Int
	Partial   bool // the payments read are cut: Paid may miss older ones
	Completed bool
}

type taskStage struct {
	Stage          uint16
	Status         string
	Price          *uint256.Int
	CommitDeadline uint64
	RevealDeadline uint64
	NoShow         bool
}

type paymentRow struct {
	Height int64
	Time   string
	Job    uint64
	Stage  uint16
	Amount *uint256.Int
	Via    string
}

// providerView is the provider page.
type providerView struct {
	Addr types.Address
	P    *chain.ProviderView
	// Unbonding is the sum of P.Unbonding's entries.
	Unbonding *uint256.Int
	Height    int64
	Jail      *jailView
	Earn      *earnings
	EarnErr   string
	Payments  []paymentRow
	Count     int
	Tasks     []taskRow
	MoreJobs  int
	Charts    bool
	Local     *localView
	Flash     string
	FlashErr  bool
}

// localView is the part of the page for the provider agent this process
// runs.
type localView struct {
	Decisions []Decision
	Speeds    []speedRow
	SpeedData string // JSON [[unix s…],[tokens/s…]] for the chart
	Reach     Reachability
	Pricing   Pricing
}

type speedRow struct {
	Time   string
	Tokens int
	Took   string
	PerSec string
}

// parseAddr reads a page's {addr}: a 400 page when it is not an address.
func (s *Server) parseAddr(w http.ResponseWriter, r *http.Request) (types.Address, bool) {
	as := r.PathValue("addr")
	if !common.IsHexAddress(as) {
		s.fail(w, r, http.StatusBadRequest, "Bad address", fmt.Sprintf("%q is not an address: want 0x and 40 hex digits", as))
		return types.Address{}, false
	}
	return common.HexToAddress(as), true
}

func (s *Server) provider(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	addr, ok := s.parseAddr(w, r)
	if !ok {
		return
	}
	p, err := s.c.Provider(ctx, addr)
	if err != nil {
		var qe *node.QueryError
		if errors.As(err, &qe) {
			s.fail(w, r, http.StatusNotFound, "Provider not found", fmt.Sprintf("%s is not a registered provider (%s). See the list of providers.", addr.Hex(), qe.Log))
			return
		}
		s.failNode(w, r, "provider", err)
		return
	}
	if p.Provider == nil {
		s.fail(w, r, http.StatusNotFound, "Provider not found", addr.Hex()+" is not a registered provider. See the list of providers.")
		return
	}
	v := providerView{Addr: addr, P: p, Charts: s.charts, Unbonding: new(uint256.Int)}
	for _, u := range p.Unbonding {
		if u.Amount != nil {
			v.Unbonding.Add(v.Unbonding, u.Amount)
		}
	}
	if st, err := s.c.RPC.Status(ctx); err == nil {
		v.Height = st.SyncInfo.LatestBlockHeight
	}
	if p.Jailed || p.Tombstoned {
		v.Jail = s.jail(ctx, addr, p)
	}
	if v.Earn, err = s.earningsOf(ctx, addr, time.Now()); err != nil {
		v.EarnErr = "earnings cannot be read from the node's indexer: " + err.Error()
		v.Earn = &earnings{Total: new(uint256.Int), Day: new(uint256.Int), PerJob: map[uint64]*uint256.Int{}}
	}
	v.Count = len(v.Earn.Payments)
	for i := len(v.Earn.Payments) - 1; i >= 0 && len(v.Payments) < maxPaymentRows; i-- {
		pm := v.Earn.Payments[i]
		v.Payments = append(v.Payments, paymentRow{Height: pm.Height, Time: pm.Time.UTC().Format(timeFormat), Job: pm.Job, Stage: pm.Stage, Amount: pm.Amount, Via: pm.Via})
	}
	jobs, err := s.c.Jobs(ctx, "/provider/"+addr.Hex())
	if err != nil {
		s.failNode(w, r, "provider's jobs", err)
		return
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].ID > jobs[j].ID })
	if len(jobs) > maxProviderJobs {
		v.MoreJobs = len(jobs) - maxProviderJobs
		jobs = jobs[:maxProviderJobs]
	}
	for _, j := range jobs {
		row := taskRow{Job: j.ID, State: j.StateName, Phase: j.Phase, Paid: v.Earn.PerJob[j.ID], Partial: v.Earn.Cut, Completed: j.StateName == "completed"}
		if row.Paid == nil {
			row.Paid = new(uint256.Int)
		}
		for _, t := range j.Tasks {
			for _, sl := range t.Slots {
				if sl.Provider == addr {
					row.Stages = append(row.Stages, taskStage{Stage: t.Stage, Status: t.Status, Price: t.Price, CommitDeadline: t.CommitDeadline, RevealDeadline: t.RevealDeadline, NoShow: sl.NoShow})
				}
			}
		}
		v.Tasks = append(v.Tasks, row)
	}
	if ps := s.opt.Provider; ps != nil && ps.Address() == addr {
		v.Local = localOf(ps)
	}
	q := r.URL.Query()
	if m := q.Get("done"); m != "" {
		v.Flash = m
	} else if m := q.Get("failed"); m != "" {
		v.Flash, v.FlashErr = m, true
	}
	title := "Provider " + addr.Hex()
	if p.Moniker != "" {
		title = "Provider " + p.Moniker
	}
	s.render(w, http.StatusOK, "provider", page{Title: title, Nav: "providers", Charts: v.Charts, Data: v})
}

// localOf reads the agent's side of the page.
func localOf(ps ProviderSide) *localView {
	l := &localView{Decisions: ps.Decisions(), Reach: ps.Reachability(), Pricing: ps.Pricing()}
	var ts []int64
	var tps []float64
	for _, sp := range ps.Speeds() {
		rate := 0.0
		if sp.Took > 0 {
			rate = float64(sp.Tokens) / sp.Took.Seconds()
		}
		l.Speeds = append(l.Speeds, speedRow{Time: sp.Time.UTC().Format(timeFormat), Tokens: sp.Tokens, Took: sp.Took.Round(time.Millisecond).String(), PerSec: fmt.Sprintf("%.1f", rate)})
		ts = append(ts, sp.Time.Unix())
		tps = append(tps, rate)
	}
	bz, _ := json.Marshal([]any{ts, tps})
	l.SpeedData = string(bz)
	return l
}

// jail reads why addr was jailed: the newest provider_jailed event naming
// it (a jail happens in a transaction or in FinalizeBlock).
func (s *Server) jail(ctx context.Context, addr types.Address, p *chain.ProviderView) *jailView {
	j := &jailView{Until: p.JailedUntil, Tombstoned: p.Tombstoned}
	if params, err := s.c.Params(ctx); err == nil && params.Staking.MinProviderStake != nil {
		j.Min = params.Staking.MinProviderStake
		if p.Bonded == nil || p.Bonded.Lt(j.Min) {
			have := new(uint256.Int)
			if p.Bonded != nil {
				have = p.Bonded
			}
			j.BondFirst = new(uint256.Int).Sub(j.Min, have)
		}
	}
	q := fmt.Sprintf("%s.provider = '%s'", market.EventProviderJailed{}.EventType(), addr.Hex())
	one, pg := 1, 1
	var h int64
	if txs, err := s.c.RPC.TxSearch(ctx, q, false, &pg, &one, "desc"); err == nil && len(txs.Txs) > 0 {
		h = txs.Txs[0].Height
	}
	if bs, err := s.c.RPC.BlockSearch(ctx, q, &pg, &one, "desc"); err == nil && len(bs.Blocks) > 0 && bs.Blocks[0].Block.Height > h {
		h = bs.Blocks[0].Block.Height
	}
	if h == 0 {
		return j
	}
	b, err := s.c.BlockEventsAt(ctx, h)
	if err != nil {
		return j
	}
	for _, e := range node.EventsOf[market.EventProviderJailed](b.Events) {
		if e.Provider == addr {
			j.Height, j.Reason = h, e.Reason
		}
	}
	return j
}

// earningsJSON is /api/providers/ADDR/earnings: exact amounts as strings,
// and the cumulative series (float oGPU, for the chart only).
type earningsJSON struct {
	Total    string      `json:"total"`
	Day      string      `json:"day"`
	Payments int         `json:"payments"`
	Cut      bool        `json:"cut"`
	Series   [][]float64 `json:"series"` // [unix seconds…], [cumulative oGPU…]
	PerJob   []jobPaid   `json:"per_job"`
}

type jobPaid struct {
	Job  uint64 `json:"job"`
	Paid string `json:"paid"`
}

// json is the earnings as /api/providers/ADDR/earnings answers them; the
// series starts at 0 just before the first payment and ends at now.
func (e *earnings) json(now time.Time) earningsJSON {
	out := earningsJSON{Total: types.FormatAmount(e.Total), Day: types.FormatAmount(e.Day), Payments: len(e.Payments), Cut: e.Cut,
		Series: [][]float64{{}, {}}, PerJob: []jobPaid{}}
	cum := new(uint256.Int)
	for i, p := range e.Payments {
		if i == 0 {
			out.Series[0] = append(out.Series[0], float64(p.Time.Unix()-1))
			out.Series[1] = append(out.Series[1], 0)
		}
		cum.Add(cum, p.Amount)
		out.Series[0] = append(out.Series[0], float64(p.Time.Unix()))
		out.Series[1] = append(out.Series[1], ogpuFloat(cum))
	}
	if n := len(e.Payments); n > 0 && now.Unix() > e.Payments[n-1].Time.Unix() {
		out.Series[0] = append(out.Series[0], float64(now.Unix()))
		out.Series[1] = append(out.Series[1], ogpuFloat(cum))
	}
	ids := make([]uint64, 0, len(e.PerJob))
	for id := range e.PerJob {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] > ids[j] })
	for _, id := range ids {
		out.PerJob = append(out.PerJob, jobPaid{Job: id, Paid: types.FormatAmount(e.PerJob[id])})
	}
	return out
}

// ogpuFloat is a for-charts-only approximation of an amount in oGPU.
func ogpuFloat(a *uint256.Int) float64 {
	whole := new(uint256.Int).Div(a, types.OneOGPU)
	frac := new(uint256.Int).Mod(a, types.OneOGPU)
	return float64(whole.Uint64()) + float64(frac.Uint64())/1e18
}

func (s *Server) earningsAPI(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	as := r.PathValue("addr")
	if !common.IsHexAddress(as) {
		http.Error(w, fmt.Sprintf("%q is not an address: want 0x and 40 hex digits", as), http.StatusBadRequest)
		return
	}
	now := time.Now()
	e, err := s.earningsOf(ctx, common.HexToAddress(as), now)
	if err != nil {
		http.Error(w, "earnings cannot be read from the node's indexer: "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(e.json(now))
}

// maxActionBody bounds an action's form.
const maxActionBody = 4096

// providerAction runs an action of the provider agent this process runs:
// 404 without one; the action's own checks answer 400 (nothing is called)
// and its call's failure 502. A form navigation (no script) is sent back
// to the provider page with the message; a script gets it as text.
func (s *Server) providerAction(act func(ctx context.Context, ps ProviderSide, form url.Values) (string, int, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ps := s.opt.Provider
		if ps == nil {
			http.Error(w, "this console runs no provider agent: start it with `ogpud provider run --console`", http.StatusNotFound)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxActionBody)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "cannot read the form: "+err.Error(), http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		msg, code, err := act(ctx, ps, r.PostForm)
		if err != nil {
			msg = err.Error()
		}
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			key := "done"
			if code != http.StatusOK {
				key = "failed"
			}
			http.Redirect(w, r, "/providers/"+ps.Address().Hex()+"?"+key+"="+url.QueryEscape(msg), http.StatusSeeOther)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		fmt.Fprintln(w, msg)
	}
}

// formAmount reads an amount field, which must carry its unit: a bare
// number would be base units (10^-18 oGPU), a costly slip in a price.
func formAmount(form url.Values, field string, positive bool) (*uint256.Int, error) {
	v := strings.TrimSpace(form.Get(field))
	if v == "" {
		return nil, fmt.Errorf("%s is missing: write an amount such as 10ogpu", field)
	}
	if !strings.HasSuffix(strings.ToLower(v), "ogpu") {
		return nil, fmt.Errorf("%s %q: write the unit, e.g. %sogpu (a bare number would be base units, 10^-18 oGPU)", field, v, v)
	}
	a, err := types.ParseAmount(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	if positive && a.IsZero() {
		return nil, fmt.Errorf("%s must be more than 0ogpu", field)
	}
	if a.Gt(types.MaxSupply) {
		return nil, fmt.Errorf("%s %s is more than the whole supply (%s)", field, types.FormatAmount(a), types.FormatAmount(types.MaxSupply))
	}
	return a, nil
}

func (s *Server) setPricing(ctx context.Context, ps ProviderSide, form url.Values) (string, int, error) {
	if cur := ps.Pricing(); cur.Script != "" {
		return "", http.StatusConflict, fmt.Errorf("this agent prices with the script %s: change the script, or restart the agent without it to set a price here", cur.Script)
	}
	base, err := formAmount(form, "base", false)
	if err != nil {
		return "", http.StatusBadRequest, err
	}
	per, err := formAmount(form, "per_token", true) // the agent prices every token
	if err != nil {
		return "", http.StatusBadRequest, err
	}
	if err := ps.SetPricing(ctx, Pricing{Base: base, PerToken: per}); err != nil {
		return "", http.StatusBadGateway, fmt.Errorf("the agent refused the price: %w", err)
	}
	return fmt.Sprintf("pricing set: %s per job + %s per token", types.FormatAmount(base), types.FormatAmount(per)), http.StatusOK, nil
}

func (s *Server) bond(ctx context.Context, ps ProviderSide, form url.Values) (string, int, error) {
	a, err := formAmount(form, "amount", true)
	if err != nil {
		return "", http.StatusBadRequest, err
	}
	if err := ps.Bond(ctx, a); err != nil {
		return "", http.StatusBadGateway, fmt.Errorf("bond %s failed: %w", types.FormatAmount(a), err)
	}
	return "bonded " + types.FormatAmount(a), http.StatusOK, nil
}

func (s *Server) unbond(ctx context.Context, ps ProviderSide, form url.Values) (string, int, error) {
	a, err := formAmount(form, "amount", true)
	if err != nil {
		return "", http.StatusBadRequest, err
	}
	if err := ps.Unbond(ctx, a); err != nil {
		return "", http.StatusBadGateway, fmt.Errorf("unbond %s failed: %w", types.FormatAmount(a), err)
	}
	return "unbonding " + types.FormatAmount(a) + ": it is paid out when the unbonding period ends", http.StatusOK, nil
}
