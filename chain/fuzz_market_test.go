package chain

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

// FuzzMarketMsgs drives the market, verifier and staking handlers with
// operation sequences read from the fuzz input, on a chain that starts with
// a validator ("val"), two registered and bonded providers ("bob",
// "carol") and an auction job (job 1, posted by "alice": two stages, r = 2,
// cap 10 oGPU, two-block bid and reveal windows, three-block execute and
// verify windows), all set up with real transactions.
//
// Each operation either advances blocks or builds a transaction (signer,
// message type and fields from the input; bid and result commitments are
// computed for the known jobs, so reveals can match) and runs it through
// CheckTx. Checked:
//
//   - nothing panics, and the harness's invariants (supply, stake, exact job
//     escrow) hold after every block;
//   - every refusal, in CheckTx and in FinalizeBlock, has a registered code
//     (never ErrInternal's 999) and a log;
//   - the transactions CheckTx admitted all succeed, in order, in the block
//     that follows (CheckTx sees exactly what that block will);
//   - a transaction CheckTx refuses changes nothing even if a proposer puts
//     it in a block anyway: the block with it (on a copy of the state) ends
//     with the same state as the block without it (on another copy), except
//     the sender's fee and nonce where the refusal came from a message (the
//     fee then moves, through the fee pool, to the validators).
func FuzzMarketMsgs(f *testing.F) {
	for _, s := range fmSeeds() {
		f.Add(s.in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fmRun(t, in)
	})
}

// The actors of the fuzzed chain, picked by index.
var fmActors = []string{"alice", "bob", "carol", "dave", "val", "eve"}

const (
	fmAlice = iota // client of job 1
	fmBob          // provider
	fmCarol        // provider
	fmDave         // funded, not a provider
	fmVal          // operator of the only validator, funded
	fmEve          // no funds at all
)

// Operation kinds: the first byte of an operation, modulo fmNumOps.
const (
	fmOpAdvance = iota
	fmOpCommitBid
	fmOpRevealBid
	fmOpCommitResult
	fmOpRevealResult
	fmOpVote
	fmOpPostJob
	fmOpCancelJob
	fmOpClaim
	fmOpProvider
	fmOpUnjailProvider
	fmOpBond
	fmOpSend
	fmOpValidator
	fmOpRevealCanary
	fmOpReportInput
	fmOpRaw
	fmNumOps
)

const (
	fmMaxOps    = 64 // operations read from one input
	fmMaxBlocks = 40 // blocks after the setup
	fmMaxForks  = 16 // refused transactions replayed in a block per input
)

var (
	fmPrices  = []*uint256.Int{uint256.NewInt(1), types.OGPU(1), types.OGPU(3), types.OGPU(5), types.OGPU(8), types.OGPU(10), types.OGPU(11)}
	fmAmounts = []*uint256.Int{uint256.NewInt(1), types.OGPU(1), types.OGPU(50), types.OGPU(100), types.OGPU(200), types.OGPU(5000), types.OGPU(400)}
	fmResults = []types.Hash{fmHash("result 0"), fmHash("result 1"), fmHash("result 2")}
	// fmVotes are what a vote may open to: a result, an input check's
	// answers, or abstain.
	fmVotes = append(append([]types.Hash{}, fmResults...), verifier.InputAvailable, verifier.InputBad, verifier.Abstain)
	// fmCanarySalt is the salt of every canary commitment the fuzzer posts.
	fmCanarySalt = fmHash("canary salt")
	fmInfos      = []market.ProviderInfo{
		{PeerID: "peer-h100", Attributes: []string{"gpu/vendor/nvidia/model/h100/ram/80Gi", "ram/256Gi"}, Runtimes: []string{"llama.cpp"}, Class: "cuda"},
		{PeerID: "peer-mi300", Attributes: []string{"gpu/vendor/amd/model/mi300/ram/192Gi"}, Runtimes: []string{"llama.cpp"}, Class: "rocm"},
		{PeerID: "peer-t4", Attributes: []string{"gpu/vendor/nvidia/model/t4/ram/16Gi"}, Runtimes: []string{"ckks"}, Class: "cuda"},
	}
	fmReqs = []market.Requirements{
		{MinStake: new(uint256.Int)},
		{MinStake: new(uint256.Int), Attributes: []string{"gpu/vendor/nvidia"}, Runtime: "llama.cpp"},
		{MinStake: new(uint256.Int), Attributes: []string{"gpu/*/*/*/*/ram>=40Gi"}},
		{MinStake: types.OGPU(150)},
		{MinStake: new(uint256.Int), MinReputation: 600},
		{MinStake: new(uint256.Int), Class: "rocm"},
	}
)

func fmHash(s string) types.Hash { return types.Hash(types.TxHash([]byte(s))) }

// fmJob1 is the job posted in the setup.
func fmJob1() *market.MsgPostJob {
	return &market.MsgPostJob{
		Kind: market.KindInference, Mode: market.ModeAuction, Model: fmHash("model"), ModelSize: 1 << 30,
		Stages: 2, Redundancy: 2, MaxPrice: types.OGPU(10), Req: fmReqs[1], Input: fmHash("input"),
		Windows: market.Windows{Bid: 2, Reveal: 2, Execute: 3, Verify: 3},
		Seal:    fmHash("job 1 seal"),
	}
}

// fmCanarySeal is the seal of a canary of val's with answer fmResults[0]
// at every one of its stages.
func fmCanarySeal(stages int) ([]types.Hash, types.Hash) {
	hashes := make([]types.Hash, stages)
	for i := range hashes {
		hashes[i] = verifier.CanaryStageHash(fmResults[0], fmCanarySalt)
	}
	return hashes, verifier.CanarySeal(addrOf("val"), hashes)
}

func fmGenesis() *genesis.Doc {
	d := testGenesis()
	for _, n := range []string{"dave", "val"} {
		if err := d.AddAccount(addrOf(n), types.OGPU(1000)); err != nil {
			panic(err)
		}
	}
	d.Params.Market.DisputeBlocks = 3
	d.Params.Market.ProviderJailBlocks = 4
	d.Params.Market.MaxJobBlocks = 40
	d.Params.Staking.UnbondingBlocks = 50
	d.Params.Staking.ValidatorJailBlocks = 4
	return d
}

