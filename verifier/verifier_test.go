package verifier

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

func addr(name string) types.Address {
	h := sha256.Sum256([]byte(name))
	return types.BytesToAddress(h[:20])
}

func hash(name string) types.Hash { return sha256.Sum256([]byte(name)) }

var (
	p1, p2, p3 = addr("p1"), addr("p2"), addr("p3")
	result     = hash("result")
)

func salt(p types.Address) types.Hash { return sha256.Sum256(append([]byte("salt"), p[:]...)) }

// dump is every key and value in r, in order.
func dump(r store.Reader) string {
	var b strings.Builder
	r.Iterate(nil, nil, func(k, v []byte) bool {
		fmt.Fprintf(&b, "%x=%x\n", k, v)
		return false
	})
	return b.String()
}

// newTask stores job 1 stage 0, assigned to providers, commits until
// height 10 and reveals until 20.
func newTask(providers ...types.Address) (Keeper, *store.Tree) {
	tree := store.NewMemTree()
	k := NewKeeper(tree)
	t := &Task{Status: TaskExecuting, CommitDeadline: 10, RevealDeadline: 20}
	for _, p := range providers {
		t.Slots = append(t.Slots, Slot{Provider: p})
	}
	k.SetTask(1, 0, t)
	return k, tree
}

func commit(t *testing.T, k Keeper, p types.Address, res types.Hash, h uint64) *Task {
	t.Helper()
	task, err := k.Commit(1, 0, p, ResultCommitment(res, salt(p), p), h)
	if err != nil {
		t.Fatalf("commit by %s at %d: %v", p, h, err)
	}
	return task
}

// refused checks that op fails with want, saying text, and writes nothing.
func refused(t *testing.T, tree *store.Tree, what string, op func() error, want error, text string) {
	t.Helper()
	before := dump(tree)
	err := op()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
	if !strings.Contains(err.Error(), text) {
		t.Errorf("%s: error %q does not say %q", what, err, text)
	}
	if dump(tree) != before {
		t.Errorf("%s: refused, yet the state changed", what)
	}
}

func TestResultCommitmentBindsEveryInput(t *testing.T) {
	base := ResultCommitment(result, salt(p1), p1)
	if base != ResultCommitment(result, salt(p1), p1) {
		t.Fatal("not deterministic")
	}
	for name, c := range map[string]types.Hash{
		"result":   ResultCommitment(hash("other"), salt(p1), p1),
		"salt":     ResultCommitment(result, salt(p2), p1),
		"provider": ResultCommitment(result, salt(p1), p2),
	} {
		if c == base {
			t.Errorf("changing the %s does not change the commitment", name)
		}
	}
}

func TestCommitRules(t *testing.T) {
	k, tree := newTask(p1, p2)
	c := ResultCommitment(result, salt(p1), p1)
	refused(t, tree, "a task that does not exist", func() error { _, err := k.Commit(2, 0, p1, c, 5); return err }, types.ErrUnknownJob, "job 2 stage 0 has no task")
	refused(t, tree, "another stage", func() error { _, err := k.Commit(1, 1, p1, c, 5); return err }, types.ErrUnknownJob, "job 1 stage 1")
	refused(t, tree, "not assigned", func() error { _, err := k.Commit(1, 0, p3, c, 5); return err }, types.ErrUnauthorized, "is not assigned to job 1 stage 0")
	refused(t, tree, "empty commitment", func() error { _, err := k.Commit(1, 0, p1, types.Hash{}, 5); return err }, types.ErrInvalidMsg, "empty commitment")
	refused(t, tree, "after the deadline", func() error { _, err := k.Commit(1, 0, p1, c, 11); return err }, types.ErrWrongPhase, "closed at height 10 (now 11)")
	task := commit(t, k, p1, result, 10) // the last height is in time
	if !task.Slots[0].Committed || task.Slots[0].Commitment != c || task.Slots[1].Committed {
		t.Fatalf("slots after p1's commit: %+v", task.Slots)
	}
	if task.AllCommitted() {
		t.Error("AllCommitted with p2 outstanding")
	}
	refused(t, tree, "commit twice", func() error { _, err := k.Commit(1, 0, p1, hash("x"), 10); return err }, types.ErrDuplicate, "already committed")
	if stored, _ := k.GetTask(1, 0); stored.Slots[0].Commitment != c {
		t.Error("the stored commitment is not p1's first")
	}

	// Not executing: nothing is taken.
	for _, st := range []TaskStatus{TaskDisputed, TaskSettled} {
		k2, tree2 := newTask(p1, p2)
		tk, _ := k2.GetTask(1, 0)
		tk.Status = st
		k2.SetTask(1, 0, tk)
		refused(t, tree2, "commit to a "+st.String()+" task", func() error { _, err := k2.Commit(1, 0, p1, c, 5); return err }, types.ErrWrongPhase, "is "+st.String())
	}

	// A no-show's slot is dead: it cannot commit, and it does not hold up
	// the others; its replacement holds a new slot.
	k3, tree3 := newTask(p1, p2)
	tk, _ := k3.GetTask(1, 0)
	tk.Slots[1].NoShow = true
	tk.Slots = append(tk.Slots, Slot{Provider: p3})
	k3.SetTask(1, 0, tk)
	refused(t, tree3, "commit by a no-show", func() error { _, err := k3.Commit(1, 0, p2, c, 5); return err }, types.ErrUnauthorized, "is not assigned")
	commit(t, k3, p1, result, 5)
	if tk := commit(t, k3, p3, result, 5); !tk.AllCommitted() || !tk.Assigned(p2) || tk.SlotOf(p2) != -1 {
		t.Errorf("with the no-show's replacement committed: AllCommitted %v, Assigned(no-show) %v, SlotOf(no-show) %d",
			tk.AllCommitted(), tk.Assigned(p2), tk.SlotOf(p2))
	}
}

