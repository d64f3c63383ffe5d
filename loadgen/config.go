// Package loadgen drives a loopback oGPU network with signed market
// transactions at a target rate, bounded in count and in time, and reports
// what the network did with them: sent, accepted by CheckTx, committed
// (counted from the blocks), committed tx/s, block times, mempool size and
// errors by kind.
//
// The market load is the auction's life cycle, job after job: a client
// account posts a one-stage auction job, Bidders provider accounts commit
// sealed bids, all but one reveal them once the bid window ends, and the
// client cancels the job before its reveal window closes, so that every
// deposit and the escrow come back and no provider is awarded a task it
// would then miss (a no-show is slashed and jailed). The last bidder holds
// its reveal back: an auction closes in the block of its last sealed bid's
// reveal (market's early close), which would award the job before the
// cancel could land; with one sealed bid unrevealed it stays open to its
// reveal window's end, and the cancel returns the held-back deposit too. Every transaction goes through
// node.Sender, which signs with the nonces it keeps per account; the
// messages are the market package's own, as the CLI builds them.
//
// Accounts are derived from a seed (Keys), so a run can be repeated against
// the same chain; Setup funds them from a faucet key and bonds and registers
// the providers. Endpoints must be loopback: the generator is a test tool for
// a network on this machine, never a way to load someone else's node.
package loadgen

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
)

// Modes of load.
const (
	// ModeMarket: job posts, sealed bids, reveals and cancels.
	ModeMarket = "market"
	// ModeTransfer: transfers between the client accounts, a baseline.
	ModeTransfer = "transfer"
)

// Config is a run, as the user writes it; Validate checks it.
type Config struct {
	// Endpoints are CometBFT RPC addresses (http://127.0.0.1:26657 or
	// 127.0.0.1:26657), loopback only. Account i sends through endpoint
	// i mod len; blocks are read from the first.
	Endpoints []string
	// Mode is ModeMarket (default) or ModeTransfer.
	Mode string
	// Rate is the target of transactions sent per second.
	Rate int
	// Duration bounds the time the load is sent; MaxTxs the number of
	// transactions sent in all (a job is started only when its whole life
	// cycle fits in what is left). Both are required.
	Duration time.Duration
	MaxTxs   int
	// Drain bounds the wait, after the load, for the open jobs to finish
	// and the accepted transactions to reach a block (default 60s).
	Drain time.Duration
	// Clients post jobs (market) or send transfers; Providers bid.
	Clients, Providers int
	// Bidders is the number of providers that bid on each job (default 4,
	// at most Providers).
	Bidders int
	// BidBlocks and RevealBlocks are each job's windows (defaults 5 and 10).
	BidBlocks, RevealBlocks uint64
	// Seed derives the accounts' keys (Keys).
	Seed string
	// Report receives one line per second and the final report (nil: none).
	Report io.Writer
}

const (
	defaultBidders = 4
	defaultBid     = 5
	defaultReveal  = 10
	defaultDrain   = time.Minute
	// MaxRate and MaxAccounts keep a typo from flooding the machine.
	MaxRate     = 100_000
	MaxAccounts = 10_000
)

// Validate fills in defaults and reports the first setting out of range,
// with what to do about it.
func (c *Config) Validate() error {
	if len(c.Endpoints) == 0 {
		return errors.New("no endpoint: give at least one node RPC address on loopback, e.g. http://127.0.0.1:26657")
	}
	for _, e := range c.Endpoints {
		if err := CheckLoopback(e); err != nil {
			return err
		}
	}
	if c.Mode == "" {
		c.Mode = ModeMarket
	}
	if c.Bidders == 0 {
		c.Bidders = defaultBidders
	}
	if c.BidBlocks == 0 {
		c.BidBlocks = defaultBid
	}
	if c.RevealBlocks == 0 {
		c.RevealBlocks = defaultReveal
	}
	if c.Drain == 0 {
		c.Drain = defaultDrain
	}
	switch {
	case c.Mode != ModeMarket && c.Mode != ModeTransfer:
		return fmt.Errorf("mode %q: want %s or %s", c.Mode, ModeMarket, ModeTransfer)
	case c.Rate < 1 || c.Rate > MaxRate:
		return fmt.Errorf("rate %d tx/s: want 1..%d", c.Rate, MaxRate)
	case c.Duration <= 0:
		return errors.New("duration must be positive: the load is bounded in time (e.g. 5m)")
	case c.MaxTxs < 1:
		return errors.New("max txs must be positive: the load is bounded in count (e.g. 400000)")
	case c.Drain < 0:
		return errors.New("drain must not be negative")
	case c.Clients < 1 || c.Clients > MaxAccounts:
		return fmt.Errorf("clients %d: want 1..%d", c.Clients, MaxAccounts)
	case c.Mode == ModeTransfer && c.Clients < 2:
		return errors.New("transfers need at least 2 client accounts (each sends to the next)")
	case c.Mode == ModeMarket && (c.Providers < 1 || c.Providers > MaxAccounts):
		return fmt.Errorf("providers %d: want 1..%d", c.Providers, MaxAccounts)
	case c.Mode == ModeMarket && (c.Bidders < 1 || c.Bidders > c.Providers):
		return fmt.Errorf("bidders %d per job: want 1..providers (%d)", c.Bidders, c.Providers)
	case c.BidBlocks < 2:
		return errors.New("bid window of at least 2 blocks: the bids are sent once the post is in a block")
	case c.RevealBlocks < cancelMargin+2:
		return fmt.Errorf("reveal window of at least %d blocks: the cancel is sent once the reveals are in a block, or %d blocks before the window ends", cancelMargin+2, cancelMargin)
	case c.BidBlocks+c.RevealBlocks > MaxWindows:
		return fmt.Errorf("bid + reveal blocks %d: at most %d (a load job's life must fit max_job_blocks)", c.BidBlocks+c.RevealBlocks, MaxWindows)
	}
	return nil
}

// CheckLoopback refuses an RPC address whose host is not a loopback IP
// address or "localhost": the generator loads only this machine's nodes.
func CheckLoopback(addr string) error {
	raw := addr
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("endpoint %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "tcp" {
		return fmt.Errorf("endpoint %q: scheme %q, want http:// or tcp:// on loopback", addr, u.Scheme)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("endpoint %q is not on loopback: the load generator sends only to nodes on this machine (127.0.0.1, ::1 or localhost)", addr)
}

// Keys derives n secp256k1 keys for role ("client", "provider") from seed:
// sha256("ogpu-loadgen/" seed "/" role "/" i). The same seed gives the same
// accounts, so a second run reuses the funded and registered ones.
func Keys(seed, role string, n int) []*ecdsa.PrivateKey {
	keys := make([]*ecdsa.PrivateKey, n)
	for i := range keys {
		for ctr := 0; ; ctr++ { // a hash out of the curve's range is astronomically rare
			h := sha256.Sum256(fmt.Appendf(nil, "ogpu-loadgen/%s/%s/%d/%d", seed, role, i, ctr))
			if k, err := crypto.ToECDSA(h[:]); err == nil {
				keys[i] = k
				break
			}
		}
	}
	return keys
}
