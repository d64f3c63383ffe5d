package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// perPage is the blocks per page of the home page.
const perPage = 20

// queryTimeout bounds the node reads behind one page.
const queryTimeout = 10 * time.Second

var funcs = template.FuncMap{
	"amount": func(a *uint256.Int) string {
		return types.FormatAmount(a)
	},
	"hex":  func(b []byte) string { return hex.EncodeToString(b) },
	"time": func(t time.Time) string { return t.UTC().Format(timeFormat) },
	"add":  func(a, b int64) int64 { return a + b },
	"sub":  func(a uint64, b int64) int64 { return int64(a) - b },
}

// parsePages parses web/layout.tmpl with each web/pages/*.tmpl.
func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("layout.tmpl").Funcs(funcs).ParseFS(webFS, "web/layout.tmpl")
	if err != nil {
		return nil, fmt.Errorf("console: layout: %w", err)
	}
	names, err := fs.Glob(webFS, "web/pages/*.tmpl")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		t, err := template.Must(base.Clone()).ParseFS(webFS, n)
		if err != nil {
			return nil, fmt.Errorf("console: %s: %w", n, err)
		}
		pages[strings.TrimSuffix(n[len("web/pages/"):], ".tmpl")] = t
	}
	return pages, nil
}

// page is what the layout gets.
type page struct {
	Title string
	Nav   string
	Query string
	// Charts loads the chart library (only where a page draws one and the
	// binary embeds it).
	Charts bool
	Data   any
	// Client is the account whose key the console holds ("": none).
	Client string
}

func (s *Server) render(w http.ResponseWriter, status int, name string, p page) {
	if own, ok := s.ownAddress(); ok {
		p.Client = own.Hex()
	}
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout.tmpl", p); err != nil {
		http.Error(w, "cannot render the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

type failView struct{ Message string }

// fail renders the error page.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	s.render(w, status, "error", page{Title: title, Query: r.URL.Query().Get("q"), Data: failView{msg}})
}

// failNode turns a node error into a page: a query the app refused is the
// caller's 404, anything else the node's 502.
func (s *Server) failNode(w http.ResponseWriter, r *http.Request, what string, err error) {
	var qe *node.QueryError
	if errors.As(err, &qe) {
		s.fail(w, r, http.StatusNotFound, what+" not found", qe.Log)
		return
	}
	s.fail(w, r, http.StatusBadGateway, "Node unavailable", s.c.Unreachable(err).Error())
}

func (s *Server) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), queryTimeout)
}

type blockRow struct {
	Height int64
	Time   time.Time
	Txs    int
	Hash   string
}

type homeView struct {
	Latest  int64
	Blocks  []blockRow
	Page    uint64
	Pages   uint64
	Prev    uint64
	Next    uint64
	ChainID string
}

// home lists the latest blocks, perPage at a time (?page=N, 1 is newest).
func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	pg := uint64(1)
	if q := r.URL.Query().Get("page"); q != "" {
		n, err := strconv.ParseUint(q, 10, 64)
		if err != nil || n == 0 {
			s.fail(w, r, http.StatusBadRequest, "Bad page number", fmt.Sprintf("page %q: want a page number from 1", q))
			return
		}
		pg = n
	}
	st, err := s.c.RPC.Status(ctx)
	if err != nil {
		s.failNode(w, r, "status", err)
		return
	}
	latest, earliest := st.SyncInfo.LatestBlockHeight, st.SyncInfo.EarliestBlockHeight
	count := uint64(latest - earliest + 1)
	pages := max(1, (count+perPage-1)/perPage)
	if pg > pages {
		s.fail(w, r, http.StatusNotFound, "No such page", fmt.Sprintf("page %d is past the last page of blocks (%d)", pg, pages))
		return
	}
	hi := latest - int64((pg-1)*perPage)
	lo := max(earliest, hi-perPage+1)
	v := homeView{Latest: latest, Page: pg, Pages: pages, ChainID: st.NodeInfo.Network}
	if pg > 1 {
		v.Prev = pg - 1
	}
	if pg < pages {
		v.Next = pg + 1
	}
	if hi >= 1 {
		info, err := s.c.RPC.BlockchainInfo(ctx, lo, hi)
		if err != nil {
			s.failNode(w, r, "blocks", err)
			return
		}
		for _, m := range info.BlockMetas {
			v.Blocks = append(v.Blocks, blockRow{Height: m.Header.Height, Time: m.Header.Time, Txs: m.NumTxs, Hash: m.BlockID.Hash.String()})
		}
	}
	s.render(w, http.StatusOK, "home", page{Title: "Blocks", Nav: "blocks", Data: v})
}

