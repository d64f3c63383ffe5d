package chain

import (
	"encoding/json"
	"strings"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"

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
