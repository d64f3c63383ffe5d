package market

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/finetune"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// jobOfKey is the job a store key belongs to, by its table's layout (ok
// false for keys that name no job). It is written from the key layouts in
// market/keys.go, escrow/keys.go, verifier/verifier.go, finetune and
// session, not
// from the pruning code, so that a pruning bug is not mirrored here.
func jobOfKey(key []byte) (uint64, bool) {
	at := func(i int) (uint64, bool) {
		if len(key) < i+8 {
			return 0, false
		}
		return binary.BigEndian.Uint64(key[i : i+8]), true
	}
	switch key[0] {
	case 0x14, 0x21, 0x23, 0x24, 0x29, 0x2a, 0x30, 0x31, 0x33, 0x34, 0x60, 0x62, 0x63, 0x64,
		0x50, 0x52, 0x54, 0x55, 0x56, 0x57: // session id = job id
		return at(1)
	case 0x25:
		return at(2)
	case 0x26, 0x27:
		return at(1 + types.AddressLength)
	case 0x28, 0x2b, 0x61, 0x51, 0x53:
		return at(9)
	}
	return 0, false
}

// recordsOf dumps every key and value of r that belongs to job id.
func recordsOf(r store.Reader, id uint64) map[string]string {
	out := map[string]string{}
	r.Iterate(nil, nil, func(key, value []byte) bool {
		if j, ok := jobOfKey(key); ok && j == id {
			out[string(key)] = string(value)
		}
		return false
	})
	return out
}

// queuedAt returns the heights job id is queued for pruning at.
func queuedAt(r store.Reader, id uint64) []uint64 {
	var hs []uint64
	store.IteratePrefix(r, PruneQueuePrefix(), func(key, _ []byte) bool {
		h, j, err := ParsePruneKey(key)
		if err != nil {
			panic(err)
		}
		if j == id {
			hs = append(hs, h)
		}
		return false
	})
	return hs
}

func TestPruneKeyRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name        string
		height, job uint64
	}{{"zero", 0, 0}, {"small", 340, 12}, {"byte edge", 255, 256}, {"max", ^uint64(0), ^uint64(0)}} {
		t.Run(c.name, func(t *testing.T) {
			h, j, err := ParsePruneKey(PruneKey(c.height, c.job))
			if err != nil || h != c.height || j != c.job {
				t.Fatalf("ParsePruneKey(PruneKey(%d, %d)) = %d, %d, %v", c.height, c.job, h, j, err)
			}
		})
	}
	for _, bad := range [][]byte{nil, {prefixPrune}, append([]byte{prefixJob}, make([]byte, 16)...), append(PruneKey(1, 2), 0)} {
		if _, _, err := ParsePruneKey(bad); err == nil {
			t.Errorf("ParsePruneKey(%x) accepted", bad)
		}
	}
}

