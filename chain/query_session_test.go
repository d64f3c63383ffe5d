package chain

import (
	"encoding/json"
	"strings"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// TestSessionQuery runs the session scenario through real transactions
// and reads session 1 back with /session/1 as an agent does: its client,
// prices, lanes with what each was paid, the deadlines and the phase; an
// unknown id is not found and a word is a bad query, each saying so.
func TestSessionQuery(t *testing.T) {
	s := runFinding(t, "session")
	res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: QuerySession + "1"})
	if err != nil || res.Code != 0 {
		t.Fatalf("query: %v %d %s", err, res.GetCode(), res.GetLog())
	}
	var v SessionView
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
	if v.Session == nil || v.ID != 1 || v.Client != s.addr("alice") || v.Phase != "settled" || !v.Closed || v.Due != v.Expiry+v.Grace+1 || v.Height != uint64(res.Height) {
		t.Fatalf("session view %+v", v)
	}
	if v.PriceOut.Dec() != "4000000000000000" || v.PriceIn.Dec() != "1000000000000000" {
		t.Fatalf("prices out %s in %s: want pc's 0.004ogpu and a quarter of it", v.PriceOut.Dec(), v.PriceIn.Dec())
	}
	paid := map[string]string{}
	for _, l := range v.Lanes {
		paid[s.nameOf(l.Provider)] = l.Paid.Dec()
	}
	if len(v.Lanes) != 2 || paid["pa"] != "2000000000000000000" || paid["pb"] != "1200000000000000000" {
		t.Fatalf("lanes paid %v: want pa 2ogpu, pb 1.2ogpu", paid)
	}
	for path, want := range map[string]uint32{QuerySession + "7": types.ErrNotFound.Code, QuerySession + "x": types.ErrBadQuery.Code} {
		res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: path})
		if err != nil || res.Code != want || !strings.Contains(res.Log, "session") {
			t.Errorf("%s: code %d %q, want code %d naming the session", path, res.GetCode(), res.GetLog(), want)
		}
	}
}

// TestSessionDisputeQuery reads the disputes of the session_dispute
// scenario as a validator agent does: /session/1 lists them with their
// signed requests and receipts (the signatures recover to the client and
// the providers, so the agent needs nothing else from the chain), and
// /session/1/dispute/N gives one with its votes.
func TestSessionDisputeQuery(t *testing.T) {
	s := runFinding(t, "session_dispute")
	res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: QuerySession + "1"})
	if err != nil || res.Code != 0 {
		t.Fatalf("query: %v %d %s", err, res.GetCode(), res.GetLog())
	}
	var v SessionView
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Disputes) != 4 || v.NextDispute != 4 || v.OpenDisputes != 0 {
		t.Fatalf("%d disputes (next %d, open %d), want 4 decided", len(v.Disputes), v.NextDispute, v.OpenDisputes)
	}
	d := v.Disputes[1]
	if d.Kind != session.KindComparison || d.Status != session.DisputeDecided || d.Verdict != 0 || len(d.Receipts) != 2 || len(d.Addrs) != 1 || len(d.Voters) != 3 {
		t.Fatalf("dispute 1: %+v", d.Dispute)
	}
	for i := range d.Receipts {
		q, r := d.Requests[i], d.Receipts[i]
		if signer, err := session.Signer(q.Request.Hash(), q.Sig); err != nil || signer != s.addr("alice") {
			t.Fatalf("request %d signer %s %v", i, s.nameOf(signer), err)
		}
		if signer, err := session.Signer(r.Receipt.Hash(), r.Sig); err != nil || signer != r.Receipt.Provider || r.Receipt.Request != q.Request.Hash() {
			t.Fatalf("receipt %d signer %s %v", i, s.nameOf(signer), err)
		}
	}
	if len(d.Sealed) != 3 || len(d.Opened) != 3 {
		t.Fatalf("votes sealed %d opened %d", len(d.Sealed), len(d.Opened))
	}
	res, err = s.h.app.Query(t.Context(), &abci.QueryRequest{Path: QuerySession + "1" + QuerySessionDispute + "0"})
	if err != nil || res.Code != 0 {
		t.Fatalf("query: %v %d %s", err, res.GetCode(), res.GetLog())
	}
	var one DisputeView
	if err := json.Unmarshal(res.Value, &one); err != nil {
		t.Fatal(err)
	}
	if one.Index != 0 || one.Kind != session.KindAudit || one.Verdict != 1 || one.Compensated.Dec() != "410000000000000000" || one.VoterPower(s.addr("pa")) != 0 {
		t.Fatalf("dispute 0: %+v", one.Dispute)
	}
	for path, want := range map[string]uint32{
		QuerySession + "1" + QuerySessionDispute + "9": types.ErrNotFound.Code,
		QuerySession + "1" + QuerySessionDispute + "x": types.ErrBadQuery.Code,
	} {
		res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: path})
		if err != nil || res.Code != want || !strings.Contains(res.Log, "dispute") {
			t.Errorf("%s: code %d %q, want code %d naming the dispute", path, res.GetCode(), res.GetLog(), want)
		}
	}
}

// TestDisputeGas: a dispute pays two signature recoveries per receipt on
// top of msg_gas (genesis.MsgWork.Sigs), computed from the message alone.
func TestDisputeGas(t *testing.T) {
	p := genesis.DefaultParams()
	sig := make([]byte, 65)
	one := &session.MsgDisputeSession{Session: 1, Requests: []session.SignedRequest{{Sig: sig}}, Receipts: []session.SignedReceipt{{Sig: sig}}, Addrs: []string{"/a"}}
	two := &session.MsgDisputeSession{Session: 1, Requests: []session.SignedRequest{{Sig: sig}, {Sig: sig}}, Receipts: []session.SignedReceipt{{Sig: sig}, {Sig: sig}}, Addrs: []string{"/a"}}
	w := MsgWorks([]types.RawMsg{one.Raw(), two.Raw()})
	if w[0].Sigs != 2 || w[1].Sigs != 4 {
		t.Fatalf("work %+v", w)
	}
	recovery := genesis.MaxWorkMatches * p.WorkGas.MatchGas
	if got, plain := p.Gas(0, w[1:]), p.Gas(0, []genesis.MsgWork{{}}); got != plain+4*recovery {
		t.Fatalf("a two-receipt dispute costs %d gas, a plain message %d: want 4 recoveries (%d each) more", got, plain, recovery)
	}
}

// TestSessionJobPhase: a running session job's phase speaks of lanes and
// vouchers, then of the grace window (a job's "execute, commit and
// reveal" does not apply to it).
func TestSessionJobPhase(t *testing.T) {
	s := &session.Session{ID: 4, Expiry: 100, Grace: 10, Lanes: make([]session.Lane, 2)}
	if p := sessionPhase(s, 50); !strings.Contains(p, "session open: 2 lanes serve requests until height 100") || !strings.Contains(p, "redemptions until 111") || !strings.Contains(p, "ogpu query session 4") {
		t.Errorf("open: %q", p)
	}
	for _, c := range []struct {
		h      uint64
		closed bool
	}{{101, false}, {50, true}} {
		s.Closed = c.closed
		if p := sessionPhase(s, c.h); !strings.Contains(p, "grace window") || !strings.Contains(p, "end of block 111") {
			t.Errorf("height %d closed %v: %q", c.h, c.closed, p)
		}
	}
}
