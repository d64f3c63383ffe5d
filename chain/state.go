package chain

import (
	"bytes"
	"fmt"

	"github.com/ethereum/go-ethereum/rlp"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// validatorRecord is a validator's stored state, keyed by its consensus key.
type validatorRecord struct {
	Name  string
	Power uint64
}

func getParams(r store.Reader) genesis.Params {
	var p genesis.Params
	if err := rlp.DecodeBytes(r.Get(ParamsKey()), &p); err != nil {
		panic(fmt.Errorf("chain: stored params unreadable: %w", err))
	}
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
		bz, err := rlp.EncodeToBytes(&validatorRecord{Name: v.Name, Power: uint64(v.Power)})
		if err != nil {
			return err
		}
		kv.Set(ValidatorKey(v.PubKey), bz)
	}
	return nil
}

// ExportGenesis reads the state in r back into a genesis document. A chain
// started from it holds the same state key for key, and every node starting
// from it reaches the same app hash; that hash differs from the exported
// chain's, because IAVL node hashes commit to the version each node was
// written at.
func ExportGenesis(r store.KV) (chainID string, d *genesis.Doc) {
	d = genesis.Default()
	d.Params = getParams(r)
	ek := escrow.NewKeeper(r)
	d.FeePool, d.Burned = ek.FeePool(), ek.Burned()
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
	iterateValidators(r, func(pk []byte, rec validatorRecord) bool {
		d.Validators = append(d.Validators, genesis.Validator{Name: rec.Name, PubKey: pk, Power: int64(rec.Power)})
		return false
	})
	return string(r.Get(ChainIDKey())), d
}

func iterateValidators(r store.Reader, fn func(pubKey []byte, rec validatorRecord) (stop bool)) {
	store.IteratePrefix(r, []byte{prefixValidator}, func(key, value []byte) bool {
		pk, err := ParseValidatorKey(key)
		if err != nil {
			panic(err)
		}
		var rec validatorRecord
		if err := rlp.DecodeBytes(value, &rec); err != nil {
			panic(fmt.Errorf("chain: stored validator unreadable: %w", err))
		}
		return fn(bytes.Clone(pk), rec)
	})
}