var fmSetup = sync.OnceValues(func() (map[string]*ecdsa.PrivateKey, [][][]byte) {
	keys := map[string]*ecdsa.PrivateKey{}
	for _, n := range fmActors {
		keys[n] = testKey(n)
	}
	sign := func(name string, nonce uint64, msgs ...types.RawMsg) []byte {
		tx := &types.Tx{Body: types.TxBody{ChainID: testChainID, Nonce: nonce, Fee: types.OGPU(1), Msgs: msgs}}
		if err := tx.Sign(keys[name]); err != nil {
			panic(err)
		}
		bz, err := tx.Encode()
		if err != nil {
			panic(err)
		}
		return bz
	}
	carolInfo := fmInfos[0]
	carolInfo.PeerID = "peer-h100-b"
	blocks := [][][]byte{
		{
			// 400 oGPU backs 20 oGPU of open slots (market/deterrence.go:
			// price × 20 at stake), both stages of job 1 at their prices.
			sign("bob", 0, (&market.MsgRegisterProvider{Info: fmInfos[0]}).Raw(), (&escrow.MsgBond{Amount: types.OGPU(400)}).Raw()),
			sign("carol", 0, (&market.MsgRegisterProvider{Info: carolInfo}).Raw(), (&escrow.MsgBond{Amount: types.OGPU(400)}).Raw()),
		},
		{sign("alice", 0, fmJob1().Raw())},
	}
	return keys, blocks
})

// fmReader hands out the fuzz input a byte at a time, zeros once it is
// used up.
type fmReader struct {
	in  []byte
	pos int
}

func (r *fmReader) next() byte {
	r.pos++
	if r.pos > len(r.in) {
		return 0
	}
	return r.in[r.pos-1]
}

func (r *fmReader) done() bool { return r.pos >= len(r.in) }

type fmBidKey struct {
	job    uint64
	stage  uint16
	signer string
}

type fmOpening struct {
	price  *uint256.Int
	result types.Hash
	salt   types.Hash
}

type fmState struct {
	t       *testing.T
	h       *harness
	r       *fmReader
	keys    map[string]*ecdsa.PrivateKey
	pending [][]byte
	blocks  int
	forks   int
	// codes are CheckTx's codes, one per transaction submitted.
	codes []uint32
	// bids and results remember what an admitted commitment opens to, so
	// that a reveal can match it. Only looked up.
	bids    map[fmBidKey]fmOpening
	results map[fmBidKey]fmOpening
}

func fmRun(t *testing.T, in []byte) *fmState {
	keys, setup := fmSetup()
	h := newHarness(t, store.NewMemTree(), fmGenesis())
	for _, blk := range setup {
		for i, res := range h.block(blk...) {
			if res.Code != 0 {
				t.Fatalf("setup block %d tx %d: code %d %s", h.height, i, res.Code, res.Log)
			}
		}
	}
	h.nonces["alice"], h.nonces["bob"], h.nonces["carol"] = 1, 1, 1
	s := &fmState{t: t, h: h, r: &fmReader{in: in}, keys: keys, bids: map[fmBidKey]fmOpening{}, results: map[fmBidKey]fmOpening{}}
	for ops := 0; ops < fmMaxOps && !s.r.done() && s.blocks < fmMaxBlocks; ops++ {
		kind := int(s.r.next()) % fmNumOps
		if kind == fmOpAdvance {
			s.advance(1 + int(s.r.next())%4)
			continue
		}
		signer := fmActors[int(s.r.next())%len(fmActors)]
		flags := s.r.next()
		var msgs []types.RawMsg
		var onAccept []func()
		add := func(kind int) {
			m, f := s.msg(kind, signer)
			msgs = append(msgs, m)
			if f != nil {
				onAccept = append(onAccept, f)
			}
		}
		add(kind)
		if flags&1 != 0 { // a second message in the same transaction
			if k := int(s.r.next()) % fmNumOps; k != fmOpAdvance {
				add(k)
			} else {
				add(fmOpRaw)
			}
		}
		s.submit(signer, msgs, onAccept)
	}
	s.advance(1)
	s.queries()
	return s
}

func (s *fmState) job() uint64   { return uint64(s.r.next() % 4) }
func (s *fmState) stage() uint16 { return uint16(s.r.next() % 3) }

func (s *fmState) pickAmount() *uint256.Int { return fmAmounts[int(s.r.next())%len(fmAmounts)] }