// TestWaitingTask: a waiting pipeline stage takes no commitment and no
// reveal, whatever the height, and says which stage it waits on.
func TestWaitingTask(t *testing.T) {
	tree := store.NewMemTree()
	k := NewKeeper(tree)
	k.SetTask(7, 2, &Task{Status: TaskWaiting, Slots: []Slot{{Provider: p1}, {Provider: p2}}})
	k.SetTask(7, 0, &Task{Status: TaskWaiting, Slots: []Slot{{Provider: p1}}})
	c := ResultCommitment(result, salt(p1), p1)
	for _, h := range []uint64{0, 5, 1 << 40} {
		refused(t, tree, fmt.Sprintf("commit at %d", h), func() error { _, err := k.Commit(7, 2, p1, c, h); return err },
			types.ErrWrongPhase, "job 7 stage 2 opens when stage 1 settles; commit after that")
		refused(t, tree, fmt.Sprintf("reveal at %d", h), func() error { _, err := k.Reveal(7, 2, p1, result, salt(p1), h); return err },
			types.ErrWrongPhase, "job 7 stage 2 opens when stage 1 settles; commit and reveal after that")
	}
	refused(t, tree, "commit by someone not assigned", func() error { _, err := k.Commit(7, 2, p3, c, 5); return err },
		types.ErrWrongPhase, "opens when stage 1 settles")
	refused(t, tree, "a waiting stage 0", func() error { _, err := k.Commit(7, 0, p1, c, 5); return err },
		types.ErrWrongPhase, "job 7 stage 0 is waiting")
	if got := TaskWaiting.String(); got != "waiting" || TaskWaiting != 4 {
		t.Errorf("TaskWaiting = %d %q, want 4 \"waiting\"", TaskWaiting, got)
	}
	// Opened, the same slot commits.
	tk, _ := k.GetTask(7, 2)
	tk.Status, tk.CommitDeadline, tk.RevealDeadline = TaskExecuting, 10, 20
	k.SetTask(7, 2, tk)
	if _, err := k.Commit(7, 2, p1, c, 5); err != nil {
		t.Fatalf("commit once open: %v", err)
	}
}

