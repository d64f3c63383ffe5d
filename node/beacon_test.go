package node

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cometbft/cometbft/libs/log"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/types"
)

// TestBeaconOnARealNode: a real single-validator node registers its
// beacon hash chain through its vote extensions and reveals a value per
// height; the chain's final values are exactly what the seed file on disk
// gives (sha256("ogpu/beacon/v1" | d | operator | x(d))), so nothing but
// the validator's chain made them.
func TestBeaconOnARealNode(t *testing.T) {
	tc := startTestChain(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		b, err := tc.local.Beacon(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Validators) == 1 && b.Final >= b.Validators[0].Start+3 && !b.Predictable {
			rec := b.Validators[0]
			bz, err := os.ReadFile(filepath.Join(tc.conf.DBDir(), BeaconSeedFile))
			if err != nil {
				t.Fatal(err)
			}
			var f seedFile
			if err := json.Unmarshal(bz, &f); err != nil {
				t.Fatal(err)
			}
			raw, _ := hex.DecodeString(f.Seed)
			c := beacon.NewChain(types.Hash(raw), f.Length)
			x := c.At(b.Final - (rec.Start - 1))
			h := sha256.New()
			h.Write([]byte("ogpu/beacon/v1"))
			h.Write(binary.BigEndian.AppendUint64(nil, b.Final))
			h.Write(rec.Operator[:])
			h.Write(x[:])
			if want := types.Hash(h.Sum(nil)); b.Value != want {
				t.Fatalf("beacon value of %d is %x, want %x from the validator's seed", b.Final, b.Value[:8], want[:8])
			}
			if rec.Last+1 < b.Final {
				t.Fatalf("the validator's last value is at %d, the beacon final at %d: its values are not arriving", rec.Last, b.Final)
			}
			return
		}
		if err := tc.local.WaitHeight(ctx, latestHeight(t, tc.local)+1); err != nil {
			t.Fatalf("waiting for the beacon: %v (last view %+v)", err, b)
		}
	}
}

// TestBeaconSeedPersists: a seed is written before it is used and read
// back the same; a corrupt file is refused with what to do.
func TestBeaconSeedPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", BeaconSeedFile)
	a, err := OpenBeaconSeed(path, []byte("pub"), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed file %v, mode %v: want written 0600", err, fi)
	}
	b, err := OpenBeaconSeed(path, []byte("pub"), log.NewNopLogger())
	if err != nil || b.chain.Tip() != a.chain.Tip() {
		t.Fatalf("reopened seed: %v, same tip %v", err, err == nil && b.chain.Tip() == a.chain.Tip())
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBeaconSeed(path, []byte("pub"), log.NewNopLogger()); err == nil {
		t.Fatal("a corrupt seed file was taken")
	}
}
