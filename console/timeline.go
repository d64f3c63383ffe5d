package console

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// timeFormat is how times are shown.
const timeFormat = "2006-01-02 15:04:05 UTC"

// maxTimelineBlocks bounds the blocks one job page reads.
const maxTimelineBlocks = 200

// jobEventSteps maps the market's job events to the timeline's steps.
var jobEventSteps = map[string]string{
	"job_posted":       "posted",
	"bid_committed":    "bids",
	"bid_revealed":     "bids",
	"bid_forfeited":    "bids",
	"job_revealing":    "bids",
	"bids_revealed":    "bids",
	"task_filled":      "award",
	"job_awarded":      "award",
	"stage_opened":     "award",
	"result_committed": "results",
	"result_revealed":  "results",
	"no_show":          "results",
	"slot_reassigned":  "results",
	"dispute_opened":   "results",
	"task_settled":     "results",
	"job_completed":    "settled",
	"job_cancelled":    "settled",
	"job_expired":      "settled",
}

// jobEventTypes is jobEventSteps' keys in a fixed order (the indexer is
// asked about each).
var jobEventTypes = func() []string {
	var ts []string
	for t := range jobEventSteps {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}()

// amountKeys are the event attributes that are amounts (shown in oGPU).
var amountKeys = map[string]bool{
	"max_price": true, "locked": true, "price": true, "deposit": true, "refund": true, "paid": true,
	"refunded": true, "compensated": true, "validator_fee": true, "amount": true, "slashed": true,
}

// Steps are the timeline's steps in order.
var Steps = []string{"posted", "bids", "award", "results", "settled"}

// timelineEntry is one event of a job.
type timelineEntry struct {
	Height int64  `json:"height"`
	Time   string `json:"time"`
	Type   string `json:"type"`
	Step   string `json:"step"`
	Detail string `json:"detail"`
}

// entryOf returns ev as an entry of job's timeline, if it is one.
func entryOf(job uint64, h int64, t time.Time, ev abci.Event) (timelineEntry, bool) {
	step, ok := jobEventSteps[ev.Type]
	if !ok {
		return timelineEntry{}, false
	}
	v, ok := attr(ev, "job")
	if !ok || v != strconv.FormatUint(job, 10) {
		return timelineEntry{}, false
	}
	var d string
	for _, a := range ev.Attributes {
		if a.Key == "job" {
			continue
		}
		if d != "" {
			d += " · "
		}
		v := a.Value
		if amountKeys[a.Key] {
			if n, err := uint256.FromDecimal(v); err == nil {
				v = types.FormatAmount(n)
			}
		}
		d += a.Key + "=" + v
	}
	return timelineEntry{Height: h, Time: t.UTC().Format(timeFormat), Type: ev.Type, Step: step, Detail: d}, true
}

// timeline reads job's events from CometBFT's indexer: the heights of the
// transactions (tx_search) and blocks (block_search, for FinalizeBlock's
// own events such as job_awarded at a close) that carry an indexed
// TYPE.job=ID attribute, then the events of those blocks, in order.
func (s *Server) timeline(ctx context.Context, job uint64) ([]timelineEntry, error) {
	heights := map[int64]bool{}
	perPage := 100
	for _, typ := range jobEventTypes {
		q := fmt.Sprintf("%s.job = %d", typ, job)
		page := 1
		txs, err := s.c.RPC.TxSearch(ctx, q, false, &page, &perPage, "asc")
		if err != nil {
			return nil, fmt.Errorf("tx_search %q: %w", q, err)
		}
		for _, tx := range txs.Txs {
			heights[tx.Height] = true
		}
		blocks, err := s.c.RPC.BlockSearch(ctx, q, &page, &perPage, "asc")
		if err != nil {
			return nil, fmt.Errorf("block_search %q: %w", q, err)
		}
		for _, b := range blocks.Blocks {
			heights[b.Block.Height] = true
		}
	}
	hs := make([]int64, 0, len(heights))
	for h := range heights {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
	if len(hs) > maxTimelineBlocks {
		hs = hs[:maxTimelineBlocks]
	}
	var out []timelineEntry
	for _, h := range hs {
		b, err := s.c.BlockEventsAt(ctx, h)
		if err != nil {
			return nil, err
		}
		for _, ev := range b.Events {
			if e, ok := entryOf(job, b.Height, b.Time, ev); ok {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// stepView is one step of the stepper.
type stepView struct {
	Name   string
	Done   bool
	Height int64
	Time   string
}

// stepper marks the steps the entries reached (the first height of each).
func stepper(entries []timelineEntry) []stepView {
	out := make([]stepView, len(Steps))
	for i, n := range Steps {
		out[i].Name = n
	}
	for _, e := range entries {
		for i := range out {
			if out[i].Name == e.Step && !out[i].Done {
				out[i].Done, out[i].Height, out[i].Time = true, e.Height, e.Time
			}
		}
	}
	return out
}