func TestRevealRules(t *testing.T) {
	k, tree := newTask(p1, p2, p3)
	reveal := func(p types.Address, res, s types.Hash, h uint64) func() error {
		return func() error { _, err := k.Reveal(1, 0, p, res, s, h); return err }
	}
	commit(t, k, p1, result, 3)
	refused(t, tree, "reveal before committing", reveal(p2, result, salt(p2), 4), types.ErrWrongPhase, "has not committed")
	commit(t, k, p2, result, 4)
	// p3 has not committed: a reveal now would show it the answer.
	refused(t, tree, "reveal before all committed", reveal(p1, result, salt(p1), 5), types.ErrWrongPhase, "reveals open when every provider has committed or after height 10")
	refused(t, tree, "reveal at the commit deadline, one missing", reveal(p1, result, salt(p1), 10), types.ErrWrongPhase, "reveals open")
	// A lazy p3 copies p1's commitment: the chain takes it (it cannot tell) ...
	tk, _ := k.GetTask(1, 0)
	if _, err := k.Commit(1, 0, p3, tk.Slots[0].Commitment, 6); err != nil {
		t.Fatal(err)
	}
	tk, err := k.Reveal(1, 0, p1, result, salt(p1), 7)
	if err != nil {
		t.Fatalf("reveal once all committed: %v", err)
	}
	if !tk.Slots[0].Revealed || tk.Slots[0].Result != result || tk.AllRevealed() {
		t.Fatalf("after p1's reveal: %+v", tk.Slots)
	}
	// ... but even with p1's result and salt public it cannot open it.
	refused(t, tree, "copied commitment", reveal(p3, result, salt(p1), 7), types.ErrCommitMismatch, "is not the commitment")
	refused(t, tree, "wrong result", reveal(p2, hash("wrong"), salt(p2), 7), types.ErrCommitMismatch, "is not the commitment")
	refused(t, tree, "wrong salt", reveal(p2, result, salt(p1), 7), types.ErrCommitMismatch, "is not the commitment")
	refused(t, tree, "reveal twice", reveal(p1, result, salt(p1), 8), types.ErrDuplicate, "already revealed")
	refused(t, tree, "not assigned", reveal(addr("p4"), result, salt(p1), 8), types.ErrUnauthorized, "is not assigned")
	refused(t, tree, "no task", func() error { _, err := k.Reveal(9, 0, p1, result, salt(p1), 8); return err }, types.ErrUnknownJob, "has no task")
	refused(t, tree, "after the reveal deadline", reveal(p2, result, salt(p2), 21), types.ErrWrongPhase, "closed at height 20 (now 21)")
	if tk, err = k.Reveal(1, 0, p2, result, salt(p2), 20); err != nil { // the last height is in time
		t.Fatal(err)
	}
	if got := tk.Revealed(); len(got) != 1 || got[0] != result {
		t.Errorf("Revealed() = %x, want the one result", got)
	}

	// After the commit deadline reveals open even with a slot missing.
	k2, _ := newTask(p1, p2)
	commit(t, k2, p1, result, 3)
	if _, err := k2.Reveal(1, 0, p1, result, salt(p1), 11); err != nil {
		t.Errorf("reveal after the commit deadline with p2 missing: %v", err)
	}
}

func TestRevealedDistinctInSlotOrder(t *testing.T) {
	tk := &Task{Slots: []Slot{
		{Provider: p1, Revealed: true, Result: hash("b")},
		{Provider: p2, Revealed: true, Result: hash("a")},
		{Provider: p3, Revealed: true, Result: hash("b")},
		{Provider: addr("p4"), Revealed: true, Result: hash("c"), NoShow: true}, // dead slots do not count
		{Provider: addr("p5"), Committed: true},
	}}
	got := tk.Revealed()
	if len(got) != 2 || got[0] != hash("b") || got[1] != hash("a") {
		t.Errorf("Revealed() = %x, want b then a", got)
	}
	if tk.AllRevealed() {
		t.Error("AllRevealed with p5 outstanding")
	}
}

