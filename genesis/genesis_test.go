package genesis

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

func addr(b byte) types.Address { return types.BytesToAddress([]byte{b}) }

func pubKey(seed byte) []byte {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)).Public().(ed25519.PublicKey)
}

// validDoc has two accounts, a fee pool, a burned amount and two validators.
func validDoc() *Doc {
	d := Default()
	d.Accounts = []Account{
		{Address: addr(1), Balance: types.OGPU(10), Nonce: 3},
		{Address: addr(2), Balance: types.OGPU(20)},
	}
	d.FeePool = types.OGPU(1)
	d.Burned = types.OGPU(2)
	d.Validators = []Validator{
		{Name: "v0", Operator: addr(1), PubKey: pubKey(1), Stake: types.OGPU(10_000)},
		{Name: "v1", Operator: addr(2), PubKey: pubKey(2), Stake: types.OGPU(5_000)},
	}
	return d
}

func TestDefaultIsValid(t *testing.T) {
	d := Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("Default().Validate(): %v", err)
	}
	reserve, err := d.BridgeReserve()
	if err != nil || !reserve.Eq(types.MaxSupply) {
		t.Fatalf("default bridge reserve = %v, %v; want the whole supply", reserve, err)
	}
	if err := validDoc().Validate(); err != nil {
		t.Fatalf("validDoc: %v", err)
	}
}

func TestValidateRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(d *Doc)
		want   string // the field the error must name
	}{
		{"unsorted accounts", func(d *Doc) { d.Accounts[0], d.Accounts[1] = d.Accounts[1], d.Accounts[0] }, "accounts[1]"},
		{"duplicate account", func(d *Doc) { d.Accounts[1].Address = d.Accounts[0].Address }, "accounts[1]"},
		{"zero address", func(d *Doc) { d.Accounts[0].Address = types.Address{} }, "accounts[0]"},
		{"missing balance", func(d *Doc) { d.Accounts[1].Balance = nil }, "accounts[1]"},
		{"over the cap", func(d *Doc) { d.Accounts[1].Balance = types.MaxSupply }, "cap"},
		{"one unit over the cap", func(d *Doc) {
			d.Accounts[1].Balance = new(uint256.Int).Sub(types.MaxSupply, types.OGPU(13))
			d.Accounts[1].Balance.AddUint64(d.Accounts[1].Balance, 1)
		}, "cap"},
		{"allocations overflow", func(d *Doc) {
			d.Accounts[0].Balance = new(uint256.Int).SetAllOne()
			d.Accounts[1].Balance = new(uint256.Int).SetAllOne()
		}, "overflow"},
		{"fee pool over the cap", func(d *Doc) { d.FeePool = types.MaxSupply }, "cap"},
		{"missing fee pool", func(d *Doc) { d.FeePool = nil }, "fee_pool"},
		{"missing burned", func(d *Doc) { d.Burned = nil }, "burned"},
		{"missing min gas price", func(d *Doc) { d.Params.MinGasPrice = nil }, "params.min_gas_price"},
		{"absurd min gas price", func(d *Doc) { d.Params.MinGasPrice = new(uint256.Int).Lsh(uint256.NewInt(1), 192) }, "params.min_gas_price"},
		{"max tx bytes too small", func(d *Doc) { d.Params.MaxTxBytes = 255 }, "params.max_tx_bytes"},
		{"max tx bytes too large", func(d *Doc) { d.Params.MaxTxBytes = 4<<20 + 1 }, "params.max_tx_bytes"},
		{"no messages allowed", func(d *Doc) { d.Params.MaxMsgs = 0 }, "params.max_msgs"},
		{"too many messages allowed", func(d *Doc) { d.Params.MaxMsgs = 1025 }, "params.max_msgs"},
		// Gas is a uint64 reported to CometBFT as an int64: gas prices
		// that make it wrap would make large transactions cheap.
		{"byte gas overflows", func(d *Doc) { d.Params.TxByteGas = 1 << 62 }, "params.tx_byte_gas"},
		{"message gas overflows", func(d *Doc) { d.Params.MsgGas = math.MaxUint64 / 2 }, "params.msg_gas"},
		{"base gas overflows", func(d *Doc) { d.Params.TxBaseGas = math.MaxUint64 }, "params.tx_base_gas"},
		{"short validator key", func(d *Doc) { d.Validators[1].PubKey = d.Validators[1].PubKey[:31] }, "validators[1]"},
		{"missing validator key", func(d *Doc) { d.Validators[0].PubKey = nil }, "validators[0]"},
		{"stake below the minimum", func(d *Doc) { d.Validators[0].Stake = types.OGPU(999) }, "validators[0]"},
		{"missing stake", func(d *Doc) { d.Validators[1].Stake = nil }, "validators[1]"},
		{"missing operator", func(d *Doc) { d.Validators[1].Operator = types.Address{} }, "validators[1]"},
		{"operator runs two validators", func(d *Doc) { d.Validators[1].Operator = addr(1) }, "validators[1]"},
		{"stakes over the cap", func(d *Doc) { d.Validators[1].Stake = types.MaxSupply }, "cap"},
		{"unbonding shorter than a job", func(d *Doc) { d.Params.Staking.UnbondingBlocks = d.Params.Market.MaxJobBlocks }, "unbonding_blocks"},
		{"zero power reduction", func(d *Doc) { d.Params.Staking.PowerReduction = new(uint256.Int) }, "power_reduction"},
		{"slash over 100%", func(d *Doc) { d.Params.Market.FraudSlashBps = 10_001 }, "params.market"},
		{"redundancy below 2", func(d *Doc) { d.Params.Market.MaxRedundancy = 1 }, "max_redundancy"},
		{"empty gen tx", func(d *Doc) { d.GenTxs = append(d.GenTxs, nil) }, "gen_txs[0]"},
		{"duplicate validator key", func(d *Doc) { d.Validators[1].PubKey = pubKey(1) }, "validators[1]"},
		// A job pruned before a dispute window could have passed: retain
		// at least dispute_blocks, or 0 (never prune).
		{"retain shorter than a dispute", func(d *Doc) { d.Params.Market.RetainBlocks = d.Params.Market.DisputeBlocks - 1 }, "params.market.retain_blocks"},
		{"retain past its bound", func(d *Doc) { d.Params.Market.RetainBlocks = MaxRetainBlocks + 1 }, "params.market.retain_blocks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := validDoc()
			tc.mutate(d)
			err := d.Validate()
			if err == nil {
				t.Fatal("Validate accepted the document")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

func TestParamsGas(t *testing.T) {
	p := DefaultParams()
	cases := []struct {
		name    string
		size, n int
		gas     uint64
	}{
		{"empty", 0, 0, 21_000},
		{"transfer", 200, 1, 21_000 + 200*16 + 9_000},
		{"largest", int(p.MaxTxBytes), int(p.MaxMsgs), 21_000 + 65536*16 + 32*9_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Gas(tc.size, make([]MsgWork, tc.n)); got != tc.gas {
				t.Fatalf("Gas = %d, want %d", got, tc.gas)
			}
			want := new(uint256.Int).Mul(uint256.NewInt(tc.gas), p.MinGasPrice)
			if got := p.RequiredFee(tc.size, make([]MsgWork, tc.n)); !got.Eq(want) {
				t.Fatalf("RequiredFee = %s, want %s", got.Dec(), want.Dec())
			}
		})
	}
}

// Params at the edge of what Validate accepts still compute every gas a
// transaction can use without wrapping: fees grow with size.
func TestLargestValidParamsDoNotWrap(t *testing.T) {
	p := DefaultParams()
	p.MaxTxBytes = 4 << 20
	p.MaxMsgs = 1024
	p.MinGasPrice = new(uint256.Int).Sub(new(uint256.Int).Lsh(uint256.NewInt(1), 192), uint256.NewInt(1))
	p.TxByteGas = math.MaxUint64
	if p.Validate() == nil {
		t.Fatalf("Validate accepts tx_byte_gas = 2^64-1 with max_tx_bytes = %d", p.MaxTxBytes)
	}
	// Find the largest byte gas Validate accepts.
	lo, hi := uint64(0), uint64(math.MaxUint64-1)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		p.TxByteGas = mid
		if p.Validate() == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	p.TxByteGas = lo
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if lo == 0 {
		t.Fatal("no byte gas is accepted")
	}
	size := int(p.MaxTxBytes)
	// A transaction can carry up to one message per byte before the
	// message limit refuses it, and its gas is computed first.
	heavy := make([]MsgWork, size)
	for i := range heavy {
		heavy[i] = MsgWork{Stages: 1 << 16, Slots: 1 << 32, Requirements: 1 << 10, Matches: 1 << 20}
	}
	if small, large := p.Gas(1, make([]MsgWork, 1)), p.Gas(size, heavy); large < small || large > math.MaxInt64 {
		t.Fatalf("gas wraps: Gas(1,1) = %d, Gas(max,max) = %d", small, large)
	}
	if small, large := p.RequiredFee(1, make([]MsgWork, 1)), p.RequiredFee(size, heavy); large.Lt(small) {
		t.Fatalf("fee wraps: %s < %s", large.Dec(), small.Dec())
	}
}

func TestAddAccount(t *testing.T) {
	d := Default()
	steps := []struct {
		addr types.Address
		amt  uint64
	}{{addr(5), 1}, {addr(2), 2}, {addr(9), 3}, {addr(5), 10}, {addr(1), 4}, {addr(2), 20}}
	for _, s := range steps {
		if err := d.AddAccount(s.addr, types.OGPU(s.amt)); err != nil {
			t.Fatalf("AddAccount(%s, %d): %v", s.addr, s.amt, err)
		}
	}
	want := []Account{
		{Address: addr(1), Balance: types.OGPU(4)},
		{Address: addr(2), Balance: types.OGPU(22)},
		{Address: addr(5), Balance: types.OGPU(11)},
		{Address: addr(9), Balance: types.OGPU(3)},
	}
	if !reflect.DeepEqual(d.Accounts, want) {
		t.Fatalf("accounts = %+v, want %+v", d.Accounts, want)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("Validate after AddAccount: %v", err)
	}
	// AddAccount copies the amount: changing the caller's value later does
	// not change the allocation.
	amt := types.OGPU(1)
	if err := d.AddAccount(addr(7), amt); err != nil {
		t.Fatal(err)
	}
	amt.SetUint64(999)
	if got := d.Accounts[3].Balance; !got.Eq(types.OGPU(1)) {
		t.Fatalf("allocation aliased the caller's amount: %s", got.Dec())
	}
}

func TestAddAccountCap(t *testing.T) {
	cases := []struct {
		name string
		addr types.Address
		amt  *uint256.Int
		ok   bool
	}{
		{"up to the cap exactly", addr(3), new(uint256.Int).Sub(types.MaxSupply, types.OGPU(30)), true},
		{"new account over the cap", addr(3), new(uint256.Int).Sub(types.MaxSupply, types.OGPU(29)), false},
		{"existing account over the cap", addr(1), types.MaxSupply, false},
		{"existing account overflowing", addr(1), new(uint256.Int).SetAllOne(), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Default()
			for _, a := range []struct {
				a types.Address
				n uint64
			}{{addr(1), 10}, {addr(2), 20}} {
				if err := d.AddAccount(a.a, types.OGPU(a.n)); err != nil {
					t.Fatal(err)
				}
			}
			before, err := d.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			err = d.AddAccount(tc.addr, tc.amt)
			if tc.ok {
				if err != nil {
					t.Fatalf("AddAccount: %v", err)
				}
				if r, _ := d.BridgeReserve(); !r.IsZero() {
					t.Fatalf("reserve = %s, want 0", r.Dec())
				}
				return
			}
			if err == nil {
				t.Fatal("AddAccount passed the cap")
			}
			// A refused addition leaves the document as it was.
			after, _ := d.Marshal()
			if !bytes.Equal(after, before) {
				t.Fatalf("refused AddAccount changed the document:\n%s\nwas\n%s", after, before)
			}
			if err := d.Validate(); err != nil {
				t.Fatalf("document invalid after a refused AddAccount: %v", err)
			}
		})
	}
}

func TestSort(t *testing.T) {
	d := validDoc()
	high := types.BytesToAddress([]byte{0x01, 0x00}) // 0x...0100 sorts after 0x...02
	d.Accounts = []Account{
		{Address: addr(9), Balance: types.OGPU(1)},
		{Address: high, Balance: types.OGPU(1)},
		{Address: addr(1), Balance: types.OGPU(1)},
		{Address: addr(2), Balance: types.OGPU(1)},
	}
	if d.Validate() == nil {
		t.Fatal("Validate accepted unsorted accounts")
	}
	d.Sort()
	if err := d.Validate(); err != nil {
		t.Fatalf("Validate after Sort: %v", err)
	}
	var got []types.Address
	for _, a := range d.Accounts {
		got = append(got, a.Address)
	}
	if want := []types.Address{addr(1), addr(2), addr(9), high}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sorted = %v, want %v", got, want)
	}
}

func TestMarshalParseRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		doc  *Doc
	}{
		{"default", Default()},
		{"full", validDoc()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bz, err := tc.doc.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(bz)
			if err != nil {
				t.Fatalf("Parse(Marshal(d)): %v\n%s", err, bz)
			}
			if !reflect.DeepEqual(got, tc.doc) {
				t.Fatalf("round trip differs:\n%+v\nwant\n%+v", got, tc.doc)
			}
			again, err := got.Marshal()
			if err != nil || !bytes.Equal(again, bz) {
				t.Fatalf("Marshal(Parse(x)) != x:\n%s\n%s", again, bz)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	valid, err := validDoc().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) []byte {
		if !bytes.Contains(valid, []byte(old)) {
			t.Fatalf("test document does not contain %q", old)
		}
		return bytes.Replace(valid, []byte(old), []byte(new), 1)
	}
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "cannot parse"},
		{"not json", []byte("not json"), "cannot parse"},
		{"unknown top-level field", replace(`"params": {`, `"parms": {}, "params": {`), `unknown field "parms"`},
		{"unknown params field", replace(`"max_msgs"`, `"max_messages": 1, "max_msgs"`), `unknown field "max_messages"`},
		{"unknown account field", replace(`"nonce": 3`, `"nonce": 3, "sequence": 3`), `unknown field "sequence"`},
		{"bad balance", replace(`"10000000000000000000"`, `"ten"`), "cannot parse"},
		{"negative nonce", replace(`"nonce": 3`, `"nonce": -3`), "cannot parse"},
		{"null fee pool", replace(`"fee_pool": "1000000000000000000"`, `"fee_pool": null`), "fee_pool"},
		{"invalid document", replace(`"stake": "5000000000000000000000"`, `"stake": "1"`), "validators[1]"},
		{"trailing data", append(bytes.Clone(valid), []byte(` {"accounts": []}`)...), "cannot parse"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse accepted %s as %+v", tc.in, d)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// Fields left out of app_state take their default values.
func TestParseDefaults(t *testing.T) {
	d, err := Parse([]byte(`{"accounts": [{"address": "0x0000000000000000000000000000000000000001", "balance": "5"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Params, DefaultParams()) || !d.FeePool.IsZero() || !d.Burned.IsZero() || len(d.Accounts) != 1 {
		t.Fatalf("Parse did not fill defaults: %+v", d)
	}
	// The canonical form round-trips through JSON.
	var back map[string]any
	bz, _ := d.Marshal()
	if err := json.Unmarshal(bz, &back); err != nil {
		t.Fatal(err)
	}
}

// TestL3DefaultEvidenceAge: the default evidence max age is below the
// default unbonding period, and CometBFT's own default (100,000 blocks) is
// refused against it.
func TestL3DefaultEvidenceAge(t *testing.T) {
	p := DefaultStakingParams()
	if err := p.CheckEvidenceAge(DefaultEvidenceMaxAgeBlocks); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for _, age := range []int64{0, -1, int64(p.UnbondingBlocks), 100_000} {
		if err := p.CheckEvidenceAge(age); err == nil {
			t.Errorf("evidence age %d against unbonding %d accepted", age, p.UnbondingBlocks)
		}
	}
}

// TestRetainBlocksRLP: the params record (stored in the state, under the
// app hash) round-trips retain_blocks, and a chain without fine-tune params
// keeps them absent when retain_blocks is set (RLP writes the nil pointer
// before it as an empty list: the "nil" tag reads it back as nil, not as
// zero fine-tune params). retain_blocks 0 and 1 also round-trip.
func TestRetainBlocksRLP(t *testing.T) {
	for _, c := range []struct {
		name     string
		finetune bool
		retain   uint64
	}{{"default", true, 500}, {"no finetune", false, 500}, {"off", true, 0}, {"off, no finetune", false, 0}, {"one", false, 1}} {
		t.Run(c.name, func(t *testing.T) {
			p := DefaultParams()
			p.Market.RetainBlocks = c.retain
			if !c.finetune {
				p.Market.Finetune = nil
			}
			bz, err := rlp.EncodeToBytes(&p)
			if err != nil {
				t.Fatal(err)
			}
			var got Params
			if err := rlp.DecodeBytes(bz, &got); err != nil {
				t.Fatal(err)
			}
			if got.Market.RetainBlocks != c.retain || (got.Market.Finetune != nil) != c.finetune {
				t.Fatalf("decoded retain_blocks %d, finetune %+v; want %d, present %v", got.Market.RetainBlocks, got.Market.Finetune, c.retain, c.finetune)
			}
			if !reflect.DeepEqual(got, p) {
				t.Fatalf("round trip changed the params:\n%+v\n%+v", got, p)
			}
		})
	}
}
