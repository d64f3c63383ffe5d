package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtcrypto "github.com/cometbft/cometbft/api/cometbft/crypto/v1"
	ics23 "github.com/cosmos/ics23/go"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Query paths. Answers are JSON (queries are not consensus data), except
// /store, which returns the raw stored value and, with prove, its proof.
const (
	QueryStore      = "/store"      // data: the key
	QueryAccount    = "/account/"   // + 0x address
	QueryParams     = "/params"     //
	QuerySupply     = "/supply"     //
	QueryValidators = "/validators" //
	QueryExport     = "/export"     // the state as a genesis app_state
)

// Proof op types in a /store answer: the ICS-23 proof of the key against the
// tree root, then the root itself, which with the height gives the app hash.
const (
	ProofOpIAVL = "ics23:iavl"
	ProofOpRoot = "ogpu:root"
)

// AccountView is the answer to /account/ADDR.
type AccountView struct {
	Address types.Address `json:"address"`
	Balance *uint256.Int  `json:"balance"`
	Nonce   uint64        `json:"nonce"`
}

// SupplyView is the answer to /supply.
type SupplyView struct {
	MaxSupply     *uint256.Int `json:"max_supply"`
	Burned        *uint256.Int `json:"burned"`
	FeePool       *uint256.Int `json:"fee_pool"`
	BridgeReserve *uint256.Int `json:"bridge_reserve"`
	// BridgeOutbound is withdrawn to Ethereum, not yet paid out there.
	BridgeOutbound *uint256.Int `json:"bridge_outbound"`
	// Circulating is everything held in accounts on this chain.
	Circulating *uint256.Int `json:"circulating"`
	// Bonded, Unbonding and Locked are stake and job escrow.
	Bonded    *uint256.Int `json:"bonded"`
	Unbonding *uint256.Int `json:"unbonding"`
	Locked    *uint256.Int `json:"locked"`
}

// Total is everything the supply view accounts for; it equals MaxSupply
// while the supply invariant holds.
func (s *SupplyView) Total() *uint256.Int {
	t := new(uint256.Int)
	for _, x := range []*uint256.Int{s.Circulating, s.Bonded, s.Unbonding, s.Locked, s.FeePool, s.BridgeReserve, s.BridgeOutbound, s.Burned} {
		if x != nil {
			t.Add(t, x)
		}
	}
	return t
}

// ValidatorView is one entry of the answer to /validators.
type ValidatorView struct {
	Name        string        `json:"name"`
	Operator    types.Address `json:"operator"`
	PubKey      []byte        `json:"pub_key"`
	Power       uint64        `json:"power"`
	Stake       *uint256.Int  `json:"stake"`
	Jailed      bool          `json:"jailed"`
	JailedUntil uint64        `json:"jailed_until,omitempty"`
	Tombstoned  bool          `json:"tombstoned"`
	Missed      uint64        `json:"missed_blocks"`
	// Active is escrow.IsActiveValidator: not jailed or tombstoned, at
	// least the minimum stake, power. Only an active validator has a
	// validator's privileges (canaries, dispute votes, job data); the
	// other records are listed for their operators and explorers.
	Active bool `json:"active"`
}

// ExportView is the answer to /export.
type ExportView struct {
	ChainID  string       `json:"chain_id"`
	Height   int64        `json:"height"`
	AppState *genesis.Doc `json:"app_state"`
}

// Query answers from a committed version (req.Height, or the latest).
func (a *App) Query(_ context.Context, req *abci.QueryRequest) (*abci.QueryResponse, error) {
	snap, err := a.tree.Snapshot(req.Height)
	if err != nil {
		return queryErr(types.ErrBadQuery.Wrapf("%v", err)), nil
	}
	res, err := query(snap, req)
	if err != nil {
		return queryErr(err), nil
	}
	res.Height = snap.Version()
	return res, nil
}

func queryErr(err error) *abci.QueryResponse {
	return &abci.QueryResponse{Code: types.CodeOf(err), Codespace: types.Codespace, Log: err.Error()}
}