// TestPruneSettledPipeline: a 3-stage pipeline whose stage 1 was decided
// by a vote (task, voter set, sealed and opened votes, a backup bidder, a
// slashed liar) completes at height H. Through the last block of its
// retain window (H + retain - 1) every record stays and a late result,
// vote or cancel is refused for the job's phase; at the end of block
// H + retain it is pruned: no key of the job is left in any table, the
// queue entry is gone, a job_pruned event says so, and every later
// message naming it is refused with an error saying it was pruned,
// writing nothing. A chain with retain_blocks 1 less (the mutation
// "prune one block early") fails the first half.
func TestPruneSettledPipeline(t *testing.T) {
	p := newPipeNet(t)
	const retain = 6
	p.params.Market.RetainBlocks = retain
	if err := p.params.Validate(); err != nil {
		t.Fatal(err)
	}
	id := p.award()
	out := [3]types.Hash{hashOf("stage 0 out"), hashOf("stage 1 out"), hashOf("stage 2 out")}
	p.run(id, 0, [2]types.Hash{out[0], out[0]})
	p.endBlock()
	p.run(id, 1, [2]types.Hash{out[1], hashOf("a lie")})
	p.advanceTo(14)
	p.vote(id, 1, out[1], p.val)
	p.endBlock()
	p.run(id, 2, [2]types.Hash{out[2], out[2]})
	if s := p.job(id).State; s != JobCompleted {
		t.Fatalf("job is %s, want completed", s)
	}
	// The job completed at the end of the last block: queued once, at
	// that height + retain.
	end := p.height - 1
	if got := queuedAt(p.tree, id); !slices.Equal(got, []uint64{end + retain}) {
		t.Fatalf("job %d (completed at %d) is queued for pruning at %v, want [%d]", id, end, got, end+retain)
	}
	before := recordsOf(p.tree, id)
	for _, pfx := range []byte{0x21, 0x23, 0x25, 0x26, 0x27, 0x30, 0x31, 0x34} {
		found := false
		for k := range before {
			found = found || k[0] == pfx
		}
		if !found {
			t.Errorf("before pruning, job %d has no record under %#x: the test does not cover that table", id, pfx)
		}
	}
	p.advanceTo(end + retain) // the blocks up to H + retain - 1 are over
	// The deadlines still scheduled for the job run and delete themselves
	// meanwhile (each passes over a final job); every other record stays.
	got := recordsOf(p.tree, id)
	for k, v := range before {
		if k[0] != prefixSchedule && got[k] != v {
			t.Fatalf("at height %d, still inside the retain window (ends %d), job %d lost record %x: pruned early", p.height, end+retain, id, k)
		}
	}
	p.refused("a result commit on the completed job", func(k *Keeper) error {
		return k.CommitResult(p.stage[2][0], &verifier.MsgCommitResult{Job: id, Stage: 2, Commitment: hashOf("late")})
	}, types.ErrWrongPhase)
	p.events = nil
	p.endBlock() // H + retain: pruned
	if got := recordsOf(p.tree, id); len(got) != 0 {
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, fmt.Sprintf("%x", k))
		}
		slices.Sort(keys)
		t.Fatalf("after pruning, job %d keeps %d records: %v", id, len(got), keys)
	}
	if !Pruned(p.tree, id) || Pruned(p.tree, id+1) || Pruned(p.tree, 0) {
		t.Errorf("Pruned(%d) = %v, Pruned(%d) = %v (never posted), Pruned(0) = %v; want true, false, false", id, Pruned(p.tree, id), id+1, Pruned(p.tree, id+1), Pruned(p.tree, 0))
	}
	evs := eventsOf[EventJobPruned](t, p.events)
	if len(evs) != 1 || evs[0] != (EventJobPruned{Job: id, State: "completed", Height: end + retain}) {
		t.Fatalf("job_pruned events %+v, want one for job %d, completed, at %d", evs, id, end+retain)
	}
	// The attacks: every party's message naming the pruned job.
	pruned := []string{fmt.Sprintf("job %d ended and was pruned", id), "block events and the indexer"}
	for _, c := range []struct {
		name string
		fn   func(k *Keeper) error
	}{
		{"the client cancels", func(k *Keeper) error { return k.CancelJob(client, id) }},
		{"a provider bids", func(k *Keeper) error {
			return k.CommitBid(p.spares[0], &MsgCommitBid{Job: id, Stage: 0, Commitment: hashOf("bid")})
		}},
		{"a provider commits a result", func(k *Keeper) error {
			return k.CommitResult(p.stage[0][0], &verifier.MsgCommitResult{Job: id, Stage: 0, Commitment: hashOf("c")})
		}},
		{"a provider reveals a result", func(k *Keeper) error {
			return k.RevealResult(p.stage[1][1], &verifier.MsgRevealResult{Job: id, Stage: 1, Result: hashOf("a lie"), Salt: hashOf("salt")})
		}},
		{"a provider reports its input", func(k *Keeper) error {
			return k.ReportInput(p.stage[2][0], &verifier.MsgReportInput{Job: id, Stage: 2})
		}},
		{"the validator seals a vote", func(k *Keeper) error {
			return k.CommitVote(p.val, &verifier.MsgCommitVote{Job: id, Stage: 1, Commitment: hashOf("v")})
		}},
		{"the validator opens a vote", func(k *Keeper) error {
			return k.VoteDispute(p.val, &verifier.MsgVoteDispute{Job: id, Stage: 1, Result: out[1], Salt: hashOf("s")})
		}},
		{"a validator reveals a canary", func(k *Keeper) error {
			return k.RevealCanary(p.val, &verifier.MsgRevealCanary{Job: id, Stage: 0})
		}},
	} {
		p.refused(c.name, c.fn, types.ErrUnknownJob, pruned...)
	}
	p.refused("a job never posted", func(k *Keeper) error { return k.CancelJob(client, id+1) }, types.ErrUnknownJob, fmt.Sprintf("job %d does not exist", id+1))
}

