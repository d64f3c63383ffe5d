package chain

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// txModel is what a transaction should do to a fresh testGenesis state,
// worked out from the rules rather than by running the app: the expected
// ABCI code, whether the fee is paid (the transaction is includable), and the
// balances afterwards.
type txModel struct {
	code     uint32
	feePaid  bool
	from     types.Address
	balances map[types.Address]*uint256.Int
	feePool  *uint256.Int
}

func modelTx(doc *genesis.Doc, bz []byte) txModel {
	m := txModel{balances: map[types.Address]*uint256.Int{}, feePool: doc.FeePool.Clone()}
	for _, a := range doc.Accounts {
		m.balances[a.Address] = a.Balance.Clone()
	}
	bal := func(a types.Address) *uint256.Int {
		if b, ok := m.balances[a]; ok {
			return b
		}
		return new(uint256.Int)
	}
	reject := func(e *types.Error) txModel { m.code = e.Code; return m }

	p := doc.Params
	if uint64(len(bz)) > p.MaxTxBytes {
		return reject(types.ErrTxTooLarge)
	}
	tx, err := types.DecodeTx(bz)
	if err != nil {
		return reject(types.ErrMalformedTx)
	}
	b := &tx.Body
	m.from = b.From
	switch {
	case b.ChainID != testChainID:
		return reject(types.ErrWrongChainID)
	case len(b.Msgs) == 0:
		return reject(types.ErrNoMsgs)
	case uint64(len(b.Msgs)) > p.MaxMsgs:
		return reject(types.ErrTooManyMsgs)
	}
	var sends []*escrow.MsgSend
	for _, raw := range b.Msgs {
		if raw.Type != types.MsgTypeSend {
			return reject(types.ErrUnknownMsg)
		}
		s, err := escrow.DecodeMsgSend(raw.Data)
		if err != nil {
			return reject(types.ErrInvalidMsg)
		}
		sends = append(sends, s)
	}
	if tx.VerifySignature() != nil {
		return reject(types.ErrBadSignature)
	}
	var next uint64 // every account starts at nonce 0 in testGenesis
	for _, a := range doc.Accounts {
		if a.Address == b.From {
			next = a.Nonce
		}
	}
	switch {
	case b.Nonce < next:
		return reject(types.ErrNonceUsed)
	case b.Nonce > next:
		return reject(types.ErrNonceAhead)
	}
	if b.Fee.Lt(p.RequiredFee(len(bz), MsgWorks(b.Msgs))) {
		return reject(types.ErrFeeTooLow)
	}
	if bal(b.From).Lt(b.Fee) {
		return reject(types.ErrInsufficientFunds)
	}
	m.balances[b.From] = new(uint256.Int).Sub(bal(b.From), b.Fee)
	m.feePool = new(uint256.Int).Add(m.feePool, b.Fee)
	m.feePaid = true
	// The sends apply in order, all or nothing.
	after := map[types.Address]*uint256.Int{}
	get := func(a types.Address) *uint256.Int {
		if v, ok := after[a]; ok {
			return v
		}
		return bal(a)
	}
	for _, s := range sends {
		if get(b.From).Lt(s.Amount) {
			m.code = types.ErrInsufficientFunds.Code
			return m
		}
		after[b.From] = new(uint256.Int).Sub(get(b.From), s.Amount)
		after[s.To] = new(uint256.Int).Add(get(s.To), s.Amount)
	}
	for a, v := range after {
		m.balances[a] = v
	}
	return m
}