type msgView struct {
	Type string
	Body string
}

type txView struct {
	Hash   string
	Height int64
	Time   time.Time
	From   string
	Nonce  uint64
	Fee    *uint256.Int
	Memo   string
	Msgs   []msgView
	Code   uint32
	Log    string
	Events []eventView
	Error  string
}

type eventView struct {
	Type  string
	Attrs string
}

type blockView struct {
	Height   int64
	Time     time.Time
	Hash     string
	Proposer string
	Txs      []txView
	Events   []eventView
}

// decodeTx decodes a transaction for display; a tx that does not decode is
// shown as such.
func decodeTx(bz []byte) txView {
	v := txView{Hash: strings.ToUpper(hex.EncodeToString(types.TxHash(bz)))}
	tx, err := types.DecodeTx(bz)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.From, v.Nonce, v.Fee, v.Memo = tx.Body.From.Hex(), tx.Body.Nonce, tx.Body.Fee, tx.Body.Memo
	for _, m := range tx.Body.Msgs {
		v.Msgs = append(v.Msgs, msgView{Type: MsgName(m.Type), Body: decodeMsg(m)})
	}
	return v
}

func eventsOf(evs []abciEvent) []eventView {
	var out []eventView
	for _, e := range evs {
		var parts []string
		for _, a := range e.Attributes {
			parts = append(parts, a.Key+"="+a.Value)
		}
		out = append(out, eventView{Type: e.Type, Attrs: strings.Join(parts, " · ")})
	}
	return out
}

func (s *Server) block(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	hs := r.PathValue("height")
	h, err := strconv.ParseInt(hs, 10, 64)
	if err != nil || h < 1 {
		s.fail(w, r, http.StatusBadRequest, "Bad block height", fmt.Sprintf("block %q: want a height, a number from 1", hs))
		return
	}
	st, err := s.c.RPC.Status(ctx)
	if err != nil {
		s.failNode(w, r, "status", err)
		return
	}
	if h > st.SyncInfo.LatestBlockHeight || h < st.SyncInfo.EarliestBlockHeight {
		s.fail(w, r, http.StatusNotFound, "Block not found", fmt.Sprintf("block %d is not on this node: it has blocks %d to %d", h, st.SyncInfo.EarliestBlockHeight, st.SyncInfo.LatestBlockHeight))
		return
	}
	if top, err := s.c.CommittedHeight(ctx); err == nil && h > top {
		s.fail(w, r, http.StatusNotFound, "Block still executing", fmt.Sprintf("block %d is being executed; its results are stored in about a second: reload", h))
		return
	}
	b, err := s.c.RPC.Block(ctx, &h)
	if err != nil {
		s.failNode(w, r, "block", err)
		return
	}
	res, err := s.c.RPC.BlockResults(ctx, &h)
	if err != nil {
		s.failNode(w, r, "block results", err)
		return
	}
	v := blockView{Height: h, Time: b.Block.Time, Hash: b.BlockID.Hash.String(), Proposer: b.Block.ProposerAddress.String(), Events: eventsOf(res.FinalizeBlockEvents)}
	for i, bz := range b.Block.Txs {
		if chain.IsInjected(bz) {
			continue // the validators' vote extensions, not a transaction
		}
		tv := decodeTx(bz)
		if i < len(res.TxResults) {
			tv.Code, tv.Log = res.TxResults[i].Code, res.TxResults[i].Log
		}
		v.Txs = append(v.Txs, tv)
	}
	s.render(w, http.StatusOK, "block", page{Title: fmt.Sprintf("Block %d", h), Nav: "blocks", Data: v})
}