// TestPruneKeepsOtherJobs: jobs 1, 10, 256 and 257 carry bids (and 256
// is 0x0100, whose big-endian bytes start with job 1's in a variable-length
// encoding). Job 1 is cancelled first; the block that prunes it deletes
// job 1's records and nothing else of any other job: every record of the
// 256 others is the same before and after. Then every job ends (cancelled
// or expired) and is pruned, and no job record of any table is left.
func TestPruneKeepsOtherJobs(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.DisputeBlocks = 4 // retain_blocks may then be as short as 4
	const retain = 4
	params.Market.RetainBlocks = retain
	n := marketNet(t, params)
	m := auctionJob(2, amt("0.01ogpu"))
	const jobs = 257
	for i := 1; i <= jobs; i++ {
		if id := n.post(client, m); id != uint64(i) {
			t.Fatalf("posted job %d, want %d", id, i)
		}
	}
	bidOn := []uint64{1, 10, 256, 257}
	for _, id := range bidOn {
		n.bid(prov1, id, 0, amt("0.01ogpu"))
		n.bid(prov2, id, 0, amt("0.01ogpu"))
	}
	n.must("cancel job 1", func(k *Keeper) error { return k.CancelJob(client, 1) })
	n.endBlock()
	for _, id := range bidOn[1:] {
		n.must("cancel", func(k *Keeper) error { return k.CancelJob(client, id) })
	}
	first := n.height - 1 + retain // job 1's pruning
	n.advanceTo(first)
	others := map[uint64]map[string]string{}
	for id := uint64(2); id <= jobs; id++ {
		others[id] = recordsOf(n.tree, id)
		if len(others[id]) == 0 {
			t.Fatalf("job %d has no records before job 1's pruning", id)
		}
	}
	if len(recordsOf(n.tree, 1)) == 0 {
		t.Fatal("job 1 has no records before its pruning")
	}
	n.endBlock()
	if got := recordsOf(n.tree, 1); len(got) != 0 {
		t.Fatalf("job 1 keeps %d records after its pruning", len(got))
	}
	// The same block runs the other jobs' close deadlines (at their reveal
	// end, 6): those schedule entries delete themselves; every other
	// record must stay as it was.
	for id := uint64(2); id <= jobs; id++ {
		got := recordsOf(n.tree, id)
		for k, v := range others[id] {
			if k[0] != prefixSchedule && got[k] != v {
				t.Fatalf("pruning job 1 changed or deleted job %d's record %x", id, k)
			}
		}
		for k := range got {
			if _, ok := others[id][k]; !ok {
				t.Fatalf("pruning job 1 wrote record %x of job %d", k, id)
			}
		}
	}
	// Every other job ended by now (cancelled at 3, expired at their bid
	// end): all are pruned by 4 + retain.
	n.advanceTo(4 + retain + 1)
	n.tree.Iterate(nil, nil, func(key, _ []byte) bool {
		if id, ok := jobOfKey(key); ok {
			t.Fatalf("after every job was pruned, key %x of job %d is left", key, id)
		}
		return false
	})
	for id := uint64(1); id <= jobs; id++ {
		if !Pruned(n.tree, id) {
			t.Fatalf("job %d is not reported pruned", id)
		}
	}
}