// msg reads one message of the given kind from the input. The function it
// returns, if any, runs when CheckTx admits the transaction.
func (s *fmState) msg(kind int, signer string) (types.RawMsg, func()) {
	from := addrOf(signer)
	switch kind {
	case fmOpCommitBid:
		job, stage := s.job(), s.stage()
		price, salt, tweak := fmPrices[int(s.r.next())%len(fmPrices)], fmHash(fmt.Sprint("bid salt ", s.r.next())), s.r.next()
		c := market.BidCommitment(job, stage, price, salt, from)
		switch tweak % 8 {
		case 0: // a copy of someone else's sealed bid
			c = market.BidCommitment(job, stage, price, salt, addrOf(fmActors[int(tweak/8)%len(fmActors)]))
		case 1: // a commitment to nothing in particular
			c = salt
		}
		return (&market.MsgCommitBid{Job: job, Stage: stage, Commitment: c}).Raw(), func() {
			s.bids[fmBidKey{job, stage, signer}] = fmOpening{price: price, salt: salt}
		}
	case fmOpRevealBid:
		job, stage, mode := s.job(), s.stage(), s.r.next()
		price, salt := fmPrices[int(s.r.next())%len(fmPrices)], fmHash(fmt.Sprint("bid salt ", s.r.next()))
		if o, ok := s.bids[fmBidKey{job, stage, signer}]; ok && mode%4 != 0 {
			price, salt = o.price, o.salt
		}
		return (&market.MsgRevealBid{Job: job, Stage: stage, Price: price, Salt: salt}).Raw(), nil
	case fmOpCommitResult:
		job, stage := s.job(), s.stage()
		result, salt := fmResults[int(s.r.next())%len(fmResults)], fmHash(fmt.Sprint("result salt ", s.r.next()))
		return (&verifier.MsgCommitResult{Job: job, Stage: stage, Commitment: verifier.ResultCommitment(result, salt, from)}).Raw(), func() {
			s.results[fmBidKey{job, stage, signer}] = fmOpening{result: result, salt: salt}
		}
	case fmOpRevealResult:
		job, stage, mode := s.job(), s.stage(), s.r.next()
		result, salt := fmResults[int(s.r.next())%len(fmResults)], fmHash(fmt.Sprint("result salt ", s.r.next()))
		if o, ok := s.results[fmBidKey{job, stage, signer}]; ok && mode%4 != 0 {
			result, salt = o.result, o.salt
		}
		return (&verifier.MsgRevealResult{Job: job, Stage: stage, Result: result, Salt: salt}).Raw(), nil
	case fmOpVote:
		// mode%4: 0 seals a vote, 2 seals a copy of another actor's sealed
		// vote (it cannot be opened: the commitment binds its validator),
		// 1 and 3 open one.
		job, stage, mode := s.job(), s.stage(), s.r.next()
		result := fmVotes[int(s.r.next())%len(fmVotes)]
		switch mode % 4 {
		case 0:
			return (&verifier.MsgCommitVote{Job: job, Stage: stage, Commitment: verifier.VoteCommitment(job, stage, result, fmCanarySalt, from)}).Raw(), nil
		case 2:
			other := addrOf(fmActors[int(mode/4)%len(fmActors)])
			return (&verifier.MsgCommitVote{Job: job, Stage: stage, Commitment: verifier.VoteCommitment(job, stage, result, fmCanarySalt, other)}).Raw(), nil
		}
		return (&verifier.MsgVoteDispute{Job: job, Stage: stage, Result: result, Salt: fmCanarySalt}).Raw(), nil
	case fmOpReportInput:
		// reason%5: 1..3 are the reasons, 0 and 4 invalid.
		job, stage, reason := s.job(), s.stage(), s.r.next()
		return (&verifier.MsgReportInput{Job: job, Stage: stage, Reason: reason % 5}).Raw(), nil
	case fmOpPostJob:
		m := fmJob1()
		if s.r.next()%2 == 1 {
			m.Mode = market.ModePool
		}
		m.Stages = 1 + uint16(s.r.next()%3)
		switch b := s.r.next(); b % 16 {
		case 15:
			m.Redundancy = 17 // above max_redundancy
		default:
			m.Redundancy = 2 + uint16(b%2)
		}
		m.MaxPrice = fmPrices[int(s.r.next())%len(fmPrices)]
		m.Windows = market.Windows{Bid: uint64(s.r.next() % 4), Reveal: uint64(s.r.next() % 4), Execute: uint64(s.r.next() % 4), Verify: uint64(s.r.next() % 4)}
		m.Req = fmReqs[int(s.r.next())%len(fmReqs)]
		m.Seal = fmHash(fmt.Sprint("seal ", s.r.next()))
		if s.r.next()%3 == 0 {
			_, m.Seal = fmCanarySeal(int(m.Stages))
		}
		return m.Raw(), nil
	case fmOpCancelJob:
		return (&market.MsgCancelJob{Job: s.job()}).Raw(), nil
	case fmOpClaim:
		job, stage := s.job(), s.stage()
		return (&market.MsgClaimTask{Job: job, Stage: stage}).Raw(), nil
	case fmOpProvider:
		which, info := s.r.next(), fmInfos[int(s.r.next())%len(fmInfos)]
		if which%2 == 1 {
			return (&market.MsgUpdateProvider{Info: info}).Raw(), nil
		}
		return (&market.MsgRegisterProvider{Info: info}).Raw(), nil
	case fmOpUnjailProvider:
		return (&market.MsgUnjailProvider{}).Raw(), nil
	case fmOpBond:
		which, amt := s.r.next(), s.pickAmount()
		if which%2 == 1 {
			return (&escrow.MsgUnbond{Amount: amt}).Raw(), nil
		}
		return (&escrow.MsgBond{Amount: amt}).Raw(), nil
	case fmOpSend:
		to, amt := fmActors[int(s.r.next())%len(fmActors)], s.pickAmount()
		return (&escrow.MsgSend{To: addrOf(to), Amount: amt}).Raw(), nil
	case fmOpValidator:
		which, key, bond := s.r.next(), s.r.next(), s.r.next()
		if which%2 == 1 {
			return (&escrow.MsgUnjailValidator{}).Raw(), nil
		}
		bonds := []*uint256.Int{new(uint256.Int), types.OGPU(500), types.OGPU(1000)}
		// Key seed 1 is val's consensus key: taken.
		return (&escrow.MsgCreateValidator{Name: "v-" + signer, PubKey: testValKey(1 + key%3), SelfBond: bonds[int(bond)%len(bonds)]}).Raw(), nil
	case fmOpRevealCanary:
		job, stage, result, salt := s.job(), s.stage(), fmResults[int(s.r.next())%2], s.r.next()
		sl := fmCanarySalt
		if salt%2 == 1 {
			sl = fmHash(fmt.Sprint("canary salt ", salt))
		}
		hashes, _ := fmCanarySeal(1 + int(s.r.next()%3))
		return (&verifier.MsgRevealCanary{Job: job, Stage: stage, Answer: result, Salt: sl, StageHashes: hashes}).Raw(), nil
	default: // fmOpRaw: any type, any payload
		// 1 .. one past the last message type (unknown)
		typ := 1 + types.MsgType(s.r.next())%(types.MaxMsgType+1)
		data := make([]byte, int(s.r.next())%96)
		for i := range data {
			data[i] = s.r.next()
		}
		return types.RawMsg{Type: typ, Data: data}, nil
	}
}

// submit signs msgs from signer with its next nonce and runs CheckTx.
func (s *fmState) submit(signer string, msgs []types.RawMsg, onAccept []func()) {
	t := s.t
	bz := signTx(t, s.keys[signer], s.h.nonces[signer], msgs...)
	res := s.h.checkTx(bz)
	s.codes = append(s.codes, res.Code)
	if res.Code == 0 {
		s.pending = append(s.pending, bz)
		s.h.nonces[signer]++
		for _, f := range onAccept {
			f()
		}
		return
	}
	fmCheckCode(t, "CheckTx", res.Code, res.Log)
	if s.forks < fmMaxForks {
		s.forks++
		s.checkRefusalChangesNothing(signer, bz, res.Code)
	}
}

