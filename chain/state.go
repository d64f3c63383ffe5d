package chain

import (
	"bytes"
	"fmt"

	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// ReadParams returns the chain's params stored in r.
func ReadParams(r store.Reader) genesis.Params { return getParams(r) }

func getParams(r store.Reader) genesis.Params {
	var p genesis.Params
	if err := rlp.DecodeBytes(r.Get(ParamsKey()), &p); err != nil {
		panic(fmt.Errorf("chain: stored params unreadable: %w", err))
	}
	return p
}

// decodedParams is the params record's bytes and their decoding.
type decodedParams struct {
	raw []byte
	p   genesis.Params
}

// params is getParams(r) for runTx, decoded once per params record rather
// than once per transaction: the record's bytes are read every time and
// compared with the last decoded ones, so a change (in this block's
// writes, or another branch's) is always seen. The returned Params shares
// its pointer fields with the cached one: runTx only reads them
// (Gas, RequiredFee, limits), it must not be handed to code that writes.
func (a *App) params(r store.Reader) genesis.Params {
	raw := r.Get(ParamsKey())
	if c := a.paramsCache.Load(); c != nil && bytes.Equal(c.raw, raw) {
		return c.p
	}
	p := getParams(r)
	a.paramsCache.Store(&decodedParams{raw: bytes.Clone(raw), p: p})
	return p
}

func setParams(kv store.KV, p genesis.Params) {
	bz, err := rlp.EncodeToBytes(&p)
	if err != nil {
		panic(err)
	}
	kv.Set(ParamsKey(), bz)
}

func getNonce(r store.Reader, addr types.Address) uint64 {
	return decodeUint64(r.Get(NonceKey(addr)))
}

func setNonce(kv store.KV, addr types.Address, n uint64) {
	if n == 0 {
		kv.Delete(NonceKey(addr))
		return
	}
	kv.Set(NonceKey(addr), encodeUint64(n))
}

// initGenesis writes a validated genesis document into kv.
func initGenesis(kv store.KV, chainID string, d *genesis.Doc) error {
	reserve, err := d.BridgeReserve()
	if err != nil {
		return err
	}
	kv.Set(ChainIDKey(), []byte(chainID))
	setParams(kv, d.Params)
	ek := escrow.NewKeeper(kv)
	for _, a := range d.Accounts {
		ek.SetGenesisBalance(a.Address, a.Balance)
		setNonce(kv, a.Address, a.Nonce)
	}
	ek.SetGenesisTotals(d.FeePool, d.Burned, reserve)
	for _, v := range d.Validators {
		ek.SetGenesisBond(v.Operator, v.Stake)
		if err := ek.CreateValidator(d.Params.Staking, v.Operator, v.Name, v.PubKey, new(uint256.Int)); err != nil {
			return fmt.Errorf("genesis validator %s: %w", v.Name, err)
		}
	}
	return bridge.InitGenesis(kv, d.Bridge, ek.IsValidator)
}

// ExportGenesis reads the state in r back into a genesis document. A chain
// started from it holds the same state key for key, and every node starting
// from it reaches the same app hash; that hash differs from the exported
// chain's, because IAVL node hashes commit to the version each node was
// written at.
//
// The beacon's values and registrations are not exported: they are
// history, and a restarted chain's validators register their hash chains
// anew at their next vote (package beacon).
//
// The genesis document describes accounts and validators; a chain with
// market or staking state beyond that (providers, jobs, unbonding stake,
// stake of non-validators, jailed validators) cannot be exported yet and
// gets an error saying what is in the way.
func ExportGenesis(r store.KV) (chainID string, d *genesis.Doc, err error) {
	d = genesis.Default()
	d.Params = getParams(r)
	ek := escrow.NewKeeper(r)
	d.FeePool, d.Burned = ek.FeePool(), ek.Burned()
	if err := exportable(r); err != nil {
		return "", nil, err
	}
	// Accounts are the union of balances and nonces, both in address order.
	byAddr := map[types.Address]int{}
	add := func(addr types.Address) *genesis.Account {
		i, ok := byAddr[addr]
		if !ok {
			i = len(d.Accounts)
			byAddr[addr] = i
			d.Accounts = append(d.Accounts, genesis.Account{Address: addr, Balance: ek.Balance(addr)})
		}
		return &d.Accounts[i]
	}
	ek.IterateBalances(func(addr types.Address, _ *uint256.Int) bool { add(addr); return false })
	store.IteratePrefix(r, []byte{prefixNonce}, func(key, value []byte) bool {
		addr, err := ParseNonceKey(key)
		if err != nil {
			panic(err)
		}
		add(addr).Nonce = decodeUint64(value)
		return false
	})
	d.Sort()
	var verr error
	ek.IterateValidators(func(op types.Address, v *escrow.Validator) bool {
		if v.Jailed {
			verr = fmt.Errorf("validator %s is jailed: export of jailed validators is not supported", v.Name)
			return true
		}
		d.Validators = append(d.Validators, genesis.Validator{Name: v.Name, Operator: op, PubKey: bytes.Clone(v.PubKey), Stake: ek.Bonded(op)})
		return false
	})
	if verr != nil {
		return "", nil, verr
	}
	if d.Params.Bridge != nil {
		ops := make([]types.Address, len(d.Validators))
		for i, v := range d.Validators {
			ops[i] = v.Operator
		}
		if d.Bridge, err = bridge.ExportGenesis(r, ops); err != nil {
			return "", nil, err
		}
	}
	return string(r.Get(ChainIDKey())), d, nil
}

// exportable refuses state that a genesis document cannot describe.
func exportable(r store.KV) error {
	ek := escrow.NewKeeper(r)
	if !ek.TotalUnbonding().IsZero() || !ek.TotalLocked().IsZero() {
		return fmt.Errorf("cannot export: the chain holds unbonding stake or job escrow; export supports accounts and validators only")
	}
	var err error
	ek.IterateBonded(func(addr types.Address, _ *uint256.Int) bool {
		if !ek.IsValidator(addr) {
			err = fmt.Errorf("cannot export: %s has stake without a validator (a provider); export supports accounts and validators only", addr)
		}
		return err != nil
	})
	if err != nil {
		return err
	}
	// Market and verifier state lives under 0x20-0x3f.
	r.Iterate([]byte{0x20}, []byte{0x40}, func(key, _ []byte) bool {
		err = fmt.Errorf("cannot export: the chain has market state (key %x); export supports accounts and validators only", key)
		return true
	})
	return err
}