// TestPruneWorkIsBounded: 257 bidless 64-stage auctions expire in one
// block, so they are due for pruning at one height; each costs 65 units,
// so a block prunes at most MaxPruneWork / 65 = 63 of them, lowest ids
// first, and the rest carry over (nothing is lost: every job is pruned
// within five blocks, each exactly once). Without the bound the first
// block would prune all 257.
func TestPruneWorkIsBounded(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.DisputeBlocks = 4 // retain_blocks may then be as short as 4
	const retain = 4
	params.Market.RetainBlocks = retain
	n := marketNet(t, params)
	m := auctionJob(2, uint256.NewInt(1))
	m.Stages = 64
	const jobs = 257
	for i := 0; i < jobs; i++ {
		n.post(client, m)
	}
	n.advanceTo(n.job(1).BidEnd + 1)
	for id := uint64(1); id <= jobs; id++ {
		if s := n.job(id).State; s != JobExpired {
			t.Fatalf("job %d is %s, want expired", id, s)
		}
	}
	due := n.job(1).BidEnd + retain
	n.advanceTo(due)
	per := MaxPruneWork / pruneCost(n.job(1))
	if per != 63 {
		t.Fatalf("a block prunes %d 64-stage jobs, the test expects 63", per)
	}
	n.events = nil
	var order []uint64
	for b := 0; b < 5; b++ {
		mark := len(n.events)
		n.endBlock()
		got := eventsOf[EventJobPruned](t, n.events[mark:])
		want := min(int(per), jobs-len(order))
		if len(got) != want {
			t.Fatalf("block %d after the due height pruned %d jobs, want %d (the bound %d units)", b, len(got), want, MaxPruneWork)
		}
		for _, e := range got {
			order = append(order, e.Job)
		}
	}
	for i, id := range order {
		if id != uint64(i+1) {
			t.Fatalf("the %dth pruned job is %d, want %d (lowest id first, each once)", i, id, i+1)
		}
	}
	if len(order) != jobs {
		t.Fatalf("%d jobs pruned, want %d", len(order), jobs)
	}
	if n := len(queuedAt(n.tree, 1)); n != 0 {
		t.Fatal("the queue still holds job 1")
	}
	var left int
	store.IteratePrefix(n.tree, PruneQueuePrefix(), func(_, _ []byte) bool { left++; return false })
	if left != 0 {
		t.Fatalf("%d queue entries left", left)
	}
}

// TestPruneOff: retain_blocks 0 keeps every job, as before app version 7.
func TestPruneOff(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.RetainBlocks = 0
	n := marketNet(t, params)
	id := n.post(client, auctionJob(2, amt("0.01ogpu")))
	n.must("cancel", func(k *Keeper) error { return k.CancelJob(client, id) })
	n.endBlock()
	if got := queuedAt(n.tree, id); len(got) != 0 {
		t.Fatalf("retain_blocks 0 queued the job at %v", got)
	}
	if Pruned(n.tree, id) {
		t.Fatal("the job counts as pruned")
	}
}

