package chain

import (
	"strings"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// QuerySession is the session path: + id, answered with a SessionView.
const QuerySession = "/session/"

// SessionView is the answer to /session/ID: the session's record (its
// client, per-token prices, lanes with budget and paid, expiry and grace)
// and, at the height of the answer, where it is. An agent reads lanes,
// prices and expiry from it; Height saves it a second query for the
// chain's height.
type SessionView struct {
	*session.Session
	// Due is the height whose end-block refunds what no voucher claimed;
	// redemptions are accepted below it.
	Due uint64 `json:"due"`
	// Height is the committed height the answer is from.
	Height uint64 `json:"height"`
	// Phase is "open" (requests may be served: Height ≤ Expiry and not
	// closed), "grace" (redemptions only), or "settled".
	Phase string `json:"phase"`
	// Disputes are the session's disputes, oldest first, each with its
	// signed requests and receipts (a validator agent reads everything it
	// judges from here).
	Disputes []DisputeView `json:"disputes"`
}

// QuerySessionDispute is /session/ID/dispute/N, answered with a
// DisputeView.
const QuerySessionDispute = "/dispute/"

// DisputeView is one dispute of a session: its record and, at the height
// of the answer, the votes so far. Sealed lists the voters that sealed a
// vote; Opened those that opened one, with their verdicts.
type DisputeView struct {
	*session.Dispute
	Sealed []types.Address    `json:"sealed"`
	Opened []session.OpenVote `json:"opened"`
	// Height is the committed height the answer is from.
	Height uint64 `json:"height"`
}

// sessionQuery answers /session/ID; ok is false for other paths.
func sessionQuery(snap *store.Snapshot, path string) (any, bool, error) {
	if !strings.HasPrefix(path, QuerySession) {
		return nil, false, nil
	}
	rest := strings.TrimPrefix(path, QuerySession)
	idPart, disputePart, isDispute := strings.Cut(rest, QuerySessionDispute)
	id, err := parseID(idPart)
	if err != nil {
		return nil, true, types.ErrBadQuery.Wrapf("session id %q: want a number (/session/ID or /session/ID/dispute/N)", idPart)
	}
	s, ok := session.Get(snap, id)
	if !ok && market.Pruned(snap, id) {
		return nil, true, types.ErrNotFound.Wrapf("session %d: %s", id, session.PrunedError(id))
	}
	if !ok {
		return nil, true, types.ErrNotFound.Wrapf("session %d does not exist (a session job opens its session at the auction's close; ogpu query job %d says where it is)", id, id)
	}
	h := uint64(snap.Version())
	if isDispute {
		n, err := parseID(disputePart)
		if err != nil {
			return nil, true, types.ErrBadQuery.Wrapf("dispute number %q: want a number", disputePart)
		}
		d, ok := session.GetDispute(snap, id, n)
		if !ok {
			return nil, true, types.ErrNotFound.Wrapf("session %d has no dispute %d (it has %d)", id, n, s.NextDispute)
		}
		return disputeView(snap, d, h), true, nil
	}
	v := SessionView{Session: s, Due: s.Due(), Height: h, Phase: "open", Disputes: []DisputeView{}}
	for _, d := range session.Disputes(snap, id) {
		v.Disputes = append(v.Disputes, disputeView(snap, d, h))
	}
	switch {
	case s.Settled:
		v.Phase = "settled"
	case s.Closed || h > s.Expiry:
		v.Phase = "grace"
	}
	return v, true, nil
}

func disputeView(snap *store.Snapshot, d *session.Dispute, h uint64) DisputeView {
	return DisputeView{Dispute: d, Sealed: session.SealedVoters(snap, d.Session, d.Index), Opened: session.OpenedVotes(snap, d.Session, d.Index), Height: h}
}