func query(snap *store.Snapshot, req *abci.QueryRequest) (*abci.QueryResponse, error) {
	jsonRes := func(v any) (*abci.QueryResponse, error) {
		bz, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return &abci.QueryResponse{Value: bz}, nil
	}
	switch path := req.Path; {
	case path == QueryStore:
		res := &abci.QueryResponse{Key: req.Data, Value: snap.Get(req.Data)}
		if req.Prove {
			if snap.Version() == 0 {
				return nil, types.ErrBadQuery.Wrapf("no committed state to prove against yet")
			}
			proof, err := snap.Prove(req.Data)
			if err != nil {
				return nil, types.ErrInternal.Wrapf("cannot prove key: %v", err)
			}
			pbz, err := proof.Marshal()
			if err != nil {
				return nil, err
			}
			res.ProofOps = &cmtcrypto.ProofOps{Ops: []cmtcrypto.ProofOp{
				{Type: ProofOpIAVL, Key: req.Data, Data: pbz},
				{Type: ProofOpRoot, Data: snap.Hash()},
			}}
		}
		return res, nil
	case strings.HasPrefix(path, QueryAccount):
		addr, err := types.ParseAddress(strings.TrimPrefix(path, QueryAccount))
		if err != nil {
			return nil, types.ErrBadQuery.Wrapf("%v", err)
		}
		return jsonRes(AccountView{Address: addr, Balance: escrow.NewKeeper(snap).Balance(addr), Nonce: getNonce(snap, addr)})
	case path == QueryParams:
		if snap.Version() == 0 {
			return nil, types.ErrNotFound.Wrapf("no committed state yet")
		}
		return jsonRes(getParams(snap))
	case path == QuerySupply:
		k := escrow.NewKeeper(snap)
		circ := new(uint256.Int)
		k.IterateBalances(func(_ types.Address, b *uint256.Int) bool { circ.Add(circ, b); return false })
		return jsonRes(SupplyView{MaxSupply: types.MaxSupply, Burned: k.Burned(), FeePool: k.FeePool(), BridgeReserve: k.BridgeReserve(), BridgeOutbound: k.BridgeOutbound(), Circulating: circ,
			Bonded: k.TotalBonded(), Unbonding: k.TotalUnbonding(), Locked: k.TotalLocked()})
	case path == QueryValidators:
		vals := []ValidatorView{}
		ek := escrow.NewKeeper(snap)
		var sp genesis.StakingParams
		if snap.Version() > 0 {
			sp = getParams(snap).Staking
		}
		ek.IterateValidators(func(op types.Address, v *escrow.Validator) bool {
			vals = append(vals, validatorView(sp, ek, op, v))
			return false
		})
		return jsonRes(vals)
	case path == QueryExport:
		if snap.Version() == 0 {
			return nil, types.ErrNotFound.Wrapf("no committed state yet")
		}
		chainID, doc, err := ExportGenesis(snap)
		if err != nil {
			return nil, types.ErrBadQuery.Wrapf("%v", err)
		}
		return jsonRes(ExportView{ChainID: chainID, Height: snap.Version(), AppState: doc})
	default:
		v, ok, err := marketQuery(snap, path, req.Data)
		if !ok && err == nil {
			v, ok, err = bridgeQuery(snap, path)
		}
		if !ok && err == nil {
			v, ok, err = sessionQuery(snap, path)
		}
		if !ok && err == nil {
			v, ok, err = statsQuery(snap, path)
		}
		if !ok && err == nil {
			v, ok, err = beaconQuery(snap, path)
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, types.ErrUnknownQuery.Wrapf("%q", path)
		}
		return jsonRes(v)
	}
}

// VerifyStoreProof checks a /store answer: the ICS-23 proof binds the key to
// the value (or its absence) under the root in the answer, and that root at
// the answer's height hashes to appHash, which the caller takes from the
// header of the block at height+1 (the block that commits to it).
func VerifyStoreProof(res *abci.QueryResponse, appHash []byte) error {
	if res.ProofOps == nil || len(res.ProofOps.Ops) != 2 || res.ProofOps.Ops[0].Type != ProofOpIAVL || res.ProofOps.Ops[1].Type != ProofOpRoot {
		return fmt.Errorf("answer carries no %s proof", ProofOpIAVL)
	}
	op := res.ProofOps.Ops[0]
	if !bytes.Equal(op.Key, res.Key) {
		return fmt.Errorf("proof is for key %x, answer for %x", op.Key, res.Key)
	}
	var proof ics23.CommitmentProof
	if err := proof.Unmarshal(op.Data); err != nil {
		return fmt.Errorf("cannot decode proof: %w", err)
	}
	root := res.ProofOps.Ops[1].Data
	var value []byte
	if len(res.Value) > 0 {
		value = res.Value
	}
	if !store.VerifyProof(&proof, root, res.Key, value) {
		return fmt.Errorf("proof does not bind key %x to the value under root %X", res.Key, root)
	}
	if want := AppHash(res.Height, root); !bytes.Equal(want, appHash) {
		return fmt.Errorf("root %X at height %d gives app hash %X, the block header says %X", root, res.Height, want, appHash)
	}
	return nil
}