var hashRE = regexp.MustCompile(`^(0[xX])?[0-9a-fA-F]{64}$`)

func (s *Server) tx(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	hs := r.PathValue("hash")
	if !hashRE.MatchString(hs) {
		s.fail(w, r, http.StatusBadRequest, "Bad transaction hash", fmt.Sprintf("%q is not a transaction hash: want 64 hex digits", hs))
		return
	}
	hash, _ := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(hs, "0x"), "0X"))
	res, err := s.c.RPC.Tx(ctx, hash, false)
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			s.fail(w, r, http.StatusNotFound, "Transaction not found", fmt.Sprintf("no transaction %X on this node (it may still be pending, or the node does not index transactions)", hash))
			return
		}
		s.failNode(w, r, "transaction", err)
		return
	}
	v := decodeTx(res.Tx)
	v.Height, v.Code, v.Log = res.Height, res.TxResult.Code, res.TxResult.Log
	v.Events = eventsOf(res.TxResult.Events)
	if hdr, err := s.c.RPC.Header(ctx, &res.Height); err == nil && hdr.Header != nil {
		v.Time = hdr.Header.Time
	}
	s.render(w, http.StatusOK, "tx", page{Title: "Transaction " + v.Hash[:12] + "…", Nav: "blocks", Data: v})
}

type accountView struct {
	Account  *chain.AccountView
	Stake    *chain.StakeView
	Provider *chain.ProviderView
	Client   *clientView
}

func (s *Server) account(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	as := r.PathValue("addr")
	if !common.IsHexAddress(as) {
		s.fail(w, r, http.StatusBadRequest, "Bad address", fmt.Sprintf("%q is not an address: want 0x and 40 hex digits", as))
		return
	}
	addr := common.HexToAddress(as)
	var v accountView
	var err error
	if v.Account, err = s.c.Account(ctx, addr); err != nil {
		s.failNode(w, r, "account", err)
		return
	}
	if v.Stake, err = s.c.Stake(ctx, addr); err != nil {
		s.failNode(w, r, "stake", err)
		return
	}
	if p, err := s.c.Provider(ctx, addr); err == nil && p.Provider != nil {
		v.Provider = p
	}
	v.Client = s.clientOf(ctx, addr, r.URL.Query().Get("msg"))
	nav := ""
	if v.Client.Own {
		nav = "client"
	}
	s.render(w, http.StatusOK, "account", page{Title: "Account " + addr.Hex(), Nav: nav, Data: v})
}

func (s *Server) validators(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	vs, err := s.c.Validators(ctx)
	if err != nil {
		s.failNode(w, r, "validators", err)
		return
	}
	var total uint64
	for _, v := range vs {
		total += v.Power
	}
	s.render(w, http.StatusOK, "validators", page{Title: "Validators", Nav: "validators", Data: struct {
		Validators []chain.ValidatorView
		Total      uint64
	}{vs, total}})
}

func (s *Server) params(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	p, err := s.c.Params(ctx)
	if err != nil {
		s.failNode(w, r, "params", err)
		return
	}
	bz, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "Params", err.Error())
		return
	}
	s.render(w, http.StatusOK, "params", page{Title: "Parameters", Nav: "params", Data: string(bz)})
}

type supplyTerm struct {
	Name, Note string
	Amount     *uint256.Int
}