// fuzzSeeds are transactions that reach every refusal of runTx, and valid
// ones, for a fresh testGenesis chain.
func fuzzSeeds(t testing.TB) map[string][]byte {
	alice := testKey("alice")
	valid := signTx(t, alice, 0, send("bob", types.OGPU(10)))
	sign := func(body types.TxBody) []byte {
		tx := &types.Tx{Body: body}
		if err := tx.Sign(alice); err != nil {
			t.Fatal(err)
		}
		bz, err := tx.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return bz
	}
	body := func() types.TxBody {
		return types.TxBody{ChainID: testChainID, Fee: types.OGPU(1), Msgs: []types.RawMsg{send("bob", types.OGPU(10))}}
	}
	flipped := bytes.Clone(valid)
	flipped[len(flipped)-10] ^= 0x01 // inside the signature
	tampered := bytes.Clone(valid)
	tampered[bytes.Index(tampered, types.OGPU(1).Bytes())] ^= 0x01 // the fee, after signing
	var many []types.RawMsg
	for range 33 {
		many = append(many, send("bob", uint256.NewInt(1)))
	}
	wrongChain, noMsgs, unknown, lowFee, zeroFee, memo := body(), body(), body(), body(), body(), body()
	wrongChain.ChainID = "ogpu-other"
	noMsgs.Msgs = nil
	unknown.Msgs = []types.RawMsg{{Type: 999, Data: []byte{0xc0}}}
	lowFee.Fee = uint256.NewInt(1)
	zeroFee.Fee = new(uint256.Int)
	memo.Memo = "fuzz me"
	return map[string][]byte{
		"valid":              valid,
		"valid_two_sends":    signTx(t, alice, 0, send("bob", types.OGPU(1)), send("carol", types.OGPU(2))),
		"valid_send_to_self": signTx(t, alice, 0, send("alice", types.OGPU(999))),
		"valid_memo":         sign(memo),
		"insufficient_funds": signTx(t, testKey("carol"), 0, send("bob", types.OGPU(1000))),
		"unfunded_sender":    signTx(t, testKey("dave"), 0, send("bob", types.OGPU(1))),
		"nonce_ahead":        signTx(t, alice, 1, send("bob", types.OGPU(10))),
		"zero_amount":        signTx(t, alice, 0, send("bob", new(uint256.Int))),
		"wrong_chain":        sign(wrongChain),
		"no_messages":        sign(noMsgs),
		"unknown_message":    sign(unknown),
		"fee_too_low":        sign(lowFee),
		"zero_fee":           sign(zeroFee),
		"signature_bit_flip": flipped,
		"tampered_fee":       tampered,
		"too_many_messages":  signTx(t, alice, 0, many...),
		"truncated":          valid[:len(valid)-1],
		"trailing_byte":      append(bytes.Clone(valid), 0),
		"empty":              {},
		"garbage":            []byte("\xf8\xff not a transaction"),
	}
}

// FuzzCheckTx feeds arbitrary bytes to CheckTx, the proposal checks and
// FinalizeBlock of a fresh chain (invariants on): nothing panics, the codes
// are the ones the rules give, and the state moves only for a valid
// transaction, exactly as the rules say. Seeds in testdata/fuzz/FuzzCheckTx
// and fuzzSeeds.
func FuzzCheckTx(f *testing.F) {
	seeds := fuzzSeeds(f)
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Fuzz(func(t *testing.T, bz []byte) {
		doc := testGenesis()
		want := modelTx(doc, bz)
		h := newHarness(t, store.NewMemTree(), doc)
		ctx := context.Background()

		if res := h.checkTx(bz); res.Code != want.code {
			t.Fatalf("CheckTx code %d (%s), want %d", res.Code, res.Log, want.code)
		} else if res.Code != 0 && res.Log == "" {
			t.Fatal("CheckTx refused without a log")
		}

		pp, err := h.app.ProcessProposal(ctx, &abci.ProcessProposalRequest{Txs: [][]byte{bz}, Height: 1})
		if err != nil {
			t.Fatal(err)
		}
		wellFormed := want.code != types.ErrTxTooLarge.Code && want.code != types.ErrMalformedTx.Code
		if accepted := pp.Status == abci.PROCESS_PROPOSAL_STATUS_ACCEPT; accepted != wellFormed {
			t.Fatalf("ProcessProposal accepted = %v, want %v (code %d)", accepted, wellFormed, want.code)
		}
		prep, err := h.app.PrepareProposal(ctx, &abci.PrepareProposalRequest{Txs: [][]byte{bz}, MaxTxBytes: 1 << 20, Height: 1})
		if err != nil {
			t.Fatal(err)
		}
		if included := len(prep.Txs) == 1; included != want.feePaid {
			t.Fatalf("PrepareProposal included = %v, want %v (code %d)", included, want.feePaid, want.code)
		}

		res := h.block(bz)
		if res[0].Code != want.code {
			t.Fatalf("FinalizeBlock code %d (%s), want %d", res[0].Code, res[0].Log, want.code)
		}
		if err := CheckInvariants(h.tree); err != nil {
			t.Fatal(err)
		}
		snap, err := h.tree.Snapshot(0)
		if err != nil {
			t.Fatal(err)
		}
		k := escrow.NewKeeper(snap)
		// The block's end pays the fee pool to the only validator.
		if !want.feePool.IsZero() {
			v := addrOf("val")
			old, ok := want.balances[v]
			if !ok {
				old = new(uint256.Int)
			}
			want.balances[v] = new(uint256.Int).Add(old, want.feePool)
			want.feePool = new(uint256.Int)
		}
		for a, w := range want.balances {
			if got := k.Balance(a); !got.Eq(w) {
				t.Fatalf("balance of %s = %s, want %s (code %d)", a, got.Dec(), w.Dec(), want.code)
			}
		}
		nBalances := 0
		k.IterateBalances(func(types.Address, *uint256.Int) bool { nBalances++; return false })
		nonZero := 0
		for _, w := range want.balances {
			if !w.IsZero() {
				nonZero++
			}
		}
		if nBalances != nonZero {
			t.Fatalf("%d balances stored, want %d", nBalances, nonZero)
		}
		if got := k.FeePool(); !got.Eq(want.feePool) {
			t.Fatalf("fee pool %s, want %s", got.Dec(), want.feePool.Dec())
		}
		if want.feePaid {
			if n := getNonce(snap, want.from); n != 1 {
				t.Fatalf("nonce of %s = %d after a paid transaction, want 1", want.from, n)
			}
			// Replays are refused, in the mempool and in a block.
			if res := h.checkTx(bz); res.Code != types.ErrNonceUsed.Code {
				t.Fatalf("replay CheckTx code %d (%s), want %d", res.Code, res.Log, types.ErrNonceUsed.Code)
			}
			if res := h.block(bz); res[0].Code != types.ErrNonceUsed.Code {
				t.Fatalf("replay FinalizeBlock code %d (%s), want %d", res[0].Code, res[0].Log, types.ErrNonceUsed.Code)
			}
		}
	})
}