// TestPruneInvariantCatches: the invariant fails on a queue entry for an
// open job, on escrow held for a job not in the state, and on a bid or
// provider index entry left by a pruning that forgot it.
func TestPruneInvariantCatches(t *testing.T) {
	params := genesis.DefaultParams()
	params.Market.RetainBlocks = 100
	n := marketNet(t, params)
	id := n.post(client, auctionJob(2, amt("0.01ogpu")))
	n.bid(prov1, id, 0, amt("0.01ogpu"))
	n.endBlock()
	for _, c := range []struct {
		name string
		mut  func(kv store.KV)
		want string
	}{
		{"an open job queued", func(kv store.KV) { kv.Set(PruneKey(500, id), present) }, "queued for pruning while bidding"},
		{"a job pruned while its escrow is held", func(kv store.KV) { kv.Delete(JobKey(id)) }, "escrow held of job 1"},
		{"a bid left behind", func(kv store.KV) {
			kv.Set(BidKey(9, 0, prov1), encode(&Bid{Deposit: new(uint256.Int), Price: new(uint256.Int)}))
		}, "under prefix 0x23 of job 9"},
		{"a provider index entry left behind", func(kv store.KV) { kv.Set(byProviderKey(prov1, 9), present) }, "provider index entry of job 9"},
		{"a job queued twice", func(kv store.KV) {
			j, _ := GetJob(kv, id)
			j.State = JobCancelled
			kv.Set(JobKey(id), encode(j))
			kv.Set(PruneKey(500, id), present)
			kv.Set(PruneKey(600, id), present)
		}, "queued for pruning twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			kv := store.NewCache(n.tree)
			c.mut(kv)
			err := PruneInvariant(kv)
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
				t.Fatalf("PruneInvariant = %v, want an error saying %q", err, c.want)
			}
		})
	}
	if err := PruneInvariant(n.tree); err != nil {
		t.Fatal(err)
	}
}

// TestPruneFinetuneGame: a fine-tune job whose liar was located by a
// bisection game and convicted by the validators' sealed and opened votes
// keeps its game, votes, bracket and claims until its retain window ends;
// then no record of it is left in any table (market, verifier, finetune),
// and a late game vote or checkpoint opening is refused as pruned.
func TestPruneFinetuneGame(t *testing.T) {
	n := finetuneNet(t)
	const retain = 100
	n.params.Market.RetainBlocks = retain
	const steps = 16
	id := n.awardFinetune(steps, prov1, prov2)
	honest, liar := honestRun(steps), deviatingRun(steps, 5, "perturbed")
	n.ftResults(id, map[types.Address]ftRun{prov1: honest, prov2: liar}, prov1, prov2)
	for n.game(id, 0).Status == finetune.StatusOpen {
		g := n.game(id, 0)
		for _, r := range []ftRun{honest, liar} {
			m := r.open(g)
			n.must("open checkpoints", func(k *Keeper) error { return k.OpenCheckpoints(prov3, m) })
		}
		n.endBlock()
	}
	n.gameVote(id, 0, honest[5], n.validators...)
	if s := n.job(id).State; s != JobCompleted {
		t.Fatalf("job %s after the verdict, want completed", s)
	}
	due := queuedAt(n.tree, id)
	if len(due) != 1 || due[0] != n.height+retain {
		t.Fatalf("queued at %v, want [%d]", due, n.height+retain)
	}
	before := recordsOf(n.tree, id)
	for _, pfx := range []byte{0x29, 0x60, 0x62, 0x63, 0x64} {
		found := false
		for k := range before {
			found = found || k[0] == pfx
		}
		if !found {
			t.Errorf("before pruning, job %d has no record under %#x: the test does not cover that table", id, pfx)
		}
	}
	n.advanceTo(due[0] + 1)
	if got := recordsOf(n.tree, id); len(got) != 0 {
		t.Fatalf("after pruning, job %d keeps %d records", id, len(got))
	}
	g := finetune.Game{Job: id}
	n.refused("a late checkpoint opening", func(k *Keeper) error {
		return k.OpenCheckpoints(prov1, &finetune.MsgOpenCheckpoints{Job: g.Job})
	}, types.ErrUnknownJob, "was pruned")
	n.refused("a late game vote", func(k *Keeper) error {
		return k.SealGameVote(n.validators[0], &finetune.MsgSealGameVote{Job: id, Commitment: hashOf("v")})
	}, types.ErrUnknownJob, "was pruned")
}
