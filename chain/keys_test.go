package chain

import (
	"bytes"
	"testing"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

func TestNonceKey(t *testing.T) {
	addrs := []types.Address{{}, addrOf("alice"), types.BytesToAddress(bytes.Repeat([]byte{0xff}, 20))}
	for _, a := range addrs {
		key := NonceKey(a)
		if len(key) != 21 || key[0] != prefixNonce {
			t.Fatalf("NonceKey(%s) = %x", a, key)
		}
		got, err := ParseNonceKey(key)
		if err != nil || got != a {
			t.Fatalf("ParseNonceKey(NonceKey(%s)) = %s, %v", a, got, err)
		}
	}
	valid := NonceKey(addrOf("alice"))
	cases := []struct {
		name string
		key  []byte
	}{
		{"nil", nil},
		{"prefix only", []byte{prefixNonce}},
		{"short", valid[:20]},
		{"long", append(bytes.Clone(valid), 0)},
		{"balance key", escrow.BalanceKey(addrOf("alice"))},
		{"validator prefix", append([]byte{0x19}, valid[1:]...)},
		{"params key", ParamsKey()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if a, err := ParseNonceKey(tc.key); err == nil {
				t.Fatalf("ParseNonceKey(%x) = %s, want an error", tc.key, a)
			}
		})
	}
}

// The chain's keys and escrow's never collide: every table has its own
// first byte, and the singletons are distinct.
func TestKeyPrefixesDistinct(t *testing.T) {
	a := addrOf("alice")
	keys := []struct {
		name string
		key  []byte
	}{
		{"params", ParamsKey()},
		{"chain id", ChainIDKey()},
		{"nonce", NonceKey(a)},
		{"validator", escrow.ValidatorKey(a)},
		{"consensus key", escrow.ConsKeyKey(make([]byte, 32))},
		{"bonded", escrow.BondedKey(a)},
		{"unbonding", escrow.UnbondingKey(a, 7)},
		{"locked", escrow.LockedKey(7)},
		{"provider", market.ProviderKey(a)},
		{"job", market.JobKey(7)},
		{"next job", market.NextJobKey()},
		{"bid", market.BidKey(7, 0, a)},
		{"leaders", market.LeadersKey(7, 0)},
		{"prune queue", market.PruneKey(9, 7)},
		{"task", verifier.TaskKey(7, 0)},
		{"reputation", verifier.ReputationKey(a)},
		{"balance", escrow.BalanceKey(a)},
		{"fee pool", escrow.FeePoolKey()},
		{"burned", escrow.BurnedKey()},
		{"bridge reserve", escrow.BridgeReserveKey()},
		{"bridge outbound", escrow.BridgeOutboundKey()},
	}
	for i, x := range keys {
		for _, y := range keys[i+1:] {
			if bytes.HasPrefix(x.key, y.key) || bytes.HasPrefix(y.key, x.key) {
				t.Errorf("%s key %x and %s key %x overlap", x.name, x.key, y.name, y.key)
			}
		}
	}
	// Tables differ in the first byte, except params and chain id, which
	// share the metadata byte.
	for i, x := range keys[2:] {
		for _, y := range keys[2+i+1:] {
			if x.key[0] == y.key[0] {
				t.Errorf("%s and %s share prefix %#x", x.name, y.name, x.key[0])
			}
		}
	}
}

func TestUint64Encoding(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want uint64
	}{
		{"absent", nil, 0},
		{"wrong length", []byte{1, 2, 3}, 0},
		{"one", encodeUint64(1), 1},
		{"big-endian", []byte{0, 0, 0, 0, 0, 0, 1, 0}, 256},
		{"max", encodeUint64(^uint64(0)), ^uint64(0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decodeUint64(tc.in); got != tc.want {
				t.Fatalf("decodeUint64(%x) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}
