package node

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/cometbft/cometbft/libs/log"

	"github.com/ogpu-network/ogpu/beacon"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/internal/atomicfile"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
)

// BeaconChainLength is the length of a validator's beacon hash chain: a
// value per block for 2^20 blocks (12 days at 1 s blocks), then a new
// chain is registered. Computing it takes 2^20 sha256 (about 0.3 s) at
// start, and each vote at most 1,024 more (beacon.Chain).
const BeaconChainLength = 1 << 20

// BeaconSeedFile is where a node keeps its beacon seed, under its data
// directory.
const BeaconSeedFile = "beacon_seed.json"

// BeaconSeed is a validator node's beacon signer (chain.BeaconSigner): a
// secret seed kept in a file beside the node's data (0600, written before
// it is first used), whose hash chain it registers and then reveals, one
// value per vote (package beacon). Losing the file costs nothing but a few
// blocks: the chain takes the node's next registration once its old chain
// has been silent for beacon.Timeout blocks. Anyone holding the file knows
// this validator's future beacon values, not the beacon's.
type BeaconSeed struct {
	path   string
	pub    []byte // the node's consensus public key
	logger log.Logger

	mu    sync.Mutex
	seed  types.Hash
	chain *beacon.Chain
}

type seedFile struct {
	Seed   string `json:"seed"`
	Length uint64 `json:"length"`
}

// OpenBeaconSeed reads the seed at path, or creates one there, for the
// validator whose consensus public key is pub.
func OpenBeaconSeed(path string, pub []byte, logger log.Logger) (*BeaconSeed, error) {
	s := &BeaconSeed{path: path, pub: pub, logger: logger}
	bz, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := s.rotate(); err != nil {
			return nil, err
		}
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read the beacon seed: %w", err)
	}
	var f seedFile
	if err := json.Unmarshal(bz, &f); err != nil {
		return nil, fmt.Errorf("beacon seed %s is not valid JSON: %w (move it away: a new one is made, and the chain takes it %d blocks later)", path, err, beacon.Timeout)
	}
	raw, err := hex.DecodeString(f.Seed)
	if err != nil || len(raw) != 32 || f.Length == 0 || f.Length > beacon.MaxChainLength {
		return nil, fmt.Errorf("beacon seed %s holds no 32-byte hex seed and valid length (move it away: a new one is made)", path)
	}
	s.seed = types.Hash(raw)
	s.chain = beacon.NewChain(s.seed, f.Length)
	return s, nil
}

// rotate makes a new seed and writes it (atomically, 0600) before it is
// used.
func (s *BeaconSeed) rotate() error {
	var seed types.Hash
	if _, err := rand.Read(seed[:]); err != nil {
		return err
	}
	bz, err := json.Marshal(seedFile{Seed: hex.EncodeToString(seed[:]), Length: BeaconChainLength})
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, bz, 0o600); err != nil {
		return fmt.Errorf("cannot write the beacon seed: %w", err)
	}
	s.seed = seed
	s.chain = beacon.NewChain(seed, BeaconChainLength)
	return nil
}

// Reveal is this validator's beacon part of its vote at height: its
// chain's value of the height once its registration is on chain, else
// the registration (again, until committed). A chain exhausted or left
// silent past beacon.MaxGap is replaced by a new seed's. nil when this
// node is not a validator.
func (s *BeaconSeed) Reveal(height int64, committed store.KV) *beacon.Reveal {
	op, ok := escrow.NewKeeper(committed).OperatorOf(s.pub)
	if !ok || height <= 0 {
		return nil
	}
	h := uint64(height)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := beacon.GetRecord(committed, op)
	if ok && s.mine(rec) {
		switch {
		case h > rec.Last && h <= rec.End && h-rec.Last <= beacon.MaxGap:
			return &beacon.Reveal{Value: s.chain.At(h - (rec.Start - 1))}
		case h <= rec.Last:
			return nil
		}
		// Exhausted, or silent too long to be checked: a new chain.
		if err := s.rotate(); err != nil {
			s.logger.Error("cannot make a new beacon seed: this validator sends no beacon value", "err", err)
			return nil
		}
		s.logger.Info("beacon chain replaced", "last", rec.Last, "end", rec.End, "height", h)
	}
	return &beacon.Reveal{Value: s.chain.Tip(), Register: true, Length: s.chain.Len()}
}

// mine reports whether rec is this seed's chain: its latest value is the
// chain's value of that height.
func (s *BeaconSeed) mine(rec *beacon.Record) bool {
	if rec.Start == 0 || rec.Last+1 < rec.Start {
		return false
	}
	i := rec.Last - (rec.Start - 1)
	return i <= s.chain.Len() && s.chain.At(i) == rec.Value
}