// fmCodes are the registered consensus codes a transaction may be refused
// with.
var fmCodes = map[uint32]bool{}

func init() {
	for _, e := range []*types.Error{
		types.ErrMalformedTx, types.ErrTxTooLarge, types.ErrWrongChainID, types.ErrBadSignature, types.ErrNonceUsed,
		types.ErrNonceAhead, types.ErrFeeTooLow, types.ErrInsufficientFunds, types.ErrUnknownMsg, types.ErrInvalidMsg,
		types.ErrTooManyMsgs, types.ErrNoMsgs, types.ErrUnknownJob, types.ErrWrongPhase, types.ErrNotEligible,
		types.ErrUnauthorized, types.ErrDuplicate, types.ErrCommitMismatch, types.ErrJailed, types.ErrUnknownProvider,
		types.ErrUnknownValidator, types.ErrInsufficientStake,
	} {
		fmCodes[e.Code] = true
	}
}

func fmCheckCode(t *testing.T, where string, code uint32, log string) {
	t.Helper()
	if !fmCodes[code] {
		t.Fatalf("%s: code %d is not a registered consensus code (%s)", where, code, log)
	}
	if log == "" {
		t.Fatalf("%s: code %d without a log", where, code)
	}
}

// advance finalizes n blocks, the first with the admitted transactions.
func (s *fmState) advance(n int) {
	for i := 0; i < n && s.blocks < fmMaxBlocks; i++ {
		for j, res := range s.h.block(s.pending...) {
			if res.Code != 0 {
				s.t.Fatalf("block %d: tx %d, admitted by CheckTx, failed: code %d %s", s.h.height, j, res.Code, res.Log)
			}
		}
		s.pending = nil
		s.blocks++
	}
}

// fmFork copies the committed state of tree into a new tree at the same
// version, with its own app: a second node at the same height.
func fmFork(t *testing.T, tree *store.Tree) *App {
	t.Helper()
	fork := store.NewMemTree()
	fork.SetInitialVersion(uint64(tree.Version()))
	tree.Iterate(nil, nil, func(k, v []byte) bool {
		fork.Set(bytes.Clone(k), bytes.Clone(v))
		return false
	})
	if _, v, err := fork.SaveVersion(); err != nil || v != tree.Version() {
		t.Fatalf("fork saved version %d (%v), want %d", v, err, tree.Version())
	}
	return NewApp(fork, WithInvariants())
}

func fmFinalize(t *testing.T, a *App, height int64, txs [][]byte) []*abci.ExecTxResult {
	t.Helper()
	res, err := a.FinalizeBlock(context.Background(), &abci.FinalizeBlockRequest{Height: height, Txs: txs, Time: time.Unix(0, 0)})
	if err != nil {
		t.Fatalf("fork FinalizeBlock %d: %v", height, err)
	}
	return res.TxResults
}

func fmDump(tree *store.Tree) map[string][]byte {
	out := map[string][]byte{}
	tree.Iterate(nil, nil, func(k, v []byte) bool {
		out[string(k)] = bytes.Clone(v)
		return false
	})
	return out
}

// checkRefusalChangesNothing runs the next block twice from the committed
// state, on two copies: with the admitted transactions and then bz (which
// CheckTx refused with code), and with the admitted transactions only. bz
// must get the same code, and the states may differ only by its fee and
// nonce.
func (s *fmState) checkRefusalChangesNothing(signer string, bz []byte, code uint32) {
	t := s.t
	t.Helper()
	height := s.h.height + 1
	with, without := fmFork(t, s.h.tree), fmFork(t, s.h.tree)
	resWith := fmFinalize(t, with, height, append(append([][]byte{}, s.pending...), bz))
	resWithout := fmFinalize(t, without, height, s.pending)
	for i := range s.pending {
		if resWith[i].Code != 0 || resWithout[i].Code != 0 {
			t.Fatalf("fork block %d: admitted tx %d failed: %d %s / %d %s", height, i, resWith[i].Code, resWith[i].Log, resWithout[i].Code, resWithout[i].Log)
		}
	}
	got := resWith[len(s.pending)]
	if got.Code != code {
		t.Fatalf("refused tx: CheckTx code %d, FinalizeBlock code %d (%s)", code, got.Code, got.Log)
	}
	fmCheckCode(t, "FinalizeBlock", got.Code, got.Log)

	a, b := fmDump(with.tree), fmDump(without.tree)
	from := addrOf(signer)
	var diffs []string
	for k, va := range a {
		if vb, ok := b[k]; !ok || !bytes.Equal(va, vb) {
			diffs = append(diffs, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, k)
		}
	}
	if len(diffs) == 0 {
		return // refused before the fee: nothing at all changed
	}
	// The fee was paid: the nonce moved on by one, and the fee went from
	// the sender to the fee pool and the validators, nowhere else.
	if na, nb := decodeUint64(a[string(NonceKey(from))]), decodeUint64(b[string(NonceKey(from))]); na != nb+1 {
		t.Fatalf("refused tx (code %d, %s) changed state but the nonce of %s is %d, without it %d", code, got.Log, signer, na, nb)
	}
	ek := escrow.NewKeeper(without.tree)
	amount := func(m map[string][]byte, k string) *big.Int { return new(big.Int).SetBytes(m[k]) }
	total := new(big.Int)
	for _, k := range diffs {
		key := []byte(k)
		switch {
		case bytes.Equal(key, NonceKey(from)):
			continue
		case bytes.Equal(key, escrow.FeePoolKey()):
		default:
			addr, err := escrow.ParseBalanceKey(key)
			if err != nil {
				t.Fatalf("refused tx (code %d, %s) of %s changed key %x", code, got.Log, signer, key)
			}
			if addr != from && !ek.IsValidator(addr) {
				t.Fatalf("refused tx (code %d, %s) of %s changed the balance of %s", code, got.Log, signer, addr)
			}
		}
		d := new(big.Int).Sub(amount(a, k), amount(b, k))
		// Only the sender pays. (The fee pool may also end lower: with
		// several validators, a larger pool can pay out more of an old
		// rounding remainder.)
		if d.Sign() < 0 && k != string(escrow.BalanceKey(from)) && k != string(escrow.FeePoolKey()) {
			t.Fatalf("refused tx (code %d, %s) of %s lowered key %x", code, got.Log, signer, key)
		}
		total.Add(total, d)
	}
	if total.Sign() != 0 {
		t.Fatalf("refused tx (code %d, %s) of %s created or destroyed %s base units", code, got.Log, signer, total)
	}
	fee := types.OGPU(1).ToBig()
	paid := new(big.Int).Sub(amount(b, string(escrow.BalanceKey(from))), amount(a, string(escrow.BalanceKey(from))))
	if !ek.IsValidator(from) && paid.Cmp(fee) != 0 || paid.Sign() < 0 || paid.Cmp(fee) > 0 {
		t.Fatalf("refused tx (code %d, %s) cost %s %s base units, the fee is %s", code, got.Log, signer, paid, fee)
	}
}

