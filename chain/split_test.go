package chain

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// TestSplitJobQuery runs the split scenario through real transactions and
// reads job 2 back with the /job/ query: its slices, and per slot the
// chain index, the revealed input hash and frame count, the proof and the
// equivocator settled on its own, as an agent reads them.
func TestSplitJobQuery(t *testing.T) {
	s := runFinding(t, "split")
	res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: QueryJob + "2"})
	if err != nil || res.Code != 0 {
		t.Fatalf("query: %v %d %s", err, res.GetCode(), res.GetLog())
	}
	var v JobView
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
	if v.Kind != market.KindSplit || !slices.Equal(v.Slices, []types.Hash{s.word("s0"), s.word("s1")}) || len(v.Tasks) != 2 {
		t.Fatalf("job 2: kind %s, slices %x, %d tasks; want split, #s0 #s1, 2", v.Kind, v.Slices, len(v.Tasks))
	}
	type slot struct {
		chain           uint16
		provider        string
		steps           uint32
		hin             string
		proven, settled bool
	}
	var got []slot
	for _, tv := range v.Tasks {
		for _, sv := range tv.Slots {
			if sv.Chain == nil || sv.Hin == nil {
				t.Fatalf("stage %d slot %s: no chain or hin in the view", tv.Stage, s.nameOf(sv.Provider))
			}
			got = append(got, slot{*sv.Chain, s.nameOf(sv.Provider), sv.Steps, s.hashStr(*sv.Hin), sv.Proven, sv.Settled})
		}
	}
	want := []slot{
		{0, "p0c", 9, "#prompt", false, true},  // equivocated
		{1, "p0a", 9, "#prompt", false, false}, // alone on its input: audited with its task (AppVersion 8; it was paid unverified, on its own)
		{0, "p1a", 9, "#x", true, false},       // proved p0c's signature
		{1, "p1b", 9, "#x", false, false},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("slots %+v, want %+v", got, want)
	}
}

// TestSplitReplaceQuery runs the split_replace scenario through real
// transactions and reads the job back with the /job/ query: each slot
// names its current provider and the providers it replaced, as an agent
// reads them. A replacement order is a deadline transaction (it must land
// before the commit deadline) and pays for one eligibility check.
func TestSplitReplaceQuery(t *testing.T) {
	s := runFinding(t, "split_replace")
	res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: QueryJob + "1"})
	if err != nil || res.Code != 0 {
		t.Fatalf("query: %v %d %s", err, res.GetCode(), res.GetLog())
	}
	var v JobView
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
	type slot struct {
		stage, chain       uint16
		provider, replaced string
	}
	var got []slot
	for _, tv := range v.Tasks {
		for _, sv := range tv.Slots {
			var names []string
			for _, a := range sv.Replaced {
				names = append(names, s.nameOf(a))
			}
			got = append(got, slot{tv.Stage, *sv.Chain, s.nameOf(sv.Provider), strings.Join(names, ",")})
		}
	}
	want := []slot{{0, 0, "p0b", ""}, {0, 1, "pz", "p0a"}, {1, 0, "px", "p1a"}, {1, 1, "p1b", ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("slots %+v, want %+v", got, want)
	}
	if !deadlineMsg(types.MsgTypeReplaceStage) {
		t.Error("a replacement order is not a deadline message")
	}
	if w := MsgWorks([]types.RawMsg{(&market.MsgReplaceStage{Job: 1, Stage: 1, Chain: 0}).Raw()}); w[0] != replaceWork || w[0].Matches == 0 {
		t.Errorf("a replacement order's work %+v, want one eligibility check at the bound", w[0])
	}
}

// TestPrunedJobQuery runs the prune_session scenario and queries its two
// pruned jobs and one never posted: /job/, /bids/, /escrow/ and
// /whynobids/ answer "not found" saying the job was pruned, where its
// history is, for a pruned id, and "does not exist" for the other; so do
// /session/1 and its dispute, pruned with the job; a pruned job is listed
// nowhere.
func TestPrunedJobQuery(t *testing.T) {
	s := runFinding(t, "prune_session")
	for _, p := range []string{QueryJob, QueryBids, QueryEscrow, QueryWhyNoBids} {
		for id, want := range map[string]string{"1": "job 1 ended and was pruned", "2": "job 2 ended and was pruned", "3": "job 3 does not exist"} {
			res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: p + id})
			if err != nil {
				t.Fatal(err)
			}
			if res.Code != types.ErrNotFound.Code || !strings.Contains(res.Log, want) {
				t.Errorf("%s%s: code %d %q, want not found saying %q", p, id, res.Code, res.Log, want)
			}
			if id != "3" && !strings.Contains(res.Log, "block events and the indexer") {
				t.Errorf("%s%s: %q does not say where the history is", p, id, res.Log)
			}
		}
	}
	for _, id := range []string{"1", "1/dispute/0"} {
		res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: QuerySession + id})
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != types.ErrNotFound.Code || !strings.Contains(res.Log, "job 1 ended and was pruned from the state, with its session") {
			t.Errorf("%s%s: code %d %q, want not found saying the session was pruned", QuerySession, id, res.Code, res.Log)
		}
	}
	for _, p := range []string{QueryJobs, QueryJobs + "/state/completed", QueryJobs + "/state/cancelled", QueryJobs + "/client/" + s.addr("alice").Hex(), QueryJobs + "/provider/" + s.addr("pa").Hex()} {
		res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: p})
		if err != nil || res.Code != 0 {
			t.Fatalf("%s: %v %d %s", p, err, res.GetCode(), res.GetLog())
		}
		if v := strings.TrimSpace(string(res.Value)); v != "[]" && v != "null" {
			t.Errorf("%s lists %s after every job was pruned", p, v)
		}
	}
}
