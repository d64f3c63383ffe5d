package console

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// Bounds on what one earnings read asks of the node's indexer.
const (
	// earnPerPage is CometBFT's largest page.
	earnPerPage = 100
	// earnMaxPages bounds the pages read per query (tx_search and
	// block_search of provider_paid and of session_redeemed).
	earnMaxPages = 3
	// blockCacheSize bounds the payments cached per block (a committed
	// block never changes, so a live page reads only the new ones).
	blockCacheSize = 4096
)

// earnMaxBlocks bounds the blocks whose events are read: the newest ones
// are kept and the page says "showing the latest N payments". A variable
// only so that a test can lower it.
var earnMaxBlocks = 300

// payment is one payment to a provider: a provider_paid event, or a
// session voucher redemption (session_redeemed, which market does not
// repeat as provider_paid).
type payment struct {
	Height   int64
	Time     time.Time
	Provider types.Address
	Job      uint64
	Stage    uint16
	Amount   *uint256.Int
	Via      string
}

// earnings is what a provider was paid, as far as the indexer tells.
type earnings struct {
	// Payments, oldest first.
	Payments []payment
	Total    *uint256.Int
	Day      *uint256.Int
	PerJob   map[uint64]*uint256.Int
	// Cut: the provider has more payments than one read takes; the figures
	// are those of the latest len(Payments).
	Cut bool
}

// blockPayments caches the payments of committed blocks, by height.
type blockPayments struct {
	mu sync.Mutex
	m  map[int64][]payment
}

func (c *blockPayments) get(h int64) ([]payment, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[h]
	return p, ok
}

func (c *blockPayments) put(h int64, p []payment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= blockCacheSize {
		c.m = map[int64][]payment{}
	}
	c.m[h] = p
}

// paymentsOf extracts every payment of a block's events.
func paymentsOf(b node.BlockEvents) []payment {
	var out []payment
	for _, ev := range b.Events {
		switch ev.Type {
		case market.EventProviderPaid{}.EventType():
			var e market.EventProviderPaid
			if types.DecodeEvent(ev, &e) == nil {
				out = append(out, payment{Height: b.Height, Time: b.Time, Provider: e.Provider, Job: e.Job, Stage: e.Stage, Amount: e.Amount, Via: e.Via})
			}
		case session.EventRedeemed{}.EventType():
			var e session.EventRedeemed
			if types.DecodeEvent(ev, &e) == nil {
				out = append(out, payment{Height: b.Height, Time: b.Time, Provider: e.Provider, Job: e.Session, Amount: e.Paid, Via: "session"})
			}
		}
	}
	return out
}

// earningsOf reads addr's payments from CometBFT's indexer: the heights
// of the transactions (tx_search) and blocks (block_search: most payments
// happen in FinalizeBlock, at a deadline) with an indexed
// provider_paid.provider or session_redeemed.provider equal to addr, the
// newest first and bounded, then those blocks' events.
func (s *Server) earningsOf(ctx context.Context, addr types.Address, now time.Time) (*earnings, error) {
	heights := map[int64]bool{}
	cut := false
	for _, typ := range []string{market.EventProviderPaid{}.EventType(), session.EventRedeemed{}.EventType()} {
		q := fmt.Sprintf("%s.provider = '%s'", typ, addr.Hex())
		perPage := earnPerPage
		for page := 1; page <= earnMaxPages; page++ {
			pg := page
			txs, err := s.c.RPC.TxSearch(ctx, q, false, &pg, &perPage, "desc")
			if err != nil {
				return nil, fmt.Errorf("tx_search %q: %w", q, err)
			}
			for _, tx := range txs.Txs {
				heights[tx.Height] = true
			}
			if page*perPage >= txs.TotalCount {
				break
			}
			if page == earnMaxPages {
				cut = true
			}
		}
		for page := 1; page <= earnMaxPages; page++ {
			pg := page
			blocks, err := s.c.RPC.BlockSearch(ctx, q, &pg, &perPage, "desc")
			if err != nil {
				return nil, fmt.Errorf("block_search %q: %w", q, err)
			}
			for _, b := range blocks.Blocks {
				heights[b.Block.Height] = true
			}
			if page*perPage >= blocks.TotalCount {
				break
			}
			if page == earnMaxPages {
				cut = true
			}
		}
	}
	hs := make([]int64, 0, len(heights))
	for h := range heights {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
	if len(hs) > earnMaxBlocks {
		hs, cut = hs[len(hs)-earnMaxBlocks:], true
	}
	e := &earnings{Total: new(uint256.Int), Day: new(uint256.Int), PerJob: map[uint64]*uint256.Int{}, Cut: cut}
	dayAgo := now.Add(-24 * time.Hour)
	for _, h := range hs {
		ps, ok := s.paid.get(h)
		if !ok {
			b, err := s.c.BlockEventsAt(ctx, h)
			if err != nil {
				return nil, err
			}
			ps = paymentsOf(b)
			s.paid.put(h, ps)
		}
		for _, p := range ps {
			if p.Provider != addr {
				continue
			}
			e.Payments = append(e.Payments, p)
			e.Total.Add(e.Total, p.Amount)
			if !p.Time.Before(dayAgo) {
				e.Day.Add(e.Day, p.Amount)
			}
			if e.PerJob[p.Job] == nil {
				e.PerJob[p.Job] = new(uint256.Int)
			}
			e.PerJob[p.Job].Add(e.PerJob[p.Job], p.Amount)
		}
	}
	return e, nil
}
