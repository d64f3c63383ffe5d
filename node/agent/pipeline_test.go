package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/he"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/metrics"
	"github.com/ogpu-network/ogpu/node/pricing"
	"github.com/ogpu-network/ogpu/runtime/blobstore"
	"github.com/ogpu-network/ogpu/types"
)

// pipelineModel is a 3-stage model that fits preset N13 (depth 4): a
// dense layer, a degree-2 activation on its own, a dense layer.
func pipelineModel(t *testing.T) *he.Model {
	w := func(out, in int, seed float64) [][]float64 {
		m := make([][]float64, out)
		for i := range m {
			m[i] = make([]float64, in)
			for j := range m[i] {
				m[i][j] = math.Sin(seed+float64(7*i+3*j)) / 2
			}
		}
		return m
	}
	m := &he.Model{Format: he.ModelFormat, Name: "agent-test", Preset: "N13", LogSlots: 3, Inputs: 6, Stages: []he.Stage{
		{Name: "dense-1", Dense: &he.Dense{Weights: w(8, 6, 1), Bias: []float64{0.1, -0.1, 0.2, 0, 0, 0.05, -0.2, 0.3}}},
		{Name: "square", Activation: &he.Activation{Kind: he.ActPolynomial, Coeffs: []string{"0.125", "0.5", "0.25"}}},
		{Name: "dense-2", Dense: &he.Dense{Weights: w(3, 8, 2)}},
	}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	return m
}

func (n *testNet) pipelineJob(t *testing.T, m *he.Model, input []float64) (PipelineJob, *he.SecretKey) {
	sk, ek, err := he.GenerateKeys(m.Preset, m.LogSlots)
	if err != nil {
		t.Fatal(err)
	}
	ekb, err := ek.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return PipelineJob{Model: m, Key: sk, EvalKeys: ekb, Input: input, Redundancy: 2, MaxPrice: types.OGPU(5),
		Req:     market.Requirements{MinStake: types.OGPU(100)},
		Windows: market.Windows{Bid: 4, Reveal: 3, Execute: 100, Verify: 20}}, sk
}

// TestPipelineJobWithLiar runs a 3-stage encrypted job on three real
// providers, one of which evaluates its dense stages with a wrong weight:
// its stage-0 and stage-2 outputs are disputed, the validator re-executes
// them on the agreed inputs and votes, the liar is slashed, and the client
// decrypts the verified output, which matches the plaintext model.
func TestPipelineJobWithLiar(t *testing.T) {
	n := newTestNet(t)
	// Per-stage prices make the replica chains cross providers: chain 0
	// is prov1 → prov3 → prov1 (its ciphertexts travel over libp2p),
	// chain 1 is the liar throughout, prov3 at stage 0 and 2 (prov1 at
	// stage 1) is the backup whose bid sets the price.
	prov1 := n.providerWith("prov1", stagePrices{100, 300, 100}, false)
	liar := n.providerWith("prov2", stagePrices{200, 200, 200}, true)
	honest := n.providerWith("prov3", stagePrices{300, 100, 300}, false)
	c := n.client()
	m := pipelineModel(t)
	input := []float64{0.61803, -0.27182, 0.31415, -0.14142, 0.1732, 0.2236}
	job, _ := n.pipelineJob(t, m, input)
	if err := metrics.Register(); err != nil {
		t.Fatal(err)
	}
	ms := httptest.NewServer(metrics.Handler())
	defer ms.Close()
	before, err := metrics.Scrape(ms.URL)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.RunPipeline(n.ctx, job, func(f string, a ...any) { t.Logf("[client] "+f, a...) })
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.Forward(input)
	for i := range want {
		if math.Abs(res.Output[i]-want[i]) > 1e-3 {
			t.Fatalf("output %d: decrypted %v, plaintext %v", i, res.Output[i], want[i])
		}
	}
	t.Logf("decrypted %v, plaintext %v", res.Output, want)
	outcomes := map[uint16]string{}
	for _, s := range res.Stages {
		outcomes[s.Stage] = s.Outcome
	}
	if outcomes[0] != "verdict" || outcomes[1] != "agreed" || outcomes[2] != "verdict" {
		t.Fatalf("stage outcomes %v: want verdicts at the liar's dense stages 0 and 2, agreement at the activation stage 1", outcomes)
	}
	if res.Paid.Cmp(types.OGPU(0)) == 0 {
		t.Fatal("nobody was paid")
	}
	pv, err := n.c.Provider(n.ctx, liar.agent.Address())
	if err != nil {
		t.Fatal(err)
	}
	if !pv.Tombstoned || pv.Reputation.Lost == 0 {
		t.Fatalf("liar not punished: tombstoned %v, lost %d", pv.Tombstoned, pv.Reputation.Lost)
	}
	if res.Compensated.IsZero() {
		t.Fatal("the client got no compensation from the liar's slash")
	}
	n.supplyIsCap()
	checkStageMetrics(t, n, res.Job, ms.URL, before, map[string]*testProvider{"prov1": prov1, "prov2": liar, "prov3": honest})

	// What prov3 got over the wire: its store holds every blob it
	// fetched (manifest, model, keys from the client) or was pushed (the
	// stage-0 output from prov1). None is a secret key, none holds the
	// input in the clear; the job's data are ciphertexts and keys.
	checkNoPlaintext(t, honest.agent.cfg.Store, input)

	// Peers pushing what they should not get a clear refusal.
	pid := honest.host.ID()
	out, err := prov1.agent.cfg.Store.Get(res.Stages[0].Result)
	if err != nil {
		t.Fatal(err)
	}
	hd := pushHeader{Job: res.Job, Stage: 0, Hash: res.Stages[0].Result, Size: int64(len(out))}
	if err := pushOutput(n.ctx, c.Host, pid, hd, out); err == nil || !strings.Contains(err.Error(), "holds no slot of job") {
		t.Fatalf("a push from the client: %v", err)
	}
	// From prov3's upstream in its replica chain (prov1, unless a slow
	// prov1 missed its window and its slot went to a backup).
	jv, err := n.c.Job(n.ctx, res.Job)
	if err != nil {
		t.Fatal(err)
	}
	if sl := jv.Tasks[0].Slots[0]; sl.Provider == prov1.agent.Address() && !sl.NoShow && jv.Tasks[1].Slots[0].Provider == honest.agent.Address() {
		if err := pushOutput(n.ctx, prov1.host, pid, hd, out); err == nil || !strings.Contains(err.Error(), "is completed") {
			t.Fatalf("a push for a completed job: %v", err)
		}
	} else {
		t.Logf("prov1 is not upstream of prov3 in this run (slots %+v, %+v): no completed-job push", jv.Tasks[0].Slots, jv.Tasks[1].Slots)
	}
	s, err := c.Host.Host().NewStream(n.ctx, pid, PipelineProtocol)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Write([]byte("GET / HTTP/1.1\n"))
	_ = s.CloseWrite()
	reply, _ := io.ReadAll(io.LimitReader(s, 4096))
	if !strings.Contains(string(reply), "bad header") {
		t.Fatalf("garbage header answered %q", reply)
	}
	_ = s.Close()
}

// checkStageMetrics: every provider reported at least one evaluation per
// stage it revealed a result for (a speculative input replaced by the
// agreed one is evaluated again), each of the model's preset and of a
// positive time, and ogpu_he_stage_seconds moved by exactly the
// evaluations reported.
func checkStageMetrics(t *testing.T, n *testNet, job uint64, url string, before map[string]float64, provs map[string]*testProvider) {
	t.Helper()
	jv, err := n.c.Job(n.ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	n.stageMu.Lock()
	defer n.stageMu.Unlock()
	total := 0
	for name, p := range provs {
		revealed := 0
		for _, task := range jv.Tasks {
			for _, sl := range task.Slots {
				if sl.Provider == p.agent.Address() && sl.Revealed {
					revealed++
				}
			}
		}
		evals := n.stageEvals[name]
		if len(evals) < revealed {
			t.Errorf("%s revealed %d stage results and reported %d evaluations", name, revealed, len(evals))
		}
		for _, e := range evals {
			if e.preset != "N13" || e.took <= 0 {
				t.Errorf("%s reported an evaluation of preset %q taking %v", name, e.preset, e.took)
			}
		}
		total += len(evals)
	}
	if total == 0 {
		t.Fatal("no stage evaluation was reported")
	}
	after, err := metrics.Scrape(url)
	if err != nil {
		t.Fatal(err)
	}
	const series = `ogpu_he_stage_seconds_count{preset="N13"}`
	if got := after[series] - before[series]; got != float64(total) {
		t.Errorf("%s moved by %v, the providers reported %d evaluations", series, got, total)
	}
}

func TestPipelineInputCodec(t *testing.T) {
	in := &PipelineInput{Version: 1, Model: types.Hash{1}, Keys: types.Hash{2}, Ciphertext: types.Hash{3}}
	got, err := DecodePipelineInput(in.Encode())
	if err != nil || *got != *in {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, bz := range map[string]string{
		"unknown field": `{"version":1,"model":"0x01","keys":"0x02","ciphertext":"0x03","extra":1}`,
		"no keys":       `{"version":1,"model":"0x0100000000000000000000000000000000000000000000000000000000000000","ciphertext":"0x0300000000000000000000000000000000000000000000000000000000000000"}`,
		"version 2":     `{"version":2}`,
		"garbage":       `{"version":`,
	} {
		if _, err := DecodePipelineInput([]byte(bz)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// stagePrices prices stage s of a pipeline at s thousandths of an oGPU.
type stagePrices []uint64

func (sp stagePrices) Price(_ context.Context, j pricing.JobView) (*uint256.Int, error) {
	return new(uint256.Int).Div(types.OGPU(sp[j.Stage]), uint256.NewInt(1000)), nil
}

// checkNoPlaintext inspects every blob in store: HE objects must be
// ciphertexts or evaluation keys, and no blob may contain the input's
// values as float64 bytes or as decimal text.
func checkNoPlaintext(t *testing.T, store *blobstore.Store, input []float64) {
	t.Helper()
	hashes, err := store.List()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, h := range hashes {
		bz, err := store.Get(h)
		if err != nil {
			t.Fatal(err)
		}
		if kind, _, _, err := he.Peek(bz); err == nil {
			if kind != he.KindCiphertext && kind != he.KindEvalKeys {
				t.Fatalf("provider holds a %s", kind)
			}
			kinds = append(kinds, kind.String())
		} else {
			kinds = append(kinds, "other")
		}
		for _, v := range input {
			le := binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
			be := binary.BigEndian.AppendUint64(nil, math.Float64bits(v))
			txt := []byte(strconv.FormatFloat(v, 'g', -1, 64) + ",")
			if bytes.Contains(bz, le) || bytes.Contains(bz, be) || bytes.Contains(bz, txt) {
				t.Fatalf("blob %x contains input value %v in the clear", h[:8], v)
			}
		}
	}
	t.Logf("provider store: %v", kinds)
	var cts int
	for _, k := range kinds {
		if k == he.KindCiphertext.String() {
			cts++
		}
	}
	if cts == 0 {
		t.Fatal("the provider received no ciphertext: nothing was checked")
	}
}
