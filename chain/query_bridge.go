package chain

import (
	"bytes"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/bridge"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// Bridge query paths.
const (
	QueryBridge           = "/bridge"             // BridgeView
	QueryBridgeWithdrawal = "/bridge/withdrawal/" // + nonce: WithdrawalView
	QueryBridgePending    = "/bridge/pending"     // []WithdrawalView, oldest first
	QueryBridgeValset     = "/bridge/valset/"     // + nonce: ValsetView
	QueryBridgeKey        = "/bridge/key/"        // + operator: BridgeKeyView
)

// BridgeView is the answer to /bridge.
type BridgeView struct {
	Params *genesis.BridgeParams `json:"params"`
	// Domain is the contract's domain these params give (hex).
	Domain         string       `json:"domain,omitempty"`
	LastDeposit    uint64       `json:"last_deposit"`
	LastWithdrawal uint64       `json:"last_withdrawal"`
	Pending        uint64       `json:"pending_withdrawals"`
	Reserve        *uint256.Int `json:"reserve"`
	Outbound       *uint256.Int `json:"outbound"`
	// OnEthereum is what the contract must hold for this chain's books:
	// max supply − reserve (the outbound escrow is still locked there),
	// plus deposits not yet credited, minus withdrawals paid and not yet
	// attested.
	OnEthereum *uint256.Int `json:"on_ethereum"`
	Valset     *ValsetView  `json:"valset,omitempty"`
}

// SigView is one validator's signature (hex, V 0/1).
type SigView struct {
	Signer common.Address `json:"signer"`
	Sig    string         `json:"sig"`
}

// WithdrawalView is a withdrawal with the signatures stored for it.
type WithdrawalView struct {
	bridge.Withdrawal
	Signatures []SigView `json:"signatures"`
	// SignedPower of Total in the latest valset; Signed: more than 2/3.
	SignedPower uint64 `json:"signed_power"`
	Total       uint64 `json:"total_power"`
	Signed      bool   `json:"signed"`
}

// ValsetView is a valset, its checkpoint and the signatures adopting it.
type ValsetView struct {
	bridge.Valset
	Checkpoint string    `json:"checkpoint,omitempty"`
	Signatures []SigView `json:"signatures"`
	Adopted    bool      `json:"adopted"`
}

// BridgeKeyView is a validator's bridge key.
type BridgeKeyView struct {
	Operator types.Address  `json:"operator"`
	Key      common.Address `json:"key"`
}

func sigViews(set *bridge.Valset, sigs map[common.Address]bridge.Sig) []SigView {
	out := []SigView{}
	// In set order (sorted by address), then any signer not in it.
	seen := map[common.Address]bool{}
	if set != nil {
		for _, m := range set.Members {
			if s, ok := sigs[m.Addr]; ok {
				out = append(out, SigView{m.Addr, hex.EncodeToString(s[:])})
				seen[m.Addr] = true
			}
		}
	}
	var rest []common.Address
	for a := range sigs {
		if !seen[a] {
			rest = append(rest, a)
		}
	}
	slices.SortFunc(rest, func(a, b common.Address) int { return bytes.Compare(a[:], b[:]) })
	for _, a := range rest {
		s := sigs[a]
		out = append(out, SigView{a, hex.EncodeToString(s[:])})
	}
	return out
}

func withdrawalView(v bridge.View, w *bridge.Withdrawal) WithdrawalView {
	sigs := v.WithdrawalSigs(w.Nonce)
	out := WithdrawalView{Withdrawal: *w}
	vs, ok := v.LatestValset()
	if ok {
		out.SignedPower, out.Total = bridge.SignedPower(vs, sigs), vs.Total()
		out.Signed = bridge.Enough(out.SignedPower, out.Total)
	}
	out.Signatures = sigViews(vs, sigs)
	return out
}

func valsetView(v bridge.View, vs *bridge.Valset, domain [32]byte) *ValsetView {
	out := &ValsetView{Valset: *vs, Adopted: v.Adopted(vs.Nonce), Signatures: []SigView{}}
	if domain != ([32]byte{}) {
		cp := bridge.Checkpoint(domain, vs)
		out.Checkpoint = hex.EncodeToString(cp[:])
	}
	if vs.Nonce > 0 {
		prev, _ := v.Valset(vs.Nonce - 1)
		out.Signatures = sigViews(prev, v.ValsetSigs(vs.Nonce))
	}
	return out
}

// bridgeQuery answers the bridge paths; ok is false for other paths.
func bridgeQuery(snap *store.Snapshot, path string) (any, bool, error) {
	if path != QueryBridge && !strings.HasPrefix(path, QueryBridge+"/") {
		return nil, false, nil
	}
	if snap.Version() == 0 {
		return nil, true, types.ErrNotFound.Wrapf("no committed state yet")
	}
	v := bridge.NewView(snap)
	p := getParams(snap)
	var domain [32]byte
	if p.Bridge != nil {
		domain = bridge.Domain(p.Bridge.EthChainID, p.Bridge.Contract, string(snap.Get(ChainIDKey())))
	}
	nonceArg := func(prefix string) (uint64, error) {
		n, err := strconv.ParseUint(strings.TrimPrefix(path, prefix), 10, 64)
		if err != nil {
			return 0, types.ErrBadQuery.Wrapf("%q: want a nonce after %s", path, prefix)
		}
		return n, nil
	}
	switch {
	case path == QueryBridge:
		ek := escrow.NewKeeper(snap)
		out := BridgeView{Params: p.Bridge, LastDeposit: v.LastDeposit(), LastWithdrawal: v.LastWithdrawal(),
			Pending: uint64(len(v.Pending())), Reserve: ek.BridgeReserve(), Outbound: ek.BridgeOutbound()}
		out.OnEthereum = new(uint256.Int).Sub(types.MaxSupply, out.Reserve)
		if p.Bridge != nil {
			out.Domain = hex.EncodeToString(domain[:])
		}
		if vs, ok := v.LatestValset(); ok {
			out.Valset = valsetView(v, vs, domain)
		}
		return out, true, nil
	case strings.HasPrefix(path, QueryBridgeWithdrawal):
		n, err := nonceArg(QueryBridgeWithdrawal)
		if err != nil {
			return nil, true, err
		}
		w, ok := v.Withdrawal(n)
		if !ok {
			return nil, true, types.ErrNotFound.Wrapf("no withdrawal %d (the last is %d)", n, v.LastWithdrawal())
		}
		return withdrawalView(v, w), true, nil
	case path == QueryBridgePending:
		out := []WithdrawalView{}
		for _, n := range v.Pending() {
			w, _ := v.Withdrawal(n)
			out = append(out, withdrawalView(v, w))
			if len(out) >= MaxListed {
				break
			}
		}
		return out, true, nil
	case strings.HasPrefix(path, QueryBridgeValset):
		n, err := nonceArg(QueryBridgeValset)
		if err != nil {
			return nil, true, err
		}
		vs, ok := v.Valset(n)
		if !ok {
			return nil, true, types.ErrNotFound.Wrapf("no valset %d", n)
		}
		return valsetView(v, vs, domain), true, nil
	case strings.HasPrefix(path, QueryBridgeKey):
		op, err := parseAddr(strings.TrimPrefix(path, QueryBridgeKey))
		if err != nil {
			return nil, true, err
		}
		k, ok := v.KeyOf(op)
		if !ok {
			return nil, true, types.ErrNotFound.Wrapf("%s has no bridge key", op)
		}
		return BridgeKeyView{Operator: op, Key: k}, true, nil
	}
	return nil, true, types.ErrUnknownQuery.Wrapf("%q", path)
}