func (s *Server) supply(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	sv, err := s.c.Supply(ctx)
	if err != nil {
		s.failNode(w, r, "supply", err)
		return
	}
	terms := []supplyTerm{
		{"Circulating", "held in accounts", sv.Circulating},
		{"Bonded", "stake of validators and providers", sv.Bonded},
		{"Unbonding", "stake on its way out", sv.Unbonding},
		{"Locked", "job escrow", sv.Locked},
		{"Fee pool", "fees not yet paid out", sv.FeePool},
		{"Bridge reserve", "backing bridged tokens", sv.BridgeReserve},
		{"Bridge outbound", "withdrawn, not yet paid on Ethereum", sv.BridgeOutbound},
		{"Burned", "destroyed", sv.Burned},
	}
	total := sv.Total()
	s.render(w, http.StatusOK, "supply", page{Title: "Supply", Nav: "supply", Data: struct {
		Terms      []supplyTerm
		Total, Max *uint256.Int
		Holds      bool
	}{terms, total, sv.MaxSupply, sv.MaxSupply != nil && total.Eq(sv.MaxSupply)}})
}

// search sends a job id, tx hash or address to its page.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	switch {
	case q == "":
		http.Redirect(w, r, "/", http.StatusSeeOther)
	case common.IsHexAddress(q) && strings.HasPrefix(strings.ToLower(q), "0x"):
		http.Redirect(w, r, "/accounts/"+common.HexToAddress(q).Hex(), http.StatusSeeOther)
	case hashRE.MatchString(q):
		http.Redirect(w, r, "/tx/"+strings.TrimPrefix(strings.TrimPrefix(q, "0x"), "0X"), http.StatusSeeOther)
	default:
		if n, err := strconv.ParseUint(q, 10, 64); err == nil && n > 0 {
			http.Redirect(w, r, "/jobs/"+strconv.FormatUint(n, 10), http.StatusSeeOther)
			return
		}
		s.fail(w, r, http.StatusBadRequest, "Nothing to search for", fmt.Sprintf("%q is not a job id (a number), a transaction hash (64 hex digits) or an address (0x and 40 hex digits)", q))
	}
}

type jobView struct {
	Job      *chain.JobView
	Steps    []stepView
	Timeline []timelineEntry
	TLError  string
	// Own: the console holds the job's client key (cancel; live text).
	Own       bool
	Output    string
	Running   bool
	WhyNoBids *chain.WhyNoBidsView
	Flash     string
}

func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	is := r.PathValue("id")
	id, err := strconv.ParseUint(is, 10, 64)
	if err != nil || id == 0 {
		s.fail(w, r, http.StatusBadRequest, "Bad job id", fmt.Sprintf("job %q: want a job id, a number from 1", is))
		return
	}
	j, err := s.c.Job(ctx, id)
	if err != nil {
		s.failNode(w, r, fmt.Sprintf("Job %d", id), err)
		return
	}
	v := jobView{Job: j}
	if v.Timeline, err = s.timeline(ctx, id); err != nil {
		v.TLError = "the timeline cannot be read from the node's indexer: " + err.Error()
	}
	v.Steps = stepper(v.Timeline)
	v.Flash = r.URL.Query().Get("msg")
	if own, ok := s.ownAddress(); ok && own == j.Client {
		v.Own = true
		if ts, ok := s.opt.Client.(textSource); ok {
			var done bool
			v.Output, done, v.Running = ts.Output(id)
			v.Running = v.Running && !done
		}
	}
	v.WhyNoBids = s.whyNoBids(ctx, j)
	s.render(w, http.StatusOK, "job", page{Title: fmt.Sprintf("Job %d", id), Nav: "jobs", Data: v})
}

// jobState is /api/jobs/ID: what the job page refreshes on the job's events.
type jobState struct {
	State  string `json:"state"`
	Phase  string `json:"phase"`
	Locked string `json:"locked"`
}

func (s *Server) jobAPI(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	is := r.PathValue("id")
	id, err := strconv.ParseUint(is, 10, 64)
	if err != nil || id == 0 {
		http.Error(w, fmt.Sprintf("job %q: want a job id, a number from 1", is), http.StatusBadRequest)
		return
	}
	j, err := s.c.Job(ctx, id)
	if err != nil {
		var qe *node.QueryError
		if errors.As(err, &qe) {
			http.Error(w, qe.Log, http.StatusNotFound)
			return
		}
		http.Error(w, s.c.Unreachable(err).Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(jobState{State: j.StateName, Phase: j.Phase, Locked: types.FormatAmount(j.Locked)})
}
