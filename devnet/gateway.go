package devnet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/gateway"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// GatewayReport is round 9: alice's OpenAI-compatible gateway in session
// mode.
type GatewayReport struct {
	// Session is the session the answers came over; Answers their texts
	// (the first two verified by both lanes).
	Session uint64
	Answers []string
	// Txs is alice's transactions between the first and the second
	// answer (none: vouchers go off chain).
	Txs int
	// Liar is prov3, which lied in the third answer; Dispute how the
	// chain decided the gateway's dispute of it.
	Liar    types.Address
	Dispute *session.Dispute
}

// gatewayRound serves alice's OpenAI-compatible gateway on loopback in
// session mode: the gateway buys a session by auction (prov1 and prov3,
// two lanes), answers two chat completions over it with vouchers and no
// transaction, then prov3 restarts as a liar: the lanes of the third
// answer differ, the gateway disputes both receipts, the validator agent
// fetches the evidence from the gateway, re-generates, and the chain
// slashes prov3.
func (d *devnet) gatewayRound(report *Report) error {
	d.beginRound("the OpenAI-compatible gateway over a session lease; prov3 lies in it")
	w := d.w
	dir := filepath.Join(d.home, "gateway")
	cfg := gateway.Config{Listen: "127.0.0.1:0", KeyFile: filepath.Join(dir, "gateway.key"), LedgerFile: filepath.Join(dir, "ledger.json"),
		Models:        []gateway.ModelConfig{{Name: "stories260K", Model: fmt.Sprintf("sha256:%x", d.model[:]), File: d.modelPath}},
		ContextLength: uint64(d.llm.ContextSize), Logger: d.logger("gateway")}
	maxPrice := new(uint256.Int).Div(types.OGPU(6), uint256.NewInt(100)) // 0.06 oGPU per output token
	sb, err := gateway.NewSessionBackend(d.client, gateway.SessionConfig{Redundancy: 2, Budget: types.OGPU(20), MaxPrice: maxPrice, Blocks: 300, Grace: 10,
		Req: market.Requirements{MinStake: types.OGPU(100)}, Windows: market.Windows{Bid: 4, Reveal: 3}, LedgerDir: filepath.Join(dir, "sessions"),
		Logger: d.logger("gateway")}, nil)
	if err != nil {
		return err
	}
	disputes := make(chan *agent.Completion, 1)
	sb.OnMismatch = func(c *agent.Completion) { disputes <- c }
	sent := make(chan error, 1)
	var sentAt [2]uint64
	sb.OnDispute = func(s, n uint64, err error) { sentAt = [2]uint64{s, n}; sent <- err }
	srv, err := gateway.New(cfg, d.c, d.client.Store, sb)
	if err != nil {
		sb.Close()
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(d.ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln, 5*time.Second) }()
	defer func() { cancel(); <-served }()
	url := "http://" + ln.Addr().String() + "/v1/chat/completions"
	fmt.Fprintf(w, "alice: ogpu gateway --mode session --session-budget 20ogpu --session-max-price 0.06ogpu  (serving %s, key in %s)\n", "http://"+ln.Addr().String()+"/v1", cfg.KeyFile)

	type ogpuInfo struct {
		Mode      string   `json:"mode"`
		Session   string   `json:"session"`
		Providers []string `json:"providers"`
		Charged   string   `json:"charged"`
		Verified  bool     `json:"verified"`
		Outcome   string   `json:"outcome"`
	}
	ask := func(content string) (string, *ogpuInfo, error) {
		body, _ := json.Marshal(map[string]any{"model": "stories260K", "max_tokens": 24,
			"messages": []map[string]string{{"role": "user", "content": content}}})
		fmt.Fprintf(w, "alice: curl %s -d '%s'\n", url, body)
		req, _ := http.NewRequestWithContext(d.ctx, "POST", url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+srv.Key())
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", nil, err
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var a struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Ogpu *ogpuInfo `json:"ogpu"`
		}
		if res.StatusCode != 200 || json.Unmarshal(raw, &a) != nil || len(a.Choices) == 0 || a.Ogpu == nil {
			return "", nil, fmt.Errorf("gateway answered %d: %s", res.StatusCode, raw)
		}
		o := a.Ogpu
		charged, _ := uint256.FromDecimal(o.Charged)
		var provs []string
		for _, p := range o.Providers {
			if a, err := types.ParseAddress(p); err == nil {
				p = d.name(a)
			}
			provs = append(provs, p)
		}
		fmt.Fprintf(w, "-> %q\n-> ogpu: mode %s, session %s, providers %v, charged %s, verified %v (%s)\n", a.Choices[0].Message.Content,
			o.Mode, o.Session, provs, types.FormatAmount(charged), o.Verified, o.Outcome)
		return a.Choices[0].Message.Content, o, nil
	}
	rep := &GatewayReport{}
	report.Gateway = rep
	first, o, err := ask("Tell me a story about a cat.")
	if err != nil {
		return err
	}
	if o.Mode != "session" || !o.Verified {
		return fmt.Errorf("the first answer came in mode %s, verified %v", o.Mode, o.Verified)
	}
	st, err := d.c.RPC.Status(d.ctx)
	if err != nil {
		return err
	}
	h1 := st.SyncInfo.LatestBlockHeight
	second, o2, err := ask("Tell me a story about a dog.")
	if err != nil {
		return err
	}
	if o2.Session != o.Session || !o2.Verified {
		return fmt.Errorf("the second answer: session %s (first %s), verified %v", o2.Session, o.Session, o2.Verified)
	}
	if rep.Txs, err = d.txsOf(d.accts[0].addr, h1); err != nil {
		return err
	}
	rep.Answers = []string{first, second}
	fmt.Fprintf(w, "alice sent %d transactions for the second answer: it was paid by vouchers off chain\n", rep.Txs)

	liar := d.provs[2]
	fmt.Fprintf(w, "\nprov3 restarts with the devnet-only --devnet-lie flag, keeping its session lane\n")
	d.stopProvider(liar)
	if err := d.startProvider(liar, func(c *agent.ProviderConfig) { c.Lie = true }); err != nil {
		return err
	}
	rep.Liar = liar.acct.addr
	third, o3, err := ask("Tell me a story about a bird.")
	if err != nil {
		return err
	}
	rep.Answers = append(rep.Answers, third)
	if o3.Verified || o3.Outcome != "mismatch" {
		return fmt.Errorf("the third answer: verified %v, outcome %s; want the liar's lane caught (mismatch)", o3.Verified, o3.Outcome)
	}
	select {
	case <-disputes:
	case <-d.ctx.Done():
		return d.ctx.Err()
	}
	if err := <-sent; err != nil {
		return err
	}
	fmt.Fprintf(w, "the gateway disputed the two receipts: session %d dispute %d; the validator agent fetches the prompt and outputs from the gateway\n", sentAt[0], sentAt[1])
	for {
		dv, err := d.c.SessionDispute(d.ctx, sentAt[0], sentAt[1])
		if err != nil {
			return err
		}
		if dv.Status != session.DisputeOpen {
			rep.Session, rep.Dispute = sentAt[0], dv.Dispute
			fmt.Fprintf(w, "-> dispute %s (verdict %b): %s slashed, alice compensated %s\n", dv.Status, dv.Verdict,
				types.FormatAmount(dv.Slashed), types.FormatAmount(dv.Compensated))
			break
		}
		if err := d.c.WaitHeight(d.ctx, int64(dv.Height)+1); err != nil {
			return err
		}
	}
	pv, err := d.c.Provider(d.ctx, liar.acct.addr)
	if err != nil {
		return err
	}
	if !pv.Tombstoned {
		return errors.New("the lying session provider was not slashed")
	}
	fmt.Fprintf(w, "prov3 is tombstoned: bonded %s\n", types.FormatAmount(pv.Bonded))
	return d.printBalances(fmt.Sprintf("after round %d", d.round))
}

// txsOf counts addr's transactions in the blocks after height from.
func (d *devnet) txsOf(addr types.Address, from int64) (int, error) {
	top, err := d.c.CommittedHeight(d.ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for h := from + 1; h <= top; h++ {
		r, err := d.c.RPC.BlockResults(d.ctx, &h)
		if err != nil {
			return 0, err
		}
		for _, tr := range r.TxResults {
			for _, ev := range tr.Events {
				if ev.Type != chain.EventTypeTx {
					continue
				}
				if e, err := chain.ParseEventTx(ev); err == nil && e.From == addr {
					n++
				}
			}
		}
	}
	return n, nil
}