// queries asks the market queries about every job the input could have
// touched: none may fail with an internal error.
func (s *fmState) queries() {
	paths := []string{"/jobs", "/providers", "/validators", "/supply"}
	for job := 1; job <= 3; job++ {
		for _, p := range []string{"/job/%d", "/bids/%d", "/whynobids/%d", "/escrow/%d"} {
			paths = append(paths, fmt.Sprintf(p, job))
		}
	}
	for _, n := range fmActors {
		paths = append(paths, "/provider/"+addrOf(n).Hex(), "/stake/"+addrOf(n).Hex(), "/reputation/"+addrOf(n).Hex(), "/jobs/provider/"+addrOf(n).Hex())
	}
	for _, p := range paths {
		res, err := s.h.app.Query(context.Background(), &abci.QueryRequest{Path: p})
		if err != nil || res.Code == types.ErrInternal.Code {
			s.t.Fatalf("query %s: %v %d %s", p, err, res.GetCode(), res.GetLog())
		}
	}
}

// fmSeed writes operations in the input format of FuzzMarketMsgs.
type fmSeed struct{ b []byte }

type fmNamedSeed struct {
	name string
	in   []byte
}

func (s *fmSeed) advance(n int) *fmSeed { s.b = append(s.b, fmOpAdvance, byte(n-1)); return s }

// tx is one single-message transaction: kind, signer, flags 0, fields.
func (s *fmSeed) tx(kind, signer int, fields ...byte) *fmSeed {
	s.b = append(append(s.b, byte(kind), byte(signer), 0), fields...)
	return s
}

// Field values used by the seeds (indexes into the tables above).
const (
	fmPrice3  = 2 // 3 oGPU
	fmPrice5  = 3
	fmPrice8  = 4
	fmPrice11 = 6 // above job 1's cap
)

func (s *fmSeed) commitBid(signer, job, stage, price, salt int) *fmSeed {
	return s.tx(fmOpCommitBid, signer, byte(job), byte(stage), byte(price), byte(salt), 2)
}

func (s *fmSeed) revealBid(signer, job, stage int) *fmSeed {
	return s.tx(fmOpRevealBid, signer, byte(job), byte(stage), 1, 0, 0)
}

func (s *fmSeed) commitResult(signer, job, stage, result int) *fmSeed {
	return s.tx(fmOpCommitResult, signer, byte(job), byte(stage), byte(result), byte(signer))
}

func (s *fmSeed) revealResult(signer, job, stage int) *fmSeed {
	return s.tx(fmOpRevealResult, signer, byte(job), byte(stage), 1, 0, 0)
}

// Vote modes and what a vote opens to (indexes into fmVotes).
const (
	fmSeal      = 0
	fmOpen      = 1
	fmResult0   = 0
	fmAvailable = 3
	fmBad       = 4
)

func (s *fmSeed) vote(signer, job, stage, mode, vote int) *fmSeed {
	return s.tx(fmOpVote, signer, byte(job), byte(stage), byte(mode), byte(vote))
}

func (s *fmSeed) reportInput(signer, job, stage, reason int) *fmSeed {
	return s.tx(fmOpReportInput, signer, byte(job), byte(stage), byte(reason))
}