func TestTally(t *testing.T) {
	v := []types.Address{addr("v0"), addr("v1"), addr("v2"), addr("v3")}
	x, y := hash("x"), hash("y")
	cases := []struct {
		name   string
		powers []int64 // of v0..v3
		total  int64
		votes  []types.Hash // of v0.., zero: no vote
		want   types.Hash
		ok     bool
	}{
		{name: "exactly two thirds is not enough", powers: []int64{100, 100, 100}, total: 300, votes: []types.Hash{x, x}},
		{name: "just above two thirds", powers: []int64{100, 101, 99}, total: 300, votes: []types.Hash{x, x}, want: x, ok: true},
		{name: "just below", powers: []int64{100, 99, 101}, total: 300, votes: []types.Hash{x, x}},
		{name: "three of four equal", powers: []int64{1, 1, 1, 1}, total: 4, votes: []types.Hash{x, x, x}, want: x, ok: true},
		{name: "two of three equal", powers: []int64{1, 1, 1}, total: 3, votes: []types.Hash{x, x}},
		{name: "split", powers: []int64{1, 1, 1, 1}, total: 4, votes: []types.Hash{x, y, x, y}},
		{name: "the other side wins", powers: []int64{1, 5, 5, 5}, total: 16, votes: []types.Hash{x, y, y, y}, want: y, ok: true},
		{name: "silent power counts against", powers: []int64{3, 3, 4}, total: 10, votes: []types.Hash{x, x}},
		{name: "zero-power votes count nothing", powers: []int64{0, 0, 0, 1}, total: 1, votes: []types.Hash{x, x, x}},
		{name: "no power at all", powers: []int64{0, 0}, total: 0, votes: []types.Hash{x, x}},
		{name: "no votes", powers: []int64{1}, total: 1},
		{name: "large powers do not overflow", powers: []int64{1 << 59, 1 << 59, 1 << 59}, total: 3 << 59, votes: []types.Hash{x, x, x}, want: x, ok: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, _ := newTask(p1, p2)
			for i, h := range tc.votes {
				if h == (types.Hash{}) {
					continue
				}
				if err := k.RecordVote(1, 0, v[i], h); err != nil {
					t.Fatal(err)
				}
			}
			power := func(a types.Address) int64 {
				for i := range tc.powers {
					if v[i] == a {
						return tc.powers[i]
					}
				}
				return 0
			}
			got, ok := k.Tally(1, 0, power, tc.total)
			if ok != tc.ok || got != tc.want {
				t.Errorf("Tally = %x, %v; want %x, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestVotes(t *testing.T) {
	k, tree := newTask(p1, p2)
	v1, v2 := addr("v1"), addr("v2")
	if err := k.RecordVote(1, 0, v2, hash("x")); err != nil {
		t.Fatal(err)
	}
	if err := k.RecordVote(1, 0, v1, hash("y")); err != nil {
		t.Fatal(err)
	}
	refused(t, tree, "vote twice", func() error { return k.RecordVote(1, 0, v1, hash("x")) }, types.ErrDuplicate, "already voted on job 1 stage 0")
	if err := k.RecordVote(1, 1, v1, hash("x")); err != nil { // another stage is another dispute
		t.Fatal(err)
	}
	votes := k.Votes(1, 0)
	first, second := v1, v2
	if string(v2[:]) < string(v1[:]) {
		first, second = v2, v1
	}
	if len(votes) != 2 || votes[0].Validator != first || votes[1].Validator != second {
		t.Fatalf("Votes = %+v, want two in address order", votes)
	}
	for _, vt := range votes {
		want := hash("x")
		if vt.Validator == v1 {
			want = hash("y")
		}
		if vt.Result != want {
			t.Errorf("%s voted %x, want %x", vt.Validator, vt.Result, want)
		}
	}
	k.DeleteTask(1, 0)
	if _, ok := k.GetTask(1, 0); ok || len(k.Votes(1, 0)) != 0 {
		t.Error("DeleteTask left the task or its votes")
	}
	if len(k.Votes(1, 1)) != 1 {
		t.Error("DeleteTask removed another stage's votes")
	}
}

func TestReputationScore(t *testing.T) {
	cases := []struct {
		name string
		r    Reputation
		want uint64
	}{
		{"new", Reputation{}, 500},
		{"one agreed", Reputation{Done: 1, Agreed: 1}, 666},
		{"eight agreed", Reputation{Done: 8, Agreed: 8}, 900},
		{"one done, not agreed", Reputation{Done: 1}, 333},
		{"one lost", Reputation{Done: 1, Lost: 1}, 142},
		{"one no-show", Reputation{NoShows: 1}, 200},
		{"agreed above done is capped", Reputation{Agreed: 5}, MaxScore},
	}
	for _, tc := range cases {
		if got := tc.r.Score(); got != tc.want {
			t.Errorf("%s: Score(%+v) = %d, want %d", tc.name, tc.r, got, tc.want)
		}
	}

	// Over many records: the score stays in 0..1000; one more agreed
	// result never lowers it, one more lost dispute or no-show never
	// raises it; a long clean record approaches 1000.
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20_000; i++ {
		done := uint64(rng.Int63n(1 << 30))
		r := Reputation{Done: done, Agreed: uint64(rng.Int63n(int64(done) + 1)), Lost: uint64(rng.Int63n(1 << 20)), NoShows: uint64(rng.Int63n(1 << 20))}
		if i%4 == 0 {
			r.Lost, r.NoShows = 0, 0
		}
		s := r.Score()
		if s > MaxScore {
			t.Fatalf("Score(%+v) = %d > %d", r, s, MaxScore)
		}
		agreed := r
		agreed.Done++
		agreed.Agreed++
		if got := agreed.Score(); got < s {
			t.Fatalf("one more agreed result lowers %+v from %d to %d", r, s, got)
		}
		if r.Agreed < r.Done {
			more := r
			more.Agreed++ // a done result turns out agreed
			if got := more.Score(); got < s {
				t.Fatalf("more agreed of the same done lowers %+v from %d to %d", r, s, got)
			}
		}
		lost := r
		lost.Done++
		lost.Lost++
		if got := lost.Score(); got > s {
			t.Fatalf("a lost dispute raises %+v from %d to %d", r, s, got)
		}
		noShow := r
		noShow.NoShows++
		if got := noShow.Score(); got > s {
			t.Fatalf("a no-show raises %+v from %d to %d", r, s, got)
		}
	}
	clean := Reputation{Done: 1_000_000, Agreed: 1_000_000}
	if s := clean.Score(); s != 999 {
		t.Errorf("a million agreed results score %d, want 999", s)
	}
	if s := (Reputation{Done: 1_000_000, Lost: 1_000_000}).Score(); s != 0 {
		t.Errorf("a million lost disputes score %d, want 0", s)
	}
}

func TestReputationStore(t *testing.T) {
	k := NewKeeper(store.NewMemTree())
	if r := k.GetReputation(p1); r != (Reputation{}) {
		t.Fatalf("unknown provider's reputation %+v, want zero", r)
	}
	k.UpdateReputation(p1, func(r *Reputation) { r.Done++; r.Agreed++ })
	got := k.UpdateReputation(p1, func(r *Reputation) { r.Done++; r.NoShows++ })
	want := Reputation{Done: 2, Agreed: 1, NoShows: 1}
	if got != want || k.GetReputation(p1) != want {
		t.Errorf("reputation %+v (stored %+v), want %+v", got, k.GetReputation(p1), want)
	}
	if r := k.GetReputation(p2); r != (Reputation{}) {
		t.Errorf("p2's reputation changed with p1's: %+v", r)
	}
}

func TestMsgRoundTrips(t *testing.T) {
	c := &MsgCommitResult{Job: 7, Stage: 2, Commitment: hash("c")}
	if got, err := DecodeMsgCommitResult(c.Raw().Data); err != nil || *got != *c {
		t.Errorf("commit-result round trip: %+v, %v", got, err)
	}
	if _, err := DecodeMsgCommitResult((&MsgCommitResult{Job: 7}).Raw().Data); !errors.Is(err, types.ErrInvalidMsg) {
		t.Errorf("empty commitment decoded: %v", err)
	}
	v := &MsgVoteDispute{Job: 7, Stage: 2, Result: hash("r")}
	if got, err := DecodeMsgVoteDispute(v.Raw().Data); err != nil || *got != *v {
		t.Errorf("vote-dispute round trip: %+v, %v", got, err)
	}
	if _, err := DecodeMsgVoteDispute((&MsgVoteDispute{Job: 7}).Raw().Data); !errors.Is(err, types.ErrInvalidMsg) {
		t.Errorf("empty vote decoded: %v", err)
	}
	r := &MsgRevealResult{Job: 7, Stage: 2, Result: hash("r"), Salt: hash("s")}
	if got, err := DecodeMsgRevealResult(r.Raw().Data); err != nil || *got != *r {
		t.Errorf("reveal-result round trip: %+v, %v", got, err)
	}
	if _, err := DecodeMsgRevealResult(append(r.Raw().Data, 0)); !errors.Is(err, types.ErrInvalidMsg) {
		t.Errorf("trailing byte decoded: %v", err)
	}
}
