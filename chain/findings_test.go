package chain

// Regression tests named after the findings of security review 1
// (../shared/research/security-review-1.md) that the scenario scripts
// perform against the real App: each runs its script (testdata/scenarios),
// whose expect lines check the outcome, compares the output with its
// golden, and checks the finding's claim on the final state.

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

func runFinding(t *testing.T, name string) *scenario {
	t.Helper()
	file := filepath.Join("testdata", "scenarios", name+".txt")
	s := runScenarioState(t, file)
	checkGolden(t, file, s)
	return s
}

// TestC1CanaryTheft: a validator record with no power cannot claim a
// canary answer; an active validator's false claim goes to the vote and
// costs it; a true one catches a cartel. No canary poster is compensated.
func TestC1CanaryTheft(t *testing.T) {
	s := runFinding(t, "c1_canary_theft")
	kv := s.view()
	k := escrow.NewKeeper(kv)
	// mallory gained nothing: 1100 at genesis, 1000 of it unbonding.
	have := new(uint256.Int).Add(k.Balance(addrOf("mallory")), k.UnbondingTotal(addrOf("mallory")))
	if have.Gt(types.OGPU(1100)) {
		t.Errorf("mallory holds %s, more than her 1100 oGPU", types.FormatAmount(have))
	}
	for id := uint64(1); id <= 3; id++ {
		j, _ := market.GetJob(kv, id)
		if !j.Compensated.IsZero() {
			t.Errorf("canary job %d compensated its poster %s", id, types.FormatAmount(j.Compensated))
		}
	}
	if v, _ := k.GetValidator(addrOf("val3")); !v.Jailed {
		t.Error("val3's false canary claim did not jail it")
	}
}

// TestH4CanaryLooksLikeAJob: before settlement a canary's job record, its
// task and its /job and /bids answers equal a client job's but for the
// id, the client and the seal (and the bid and result commitments, salted,
// which differ for any two jobs).
func TestH4CanaryLooksLikeAJob(t *testing.T) {
	s := runFinding(t, "h4_canary_looks_like_a_job")
	kv := s.view()
	client, _ := market.GetJob(kv, 1)
	canary, _ := market.GetJob(kv, 2)
	if client.Seal == canary.Seal || client.Client == canary.Client {
		t.Fatal("the two jobs should differ in client and seal")
	}
	a, b := *client, *canary
	a.ID, a.Client, a.Seal = 0, types.Address{}, types.Hash{}
	b.ID, b.Client, b.Seal = 0, types.Address{}, types.Hash{}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("job records differ beyond id, client and seal:\n%+v\n%+v", a, b)
	}
	ver := verifier.NewKeeper(kv)
	t1, _ := ver.GetTask(1, 0)
	t2, _ := ver.GetTask(2, 0)
	for _, tk := range []*verifier.Task{t1, t2} { // salted: differ for any two jobs
		for i := range tk.Slots {
			tk.Slots[i].Commitment = types.Hash{}
		}
	}
	if t1.Status != verifier.TaskConfirming || !reflect.DeepEqual(t1, t2) {
		t.Errorf("tasks differ (or are not confirming):\n%+v\n%+v", t1, t2)
	}
	query := func(path string) any {
		res, err := s.h.app.Query(t.Context(), &abci.QueryRequest{Path: path})
		if err != nil || res.Code != 0 {
			t.Fatalf("query %s: %v %d %s", path, err, res.GetCode(), res.GetLog())
		}
		var v any
		if err := json.Unmarshal(res.Value, &v); err != nil {
			t.Fatalf("query %s: %v", path, err)
		}
		return v
	}
	strip := func(v any, keys ...string) any {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range keys {
				delete(x, k)
			}
		case []any:
			for _, e := range x {
				for _, k := range keys {
					delete(e.(map[string]any), k)
				}
			}
		}
		return v
	}
	for _, q := range []struct {
		path string
		keys []string
	}{{"/job/", []string{"ID", "Client", "Seal"}}, {"/bids/", []string{"commitment"}}, {"/escrow/", []string{"job"}}} {
		j1, j2 := query(q.path+"1"), query(q.path+"2")
		if a, b := strip(j1, q.keys...), strip(j2, q.keys...); !reflect.DeepEqual(a, b) {
			ra, _ := json.Marshal(a)
			rb, _ := json.Marshal(b)
			t.Errorf("%s answers differ beyond %v:\n%s\n%s", q.path, q.keys, ra, rb)
		}
	}
}

// TestH1WithheldInput: providers that report a withheld input are paid
// their price from the client's escrow, not slashed or jailed, and the
// client is never compensated; a provider that reports falsely and then
// walks away is still a no-show.
func TestH1WithheldInput(t *testing.T) {
	s := runFinding(t, "h1_withheld_input")
	kv := s.view()
	for id := uint64(1); id <= 3; id++ {
		if j, _ := market.GetJob(kv, id); !j.Compensated.IsZero() {
			t.Errorf("job %d compensated the client %s", id, types.FormatAmount(j.Compensated))
		}
	}
	if j, _ := market.GetJob(kv, 1); !j.Paid.Eq(types.OGPU(9)) {
		t.Errorf("job 1 (withheld input) paid the providers %s, want 9 oGPU", types.FormatAmount(j.Paid))
	}
	if p, _ := market.GetProvider(kv, addrOf("carol")); p.Jailed {
		t.Error("carol, who reported a withheld input, is jailed")
	}
	if p, _ := market.GetProvider(kv, addrOf("bob")); !p.Jailed {
		t.Error("bob, who reported falsely and walked away, is not jailed")
	}
}

// TestM5Votes: votes are sealed then opened; an early opening and a copied
// commitment fail; missing and wrong votes are slashed; the voters with
// the outcome are paid.
func TestM5Votes(t *testing.T) {
	s := runFinding(t, "m5_votes")
	k := escrow.NewKeeper(s.view())
	for name, want := range map[string]string{"val1": "5000", "val2": "3000", "val3": "1998", "val4": "1497.0015"} {
		w, _ := types.ParseAmount(want + "ogpu")
		if got := k.Bonded(addrOf(name)); !got.Eq(w) {
			t.Errorf("%s has %s bonded, want %s", name, types.FormatAmount(got), types.FormatAmount(w))
		}
	}
}

// TestM5LateSealerCannotCopy: a validator that becomes active once votes
// have opened cannot seal a copy of an opened vote: the voter set is fixed
// when the vote opens.
func TestM5LateSealerCannotCopy(t *testing.T) {
	runScenarioState(t, filepath.Join("testdata", "scenarios", "m5_late_sealer.txt"))
}