// fmSeeds are operation sequences through the main paths of a job's life;
// the fuzzer mutates from there.
func fmSeeds() []fmNamedSeed {
	var seeds []fmNamedSeed
	name := ""
	add := func(s *fmSeed) { seeds = append(seeds, fmNamedSeed{name, s.b}) }

	name = "auction_dispute"
	// Job 1 awarded to bob and carol; stage 0 agrees (and settles three
	// blocks later), stage 1 is disputed and val's vote, sealed then
	// opened, settles it against carol (fraud: slashed, tombstoned). Each
	// stage has two bids for two slots, so it clears at its highest
	// winning bid (AppVersion 8), not the cap: stage 0 at 8, stage 1 at 5.
	s := &fmSeed{}
	s.commitBid(fmBob, 1, 0, fmPrice5, 1).commitBid(fmCarol, 1, 0, fmPrice8, 2).
		commitBid(fmBob, 1, 1, fmPrice3, 3).commitBid(fmCarol, 1, 1, fmPrice5, 4).advance(2)
	s.revealBid(fmBob, 1, 0).revealBid(fmCarol, 1, 0).revealBid(fmBob, 1, 1).revealBid(fmCarol, 1, 1).advance(2)
	s.commitResult(fmBob, 1, 0, 0).commitResult(fmCarol, 1, 0, 0).commitResult(fmBob, 1, 1, 0).commitResult(fmCarol, 1, 1, 1).advance(1)
	s.revealResult(fmBob, 1, 0).revealResult(fmCarol, 1, 0).revealResult(fmBob, 1, 1).revealResult(fmCarol, 1, 1).advance(1)
	s.vote(fmVal, 1, 1, fmSeal, fmResult0).vote(fmVal, 1, 1, fmOpen, fmResult0).advance(1)
	s.tx(fmOpUnjailProvider, fmCarol).advance(4).tx(fmOpUnjailProvider, fmCarol)
	add(s)

	name = "no_show_backup"
	// Dave registers, bonds and bids too: carol and dave win stage 0 at
	// bob's price, bob is the backup; carol never commits her result
	// (no-show: slashed, jailed) and bob takes her slot. The bids are
	// revealed at the last height of the reveal window (dave's twice: the
	// second is refused and counts for nothing), so the close runs there,
	// and carol's first unjail comes while she is still jailed.
	s = &fmSeed{}
	s.tx(fmOpProvider, fmDave, 0, 0).tx(fmOpBond, fmDave, 0, 4)
	s.commitBid(fmBob, 1, 0, fmPrice8, 1).commitBid(fmCarol, 1, 0, fmPrice3, 2).advance(1)
	s.commitBid(fmDave, 1, 0, fmPrice5, 3).advance(2)
	s.revealBid(fmBob, 1, 0).revealBid(fmCarol, 1, 0).revealBid(fmDave, 1, 0).revealBid(fmDave, 1, 0).advance(1)
	s.commitResult(fmDave, 1, 0, 2).advance(3)
	s.commitResult(fmBob, 1, 0, 2).commitResult(fmCarol, 1, 0, 2).advance(1)
	s.revealResult(fmDave, 1, 0).revealResult(fmBob, 1, 0).advance(1)
	s.tx(fmOpUnjailProvider, fmCarol).advance(4).tx(fmOpUnjailProvider, fmCarol).advance(1)
	add(s)

	name = "bid_refusals"
	// Refusals on job 1: a reveal not matching the sealed bid, a price over
	// the cap, a bid from the client, from a non-provider, a copied
	// commitment, a cancel by someone else, then the client cancels.
	s = &fmSeed{}
	s.commitBid(fmBob, 1, 0, fmPrice11, 1).commitBid(fmAlice, 1, 0, fmPrice3, 1).commitBid(fmDave, 1, 0, fmPrice3, 1)
	s.tx(fmOpCommitBid, fmCarol, 1, 0, fmPrice3, 1, 8) // bob's commitment, from carol
	s.commitBid(fmCarol, 1, 2, fmPrice3, 1).commitBid(fmCarol, 0, 0, fmPrice3, 1).advance(2)
	s.tx(fmOpRevealBid, fmBob, 1, 0, 0, fmPrice3, 9).revealBid(fmBob, 1, 0).revealBid(fmCarol, 1, 0)
	s.tx(fmOpCancelJob, fmBob, 1).tx(fmOpCancelJob, fmAlice, 1).advance(1).tx(fmOpCancelJob, fmAlice, 1)
	add(s)

	name = "pool"
	// A pool job from alice (job 2: mode pool, one stage, r = 2, cap 5,
	// windows 1/1/1/1, no requirements, a seal that is no canary's): its
	// claims are taken at heights 3..5. Dave registers and bonds 200 (it
	// backs 10 oGPU of open slots, market/deterrence.go); bob claims first
	// (twice: a duplicate); alice (the client) and val (no provider) are
	// refused. Carol's claim, the second, awards nothing (AppVersion 8,
	// M-M4), dave's, the third, at the window's last height is still
	// taken, and carol's second claim comes after the window. The close at
	// the end of 6, once the beacon value of 5 is final (fixed in the
	// harness: no validator registers a hash chain), draws carol and dave,
	// bob the backup: bob, the first to claim, loses the slot he would have
	// had by arrival. Carol and dave agree the next two blocks; the task
	// settles three blocks later.
	s = &fmSeed{}
	s.tx(fmOpPostJob, fmAlice, 1, 0, 0, fmPrice5, 1, 1, 1, 1, 0, 1, 1).
		tx(fmOpProvider, fmDave, 0, 0).tx(fmOpBond, fmDave, 0, 4).
		tx(fmOpClaim, fmBob, 2, 0).tx(fmOpClaim, fmBob, 2, 0).tx(fmOpClaim, fmAlice, 2, 0).tx(fmOpClaim, fmVal, 2, 0).advance(1)
	s.tx(fmOpClaim, fmCarol, 2, 0).advance(1)
	s.tx(fmOpClaim, fmDave, 2, 0).advance(1)
	s.tx(fmOpClaim, fmCarol, 2, 0).advance(1)
	s.commitResult(fmCarol, 2, 0, 1).commitResult(fmDave, 2, 0, 1).advance(1)
	s.revealResult(fmCarol, 2, 0).revealResult(fmDave, 2, 0).advance(3)
	add(s)

	name = "canary"
	// A canary job from val (one stage, r = 2, cap 8, windows 1/1/2/2, the
	// seal CanarySeal(val, [answer result 0])); alice posts one with the
	// same seal (nothing refuses a seal: the chain cannot tell). Bob and
	// carol, a cartel, both reveal result 1: the task confirms. Bob cannot
	// claim the canary (the seal is not his), val not with another answer;
	// val's claim of result 0 opens a dispute, val seals and opens its
	// vote for it: both are slashed and tombstoned, and nobody is
	// compensated (a canary's slashes are burned).
	s = &fmSeed{}
	s.tx(fmOpPostJob, fmVal, 0, 0, 0, fmPrice8, 1, 1, 2, 2, 0, 0, 0).
		tx(fmOpPostJob, fmAlice, 0, 0, 0, fmPrice8, 1, 1, 2, 2, 0, 0, 0).
		commitBid(fmBob, 2, 0, fmPrice5, 5).commitBid(fmCarol, 2, 0, fmPrice5, 6).advance(2)
	s.revealBid(fmBob, 2, 0).revealBid(fmCarol, 2, 0).advance(1)
	s.commitResult(fmBob, 2, 0, 1).commitResult(fmCarol, 2, 0, 1).advance(1)
	s.revealResult(fmBob, 2, 0).revealResult(fmCarol, 2, 0).advance(1)
	s.tx(fmOpRevealCanary, fmBob, 2, 0, 0, 0, 0).tx(fmOpRevealCanary, fmVal, 2, 0, 1, 0, 0).
		tx(fmOpRevealCanary, fmVal, 2, 0, 0, 0, 0).advance(1)
	s.vote(fmVal, 2, 0, fmSeal, fmResult0).vote(fmVal, 2, 0, fmOpen, fmResult0).advance(1)
	add(s)

	name = "input_check"
	// Job 1 awarded to bob and carol on both stages. Stage 0: both report
	// the input (dave, not assigned, cannot; a reason 0 is invalid; a second
	// report is a duplicate); val votes it bad: each is paid the price, the
	// client's wasted reservation. Stage 1: bob reports, carol commits; val
	// votes the input available: bob gets a fresh window (a second report is
	// refused), does not commit and is a no-show. Carol's result is then
	// the only one, fewer than r: since AppVersion 8 it goes to an audit
	// (the job's default short policy), which val does not vote on: it
	// ends "unresolved", carol unpaid, val slashed for the missed vote.
	// Both stages clear at their highest winning bid (two bids for two
	// slots, AppVersion 8): stage 0 at 8, stage 1 at 5.
	s = &fmSeed{}
	s.commitBid(fmBob, 1, 0, fmPrice5, 1).commitBid(fmCarol, 1, 0, fmPrice8, 2).
		commitBid(fmBob, 1, 1, fmPrice3, 3).commitBid(fmCarol, 1, 1, fmPrice5, 4).advance(2)
	s.revealBid(fmBob, 1, 0).revealBid(fmCarol, 1, 0).revealBid(fmBob, 1, 1).revealBid(fmCarol, 1, 1).advance(2)
	s.reportInput(fmBob, 1, 0, 1).reportInput(fmDave, 1, 0, 1).reportInput(fmCarol, 1, 0, 0).
		reportInput(fmBob, 1, 0, 1).reportInput(fmCarol, 1, 0, 3).
		reportInput(fmBob, 1, 1, 2).commitResult(fmCarol, 1, 1, 0).advance(1)
	s.vote(fmVal, 1, 0, fmSeal, fmBad).vote(fmVal, 1, 0, fmOpen, fmBad).
		vote(fmVal, 1, 1, fmSeal, fmAvailable).vote(fmVal, 1, 1, fmOpen, fmAvailable).advance(1)
	s.reportInput(fmBob, 1, 1, 1).advance(3)
	s.revealResult(fmCarol, 1, 1).advance(4)
	add(s)

	name = "staking"
	// Staking: dave becomes a validator (once he can pay the self-bond),
	// a taken consensus key, a self-bond under the minimum, val unbonds,
	// eve is paid and pays, an unjail of a validator not jailed, a send
	// over eve's balance; bob unbonds and updates his record in one
	// transaction, after which he may not bid.
	s = &fmSeed{}
	s.tx(fmOpValidator, fmDave, 0, 1, 2).tx(fmOpSend, fmAlice, fmDave, 4).tx(fmOpValidator, fmDave, 0, 1, 2).
		tx(fmOpValidator, fmAlice, 0, 0, 2).tx(fmOpValidator, fmCarol, 0, 2, 1).
		tx(fmOpBond, fmVal, 1, 3).tx(fmOpSend, fmBob, fmEve, 2).tx(fmOpSend, fmEve, fmBob, 0).
		tx(fmOpValidator, fmVal, 1, 0, 0).tx(fmOpSend, fmEve, fmBob, 5).advance(1)
	s.b = append(s.b, fmOpBond, fmBob, 1, 1, 6, fmOpProvider, 1, 0) // unbond all 400 and update, together
	s.commitBid(fmBob, 1, 0, fmPrice3, 1).advance(1)
	add(s)

	name = "raw"
	// Raw messages: an unknown type (one past MsgTypeRevealFinetune), a
	// truncated payload, garbage.
	s = &fmSeed{}
	s.tx(fmOpRaw, fmBob, 33, 3, 0xc1, 0x80, 0x00).tx(fmOpRaw, fmBob, 8, 2, 0xc0, 0x00).tx(fmOpRaw, fmAlice, 0, 5, 0xc4, 0x94, 1, 2, 3)
	s.tx(fmOpRaw, fmCarol, 5, 0).advance(1)
	add(s)
	return seeds
}

