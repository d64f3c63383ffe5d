package chain

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/types"
)

// statsScenario leaves one job in each open state and one cancelled.
const statsScenario = `
genesis account alice 1000ogpu
genesis account bob 1000ogpu
genesis account carol 1000ogpu
genesis account val 100ogpu
genesis validator val 10000ogpu
block
  tx bob register-provider
  tx bob bond 500ogpu
  tx carol register-provider
  tx carol bond 300ogpu
end
tx alice post-job max=5ogpu
block
  tx bob bid 1 0 3ogpu
  tx carol bid 1 0 4ogpu
  tx alice post-job max=5ogpu
end
block
  tx bob bid 2 0 3ogpu
end
block
  tx bob reveal-bid 1 0
  tx carol reveal-bid 1 0
end
block
  tx alice post-job max=5ogpu
  tx alice post-job max=5ogpu
  tx alice cancel 4
end
expect job 1 state running
expect job 2 state revealing
expect job 3 state bidding
expect job 4 state cancelled
`

// TestStatsQuery: /stats, what the metrics follower reads at each block,
// says what the full queries say: as many jobs in each open state as
// /jobs/state/NAME lists, none of the ended ones, and the supply's
// locked, bonded and unbonding terms.
func TestStatsQuery(t *testing.T) {
	file := filepath.Join(t.TempDir(), "stats.txt")
	if err := os.WriteFile(file, []byte(statsScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	s := runScenarioState(t, file)
	var height int64
	query := func(path string, out any) {
		t.Helper()
		res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: path})
		if err != nil || res.Code != 0 {
			t.Fatalf("%s: %v %d %s", path, err, res.GetCode(), res.GetLog())
		}
		if err := json.Unmarshal(res.Value, out); err != nil {
			t.Fatal(err)
		}
		height = res.Height
	}
	var st StatsView
	query(QueryStats, &st)
	stHeight := height
	var sup SupplyView
	query(QuerySupply, &sup)
	want := map[string]uint64{"bidding": 1, "revealing": 1, "running": 1}
	for _, state := range OpenJobStates {
		var jobs []JobView
		query(QueryJobs+"/state/"+state.String(), &jobs)
		name := state.String()
		if st.Jobs[name] != uint64(len(jobs)) || st.Jobs[name] != want[name] {
			t.Errorf("/stats counts %d %s jobs; /jobs/state lists %d, want %d", st.Jobs[name], name, len(jobs), want[name])
		}
	}
	if len(st.Jobs) != len(OpenJobStates) {
		t.Errorf("/stats counts states %v: want the open ones only", st.Jobs)
	}
	if st.Locked.IsZero() || !st.Locked.Eq(sup.Locked) || !st.Bonded.Eq(sup.Bonded) || !st.Unbonding.Eq(sup.Unbonding) {
		t.Errorf("/stats locked %s bonded %s unbonding %s; /supply says %s %s %s", st.Locked, st.Bonded, st.Unbonding, sup.Locked, sup.Bonded, sup.Unbonding)
	}
	if !st.Bonded.Eq(types.OGPU(10800)) {
		t.Errorf("bonded %s, want the validator's 10000 and the providers' 800 oGPU", types.FormatAmount(st.Bonded))
	}
	if st.Height == 0 || int64(st.Height) != stHeight {
		t.Errorf("/stats at height %d", st.Height)
	}
}