// The seeds reach the refusals they are named after, and the model agrees
// with an explicit list of codes: the fuzz oracle is itself checked here.
func TestFuzzSeedsAndModel(t *testing.T) {
	seeds := fuzzSeeds(t)
	cases := []struct {
		name    string
		code    *types.Error // nil: accepted
		feePaid bool
	}{
		{"valid", nil, true},
		{"valid_two_sends", nil, true},
		{"valid_send_to_self", nil, true},
		{"valid_memo", nil, true},
		{"insufficient_funds", types.ErrInsufficientFunds, true},
		{"unfunded_sender", types.ErrInsufficientFunds, false},
		{"nonce_ahead", types.ErrNonceAhead, false},
		{"zero_amount", types.ErrInvalidMsg, false},
		{"wrong_chain", types.ErrWrongChainID, false},
		{"no_messages", types.ErrNoMsgs, false},
		{"too_many_messages", types.ErrTooManyMsgs, false},
		{"unknown_message", types.ErrUnknownMsg, false},
		{"fee_too_low", types.ErrFeeTooLow, false},
		{"zero_fee", types.ErrFeeTooLow, false},
		{"signature_bit_flip", types.ErrBadSignature, false},
		{"tampered_fee", types.ErrBadSignature, false},
		{"truncated", types.ErrMalformedTx, false},
		{"trailing_byte", types.ErrMalformedTx, false},
		{"empty", types.ErrMalformedTx, false},
		{"garbage", types.ErrMalformedTx, false},
	}
	if len(cases) != len(seeds) {
		t.Fatalf("%d cases for %d seeds", len(cases), len(seeds))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bz, ok := seeds[tc.name]
			if !ok {
				t.Fatalf("no seed %q", tc.name)
			}
			var code uint32
			if tc.code != nil {
				code = tc.code.Code
			}
			m := modelTx(testGenesis(), bz)
			if m.code != code || m.feePaid != tc.feePaid {
				t.Fatalf("model: code %d fee paid %v; want %d %v", m.code, m.feePaid, code, tc.feePaid)
			}
			h := newHarness(t, store.NewMemTree(), testGenesis())
			if res := h.checkTx(bz); res.Code != code {
				t.Fatalf("CheckTx: code %d (%s), want %d", res.Code, res.Log, code)
			}
		})
	}
}