// The seeds do what their comments say: replayed on the chain, every
// transaction gets the code listed and the jobs end as stated. This pins the
// input format (a change to it must update the seeds) and shows that the
// fuzzer starts from deep states: awards, disputes, no-shows, canaries.
func TestFuzzMarketSeeds(t *testing.T) {
	const ok = 0
	var (
		invalid    = types.ErrInvalidMsg.Code
		unknownMsg = types.ErrUnknownMsg.Code
		funds      = types.ErrInsufficientFunds.Code
		unknownJob = types.ErrUnknownJob.Code
		phase      = types.ErrWrongPhase.Code
		eligible   = types.ErrNotEligible.Code
		unauth     = types.ErrUnauthorized.Code
		dup        = types.ErrDuplicate.Code
		mismatch   = types.ErrCommitMismatch.Code
		jailed     = types.ErrJailed.Code
		stake      = types.ErrInsufficientStake.Code
	)
	type jobEnd struct {
		id                uint64
		state             market.JobState
		paid, compensated *uint256.Int
	}
	cases := map[string]struct {
		codes      []uint32
		jobs       []jobEnd
		tombstoned []string
		check      func(t *testing.T, snap *store.Snapshot)
	}{
		"auction_dispute": {
			codes: []uint32{ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, jailed, jailed},
			// 2 × 8 for stage 0, 5 to bob for stage 1: each stage had two
			// bids for its two slots and cleared at its highest winning
			// bid (AppVersion 8; it was the cap, 10: 30 in all).
			// carol's fraud slash is half her 400 (more than the 100 at
			// risk on her 5 oGPU slot), half of it to alice.
			jobs:       []jobEnd{{1, market.JobCompleted, types.OGPU(21), types.OGPU(100)}},
			tombstoned: []string{"carol"},
		},
		"no_show_backup": {
			codes: []uint32{ok, ok, ok, ok, ok, ok, ok, ok, dup, ok, ok, unauth, ok, ok, jailed, ok},
			// carol's no-show slash is burned: no compensation.
			jobs: []jobEnd{{1, market.JobCompleted, types.OGPU(16), new(uint256.Int)}},
		},
		"bid_refusals": {
			codes: []uint32{ok, eligible, eligible, ok, invalid, unknownJob, mismatch, invalid, mismatch, unauth, ok, phase},
			jobs:  []jobEnd{{1, market.JobCancelled, new(uint256.Int), new(uint256.Int)}},
		},
		"pool": {
			codes: []uint32{ok, ok, ok, ok, dup, eligible, eligible, ok, ok, phase, ok, ok, ok, ok},
			// 2 × the fixed reward, 5, to carol and dave.
			jobs: []jobEnd{{2, market.JobCompleted, types.OGPU(10), new(uint256.Int)}},
			check: func(t *testing.T, snap *store.Snapshot) {
				// The draw, not the order of the claims (bob, carol,
				// dave), picked the winners.
				tk, ok := verifier.NewKeeper(snap).GetTask(2, 0)
				if !ok {
					t.Fatal("job 2 has no task 0")
				}
				var slots []types.Address
				for _, sl := range tk.Slots {
					slots = append(slots, sl.Provider)
				}
				if want := []types.Address{addrOf("carol"), addrOf("dave")}; !slices.Equal(slots, want) {
					t.Errorf("task 2/0 went to %v, want carol and dave %v", slots, want)
				}
				if want := []types.Address{addrOf("bob")}; !slices.Equal(tk.Backups, want) {
					t.Errorf("task 2/0 has backups %v, want bob %v", tk.Backups, want)
				}
				// The close ran at the end of 6, a block after the window:
				// commit by 6 + 1.
				if tk.CommitDeadline != 7 {
					t.Errorf("task 2/0 commit deadline %d, want 7", tk.CommitDeadline)
				}
				if tk.Outcome != "agreed" {
					t.Errorf("task 2/0 settled %q, want agreed", tk.Outcome)
				}
			},
		},
		"canary": {
			codes:      []uint32{ok, ok, ok, ok, ok, ok, ok, ok, ok, ok, mismatch, mismatch, ok, ok, ok},
			jobs:       []jobEnd{{2, market.JobCompleted, new(uint256.Int), new(uint256.Int)}},
			tombstoned: []string{"bob", "carol"},
		},
		"input_check": {
			codes: []uint32{ok, ok, ok, ok, ok, ok, ok, ok, ok, unauth, invalid, dup, ok, ok, ok, ok, ok, ok, ok, phase, ok},
			// 2 × 8 for stage 0's bad input (its highest winning bid,
			// AppVersion 8; it was the cap, 10), nothing for stage 1:
			// carol's lone result went to an audit nobody decided (it was
			// agreed and paid 10 before AppVersion 8).
			jobs: []jobEnd{{1, market.JobCompleted, types.OGPU(16), new(uint256.Int)}},
			check: func(t *testing.T, snap *store.Snapshot) {
				k := escrow.NewKeeper(snap)
				if tk, _ := verifier.NewKeeper(snap).GetTask(1, 1); tk.Outcome != "unresolved" || tk.Audit != verifier.AuditShort {
					t.Errorf("stage 1 settled %q (audit %q), want unresolved (audit %q)", tk.Outcome, tk.Audit, verifier.AuditShort)
				}
				// val missed the audit's vote: 0.1% of 10000 = 10.
				if got := k.Bonded(addrOf("val")); !got.Eq(types.OGPU(9990)) {
					t.Errorf("val has %s bonded, want 9990 oGPU", types.FormatAmount(got))
				}
				// bob's no-show after the fresh window: 2% of 400 = 8.
				if got := k.Bonded(addrOf("bob")); !got.Eq(types.OGPU(392)) {
					t.Errorf("bob has %s bonded, want 392 oGPU", types.FormatAmount(got))
				}
				if got := k.Bonded(addrOf("carol")); !got.Eq(types.OGPU(400)) {
					t.Errorf("carol has %s bonded, want 400 oGPU", types.FormatAmount(got))
				}
				if p, _ := market.GetProvider(snap, addrOf("bob")); !p.Jailed {
					t.Error("bob, a no-show in the fresh window, is not jailed")
				}
				if p, _ := market.GetProvider(snap, addrOf("carol")); p.Jailed {
					t.Error("carol, who reported bad input the validators upheld, is jailed")
				}
			},
		},
		"staking": {
			codes: []uint32{funds, ok, ok, dup, stake, ok, ok, ok, invalid, funds, ok, eligible},
			check: func(t *testing.T, snap *store.Snapshot) {
				k := escrow.NewKeeper(snap)
				if !k.IsValidator(addrOf("dave")) || k.IsValidator(addrOf("carol")) || k.IsValidator(addrOf("alice")) {
					t.Error("want dave, and neither carol nor alice, to be a validator")
				}
				if !k.Bonded(addrOf("bob")).IsZero() {
					t.Errorf("bob still has %s bonded", k.Bonded(addrOf("bob")))
				}
			},
		},
		"raw": {codes: []uint32{unknownMsg, invalid, invalid, invalid}},
	}
	seeds := fmSeeds()
	if len(seeds) != len(cases) {
		t.Fatalf("%d seeds, %d cases", len(seeds), len(cases))
	}
	for _, seed := range seeds {
		t.Run(seed.name, func(t *testing.T) {
			tc, found := cases[seed.name]
			if !found {
				t.Fatalf("no case for seed %q", seed.name)
			}
			s := fmRun(t, seed.in)
			if !slices.Equal(s.codes, tc.codes) {
				t.Errorf("CheckTx codes %v, want %v", s.codes, tc.codes)
			}
			if !s.r.done() {
				t.Errorf("input not used up: %d of %d bytes read", s.r.pos, len(seed.in))
			}
			snap, err := s.h.tree.Snapshot(0)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.jobs {
				j, ok := market.GetJob(snap, want.id)
				if !ok {
					t.Fatalf("job %d does not exist", want.id)
				}
				if j.State != want.state || !j.Paid.Eq(want.paid) || !j.Compensated.Eq(want.compensated) {
					t.Errorf("job %d: %s, paid %s, compensated %s; want %s, %s, %s", want.id, j.State,
						types.FormatAmount(j.Paid), types.FormatAmount(j.Compensated), want.state, types.FormatAmount(want.paid), types.FormatAmount(want.compensated))
				}
			}
			for _, n := range fmActors {
				p, ok := market.GetProvider(snap, addrOf(n))
				if want := slices.Contains(tc.tombstoned, n); ok && p.Tombstoned != want || !ok && want {
					t.Errorf("provider %s tombstoned = %v, want %v", n, ok && p.Tombstoned, want)
				}
			}
			if tc.check != nil {
				tc.check(t, snap)
			}
		})
	}
}
