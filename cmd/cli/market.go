package cli

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	"github.com/holiman/uint256"
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
	"github.com/ogpu-network/ogpu/wallet"
)

// marketTxCmds are the staking, market and verification tx commands.
func marketTxCmds() []*cobra.Command {
	return []*cobra.Command{newProviderTxCmd(), newValidatorTxCmd(), newStakeTxCmd(), newJobTxCmd(),
		newMarketTxCmd(), newResultTxCmd(), newDisputeTxCmd(), newCanaryTxCmd()}
}

// ---- the session of one tx command ----

// txSession is one tx command's signing key (--from), node connection and
// chain id. Commands that commit to a secret (a bid price, a result, a
// canary answer) pick a random salt, save it under the wallet home, and
// only then broadcast, so that a crash after the broadcast never loses
// what the reveal needs.
type txSession struct {
	cmd     *cobra.Command
	ctx     context.Context
	cancel  context.CancelFunc
	w       *wallet.Store
	from    wallet.Key
	c       *node.Client
	chainID string
	height  int64 // of the last query answer
}

func openSession(cmd *cobra.Command) (*txSession, error) {
	w, err := openWallet(cmd)
	if err != nil {
		return nil, err
	}
	from, _ := cmd.Flags().GetString("from")
	k, err := w.Find(from)
	if err != nil {
		return nil, fmt.Errorf("%w (create one with `ogpu keys add NAME` or import one with `ogpu keys import`)", err)
	}
	c, err := dialNode(cmd)
	if err != nil {
		return nil, err
	}
	ctx, cancel := cmdContext(cmd)
	s := &txSession{cmd: cmd, ctx: ctx, cancel: cancel, w: w, from: k, c: c}
	s.chainID, _ = cmd.Flags().GetString("chain-id")
	if s.chainID == "" {
		if s.chainID, err = c.ChainID(ctx); err != nil {
			cancel()
			return nil, err
		}
	}
	return s, nil
}

func (s *txSession) close() { s.cancel() }

func (s *txSession) query(path string, out any) error {
	h, err := s.c.QueryJSON(s.ctx, path, nil, out)
	if err == nil {
		s.height = h
	}
	return err
}

func (s *txSession) job(id uint64) (*chain.JobView, error) {
	var v chain.JobView
	if err := s.query(chain.QueryJob+strconv.FormatUint(id, 10), &v); err != nil {
		return nil, fmt.Errorf("cannot read job %d: %w (list jobs with `ogpu query jobs`)", id, err)
	}
	return &v, nil
}

// sign builds and signs msgs from --from.
func (s *txSession) sign(msgs []types.RawMsg) ([]byte, error) {
	cmd := s.cmd
	o := node.BuildOptions{ChainID: s.chainID}
	o.Memo, _ = cmd.Flags().GetString("memo")
	if n, _ := cmd.Flags().GetInt64("nonce"); n >= 0 {
		o.Nonce = ptr(uint64(n))
	}
	if f, _ := cmd.Flags().GetString("fee"); f != "" {
		var err error
		if o.Fee, err = types.ParseAmount(f); err != nil {
			return nil, err
		}
	}
	pw, err := password(cmd, fmt.Sprintf("Password of %s: ", s.from.Name), false)
	if err != nil {
		return nil, err
	}
	key, err := s.w.Unlock(s.from.Name, pw)
	if err != nil {
		return nil, err
	}
	bz, _, err := s.c.SignTx(s.ctx, key, msgs, o)
	wallet.Zero(key)
	return bz, err
}

// txReport turns an included transaction into what a command prints: the
// value for --output json and the lines of text output after the tx line.
type txReport func(res *ctypes.ResultTx, out TxOutput) (any, func(w io.Writer))

// send broadcasts a signed tx and waits for it, or writes it with
// --sign-only. A refusal prints the tx output and returns the node's error
// with a hint of what to do.
func (s *txSession) send(bz []byte, report txReport) error {
	cmd := s.cmd
	if signOnly, _ := cmd.Flags().GetBool("sign-only"); signOnly {
		enc := "0x" + hex.EncodeToString(bz) + "\n"
		if out, _ := cmd.Flags().GetString("out"); out != "" {
			if err := os.WriteFile(out, []byte(enc), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "signed tx written to %s: broadcast it with `ogpu tx broadcast %s`\n", out, out)
			return nil
		}
		_, err := io.WriteString(cmd.OutOrStdout(), enc)
		return err
	}
	return broadcast(cmd, s.ctx, s.c, bz, report)
}

// broadcast sends a signed tx, waits for its block and prints the result
// (report adds to it). A refusal prints the tx output and returns the
// node's error with a hint of what to do.
func broadcast(cmd *cobra.Command, ctx context.Context, c *node.Client, bz []byte, report txReport) error {
	out := TxOutput{Hash: strings.ToUpper(hex.EncodeToString(types.TxHash(bz)))}
	res, err := c.BroadcastAndWait(ctx, bz)
	var txErr *node.TxError
	switch {
	case errors.As(err, &txErr):
		out.Code, out.Log, out.Height = txErr.Code, txErr.Log, txErr.Height
		if perr := output(cmd, out, func(io.Writer) {}); perr != nil {
			return perr
		}
		if h := txHint(txErr.Code); h != "" && !strings.Contains(txErr.Log, "tombstoned") {
			return fmt.Errorf("%w\n%s", err, h)
		}
		return err
	case err != nil:
		return err
	}
	out.Height, out.GasUsed = res.Height, res.TxResult.GasUsed
	for _, ev := range res.TxResult.Events {
		if ev.Type == chain.EventTypeTx {
			if e, err := chain.ParseEventTx(ev); err == nil {
				out.Fee = types.FormatAmount(e.Fee)
			}
		}
	}
	var v any = out
	text := func(io.Writer) {}
	if report != nil {
		v, text = report(res, out)
	}
	return output(cmd, v, func(w io.Writer) {
		fmt.Fprintf(w, "tx %s included in block %d (code 0), fee %s\n", out.Hash, out.Height, out.Fee)
		text(w)
	})
}

// signAndSendMsgs is sign then send for commands without a secret to save.
func signAndSendMsgs(cmd *cobra.Command, msgs []types.RawMsg, report txReport) error {
	s, err := openSession(cmd)
	if err != nil {
		return err
	}
	defer s.close()
	bz, err := s.sign(msgs)
	if err != nil {
		return err
	}
	return s.send(bz, report)
}

// txHint says what to do about a refused market transaction.
func txHint(code uint32) string {
	switch code {
	case types.ErrWrongPhase.Code:
		return "check the job's phase and deadlines with `ogpu query job ID`"
	case types.ErrNotEligible.Code:
		return "see what the job requires with `ogpu query why-no-bids ID` and `ogpu query provider ADDRESS`"
	case types.ErrUnknownJob.Code:
		return "list jobs with `ogpu query jobs`"
	case types.ErrUnknownProvider.Code:
		return "register first with `ogpu tx provider register`"
	case types.ErrJailed.Code:
		return "see the jail height with `ogpu query provider ADDRESS` (or `ogpu query validators`)"
	case types.ErrInsufficientFunds.Code, types.ErrInsufficientStake.Code:
		return "check the balance and stake with `ogpu query account NAME` and `ogpu query stake NAME`"
	case types.ErrCommitMismatch.Code:
		return "the saved salt does not open the commitment on chain: was it made by another machine or another key?"
	}
	return ""
}

// refused reports whether err says the tx is definitely not applied: the
// node refused it, or it failed in its block. A timeout is not a refusal:
// the tx may still be included.
func refused(err error) bool {
	var txErr *node.TxError
	return errors.As(err, &txErr)
}

// checkNoPendingSecret refuses to replace a saved salt whose commitment is
// not on chain: its tx may still be waiting in the mempool, and replacing
// the salt would make that commitment impossible to reveal.
func checkNoPendingSecret(path string) error {
	sec, err := loadSecret(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s holds the salt of tx %s, which is not in a block yet: wait for it (`ogpu query tx %s`), or, if it was dropped or never broadcast, delete that file and try again", path, sec.Tx, sec.Tx)
}

// ---- saved secrets ----

// Secret is a salt (and what it hides) kept under the wallet home between a
// commitment and its reveal: HOME/KIND/CHAIN-ID/JOB-STAGE-ADDRESS.json,
// mode 0600. Losing it loses the reveal (and a bid's deposit).
type Secret struct {
	Kind       string        `json:"kind"` // bid, result or canary
	ChainID    string        `json:"chain_id"`
	Job        uint64        `json:"job"`
	Stage      uint16        `json:"stage"`
	Account    types.Address `json:"account"`
	Price      *uint256.Int  `json:"price,omitempty"`
	Result     *types.Hash   `json:"result,omitempty"`
	Salt       types.Hash    `json:"salt"`
	Commitment types.Hash    `json:"commitment"`
	Tx         string        `json:"tx"`
	// Canary: the known answer of every stage (Result is stage 0's) and
	// the stage hashes the seal commits to; Account is the validator.
	Answers     []types.Hash `json:"answers,omitempty"`
	StageHashes []types.Hash `json:"stage_hashes,omitempty"`
}

// canarySalt is stage s's salt of a canary whose base salt is salt.
func canarySalt(salt types.Hash, s int) types.Hash {
	return types.Hash(sha256.Sum256(append(salt[:], byte(s>>8), byte(s))))
}

func secretKinds(kind string) string {
	switch kind {
	case "bid":
		return "bids"
	case "result":
		return "results"
	case "vote":
		return "votes"
	}
	return "canaries"
}

func (s *txSession) secretDir(kind string) (string, error) {
	if s.chainID == "" || strings.ContainsAny(s.chainID, `/\`) || s.chainID == "." || s.chainID == ".." {
		return "", fmt.Errorf("chain id %q cannot name a directory", s.chainID)
	}
	h, _ := s.cmd.Flags().GetString("home")
	return filepath.Join(expandHome(h), secretKinds(kind), s.chainID), nil
}

func (s *txSession) secretPath(kind string, job uint64, stage uint16) (string, error) {
	return s.secretPathFor(kind, job, stage, s.from.Address)
}

// secretPathFor names the secret of account (a canary's is its validator's,
// whichever account posted it).
func (s *txSession) secretPathFor(kind string, job uint64, stage uint16, account types.Address) (string, error) {
	dir, err := s.secretDir(kind)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, fmt.Sprintf("%d-%d-%s.json", job, stage, account.Hex())), nil
}

// saveSecret writes sec to path (0600) through a temporary file, so that a
// crash leaves either the old file or the new one.
func saveSecret(path string, sec *Secret) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("cannot save the salt: %w", err)
	}
	bz, err := json.MarshalIndent(sec, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(bz, '\n'), 0o600); err != nil {
		return fmt.Errorf("cannot save the salt: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot save the salt: %w", err)
	}
	return nil
}

func loadSecret(path string) (*Secret, error) {
	bz, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sec Secret
	if err := json.Unmarshal(bz, &sec); err != nil {
		return nil, fmt.Errorf("%s is not a saved salt: %w", path, err)
	}
	return &sec, nil
}

func randomSalt() (types.Hash, error) {
	var salt types.Hash
	if _, err := rand.Read(salt[:]); err != nil {
		return salt, fmt.Errorf("cannot draw a random salt: %w", err)
	}
	return salt, nil
}

// ---- argument parsing ----

func parseJobID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("invalid job id %q: want a positive number (list jobs with `ogpu query jobs`)", s)
	}
	return id, nil
}

func parseStage(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("invalid stage %q: want a number from 0", s)
	}
	return uint16(n), nil
}

// parseHash reads a 32-byte hash as 64 hex digits, with or without 0x.
func parseHash(what, s string) (types.Hash, error) {
	bz, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"))
	if err != nil || len(bz) != 32 {
		return types.Hash{}, fmt.Errorf("invalid %s %q: want 64 hex digits (a sha256 content hash)", what, s)
	}
	return types.Hash(bz), nil
}

func parsePositiveAmount(what, s string) (*uint256.Int, error) {
	a, err := types.ParseAmount(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if a.IsZero() {
		return nil, fmt.Errorf("%s must be positive", what)
	}
	return a, nil
}

// checkStage refuses a stage the job does not have.
func checkStage(j *chain.JobView, stage uint16) error {
	if stage >= j.Stages {
		return fmt.Errorf("job %d has %d stage(s), numbered 0..%d: there is no stage %d", j.ID, j.Stages, j.Stages-1, stage)
	}
	return nil
}

func amountOrZero(a *uint256.Int) *uint256.Int {
	if a == nil {
		return new(uint256.Int)
	}
	return a
}

// ---- providers ----

func newProviderTxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "provider", Short: "Register a provider, bond stake, unjail"}
	cmd.AddCommand(newProviderRecordCmd(false), newProviderRecordCmd(true),
		newBondCmd("bond", "Bond AMOUNT of the balance as stake (providers need params.staking.min_provider_stake)"),
		newUnbondCmd(), newProviderUnjailCmd())
	return cmd
}

func newProviderRecordCmd(update bool) *cobra.Command {
	use, short := "register", "Register --from as a provider: libp2p peer id, addresses, attributes, runtimes, models"
	if update {
		use, short = "update", "Replace --from's published provider record"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			var info market.ProviderInfo
			info.PeerID, _ = f.GetString("peer-id")
			info.Addrs, _ = f.GetStringArray("addr")
			info.Attributes, _ = f.GetStringArray("attr")
			info.Runtimes, _ = f.GetStringArray("runtime")
			info.Class, _ = f.GetString("class")
			info.Moniker, _ = f.GetString("moniker")
			models, _ := f.GetStringArray("model")
			for _, m := range models {
				h, err := parseHash("model hash", m)
				if err != nil {
					return err
				}
				info.Models = append(info.Models, h)
			}
			if err := info.Validate(); err != nil {
				return fmt.Errorf("invalid provider record: %w", err)
			}
			var msg types.RawMsg
			if update {
				msg = (&market.MsgUpdateProvider{Info: info}).Raw()
			} else {
				msg = (&market.MsgRegisterProvider{Info: info}).Raw()
			}
			return signAndSendMsgs(cmd, []types.RawMsg{msg}, func(res *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				var ev market.EventProviderRegistered
				_ = node.FindEvent(res, &ev)
				return out, func(w io.Writer) {
					verb := "registered"
					if update {
						verb = "updated"
					}
					fmt.Fprintf(w, "provider %s %s with peer id %s\n", ev.Provider.Hex(), verb, info.PeerID)
					if !update {
						fmt.Fprintln(w, "next: bond stake with `ogpu tx provider bond AMOUNT`; check with `ogpu query provider ADDRESS`")
					}
				}
			})
		},
	}
	f := cmd.Flags()
	f.String("peer-id", "", "libp2p peer id clients will dial (required)")
	f.StringArray("addr", nil, "libp2p multiaddr, e.g. /ip4/1.2.3.4/tcp/4001 (repeatable)")
	f.StringArray("attr", nil, "hardware attribute path, e.g. gpu/vendor/nvidia/model/h100 or ram/64Gi (repeatable)")
	f.StringArray("runtime", nil, "runtime offered, e.g. llama.cpp or ckks (repeatable)")
	f.StringArray("model", nil, "sha256 of a model file held locally (repeatable)")
	f.String("class", "", "determinism class: replicas of one class produce identical outputs")
	f.String("moniker", "", fmt.Sprintf("display name shown in consoles and explorers (at most %d printable characters)", market.MaxMonikerLen))
	_ = cmd.MarkFlagRequired("peer-id")
	addSignFlags(cmd)
	return cmd
}

func newProviderUnjailCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unjail",
		Short: "Let --from bid again after its jail time (a provider tombstoned for fraud never can)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return signAndSendMsgs(cmd, []types.RawMsg{(&market.MsgUnjailProvider{}).Raw()}, func(_ *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				return out, func(w io.Writer) { fmt.Fprintln(w, "provider unjailed: it may bid again") }
			})
		},
	}
	addSignFlags(cmd)
	return cmd
}

func newBondCmd(use, short string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use + " AMOUNT",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			amt, err := parsePositiveAmount("bond amount", args[0])
			if err != nil {
				return err
			}
			return signAndSendMsgs(cmd, []types.RawMsg{(&escrow.MsgBond{Amount: amt}).Raw()}, func(res *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				var ev escrow.EventBonded
				_ = node.FindEvent(res, &ev)
				return out, func(w io.Writer) {
					fmt.Fprintf(w, "bonded %s: %s now bonded\n", types.FormatAmount(amt), types.FormatAmount(ev.Bonded))
				}
			})
		},
	}
	addSignFlags(cmd)
	return cmd
}

func newUnbondCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unbond AMOUNT",
		Short: "Start unbonding AMOUNT of stake: it returns after params.staking.unbonding_blocks and stays slashable until then",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			amt, err := parsePositiveAmount("unbond amount", args[0])
			if err != nil {
				return err
			}
			return signAndSendMsgs(cmd, []types.RawMsg{(&escrow.MsgUnbond{Amount: amt}).Raw()}, func(res *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				var ev escrow.EventUnbonding
				_ = node.FindEvent(res, &ev)
				return out, func(w io.Writer) {
					fmt.Fprintf(w, "unbonding %s: it returns to the balance at height %d\n", types.FormatAmount(amt), ev.Matures)
				}
			})
		},
	}
	addSignFlags(cmd)
	return cmd
}

func newStakeTxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "stake", Short: "Bond and unbond stake (providers and validators alike)"}
	cmd.AddCommand(newBondCmd("bond", "Bond AMOUNT of the balance as stake"), newUnbondCmd())
	return cmd
}

// ---- validators ----

func newValidatorTxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "validator", Short: "Create a validator, unjail it"}
	create := &cobra.Command{
		Use:   "create",
		Short: "Make --from the operator of a validator with a CometBFT ed25519 consensus key and a self-bond",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, _ := cmd.Flags().GetString("name")
			pubStr, _ := cmd.Flags().GetString("pubkey")
			keyFile, _ := cmd.Flags().GetString("priv-validator-key")
			bondStr, _ := cmd.Flags().GetString("self-bond")
			var pub []byte
			var err error
			switch {
			case pubStr != "" && keyFile != "":
				return errors.New("give either --pubkey or --priv-validator-key, not both")
			case pubStr != "":
				pub, err = parseEd25519(pubStr)
			case keyFile != "":
				pub, err = readPrivValidatorPubKey(keyFile)
			default:
				return errors.New("the consensus key is missing: pass --priv-validator-key HOME/config/priv_validator_key.json of the node, or --pubkey (base64 or hex ed25519)")
			}
			if err != nil {
				return err
			}
			if bondStr == "" {
				return errors.New("--self-bond is required: at least params.staking.min_validator_stake (see `ogpu query params`)")
			}
			bond, err := parsePositiveAmount("self-bond", bondStr)
			if err != nil {
				return err
			}
			msg := &escrow.MsgCreateValidator{Name: name, PubKey: pub, SelfBond: bond}
			if _, err := escrow.DecodeMsgCreateValidator(msg.Raw().Data); err != nil {
				return err
			}
			return signAndSendMsgs(cmd, []types.RawMsg{msg.Raw()}, func(_ *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				return out, func(w io.Writer) {
					fmt.Fprintf(w, "validator %q created with %s self-bond; its power applies from the next blocks (`ogpu query validators`)\n", name, types.FormatAmount(bond))
				}
			})
		},
	}
	create.Flags().String("name", "", "validator name (required)")
	create.Flags().String("pubkey", "", "ed25519 consensus public key, base64 or hex")
	create.Flags().String("priv-validator-key", "", "read the public key from CometBFT's priv_validator_key.json")
	create.Flags().String("self-bond", "", "stake to bond, e.g. 1000ogpu (required)")
	_ = create.MarkFlagRequired("name")
	addSignFlags(create)
	unjail := &cobra.Command{
		Use:   "unjail",
		Short: "Return --from's jailed validator to the set after its jail time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return signAndSendMsgs(cmd, []types.RawMsg{(&escrow.MsgUnjailValidator{}).Raw()}, func(_ *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				return out, func(w io.Writer) { fmt.Fprintln(w, "validator unjailed") }
			})
		},
	}
	addSignFlags(unjail)
	cmd.AddCommand(create, unjail,
		newBondCmd("bond", "Bond AMOUNT more self-stake"), newUnbondCmd())
	return cmd
}

func parseEd25519(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if bz, err := hex.DecodeString(strings.TrimPrefix(s, "0x")); err == nil && len(bz) == 32 {
		return bz, nil
	}
	if bz, err := base64.StdEncoding.DecodeString(s); err == nil && len(bz) == 32 {
		return bz, nil
	}
	return nil, fmt.Errorf("--pubkey %q is not a 32-byte ed25519 key in base64 or hex (the pub_key.value of priv_validator_key.json)", s)
}

// readPrivValidatorPubKey reads the public key of CometBFT's
// priv_validator_key.json; the private key is not kept.
func readPrivValidatorPubKey(path string) ([]byte, error) {
	bz, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the validator key: %w", err)
	}
	var f struct {
		PubKey struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"pub_key"`
	}
	if err := json.Unmarshal(bz, &f); err != nil {
		return nil, fmt.Errorf("%s is not CometBFT's priv_validator_key.json: %w", path, err)
	}
	if f.PubKey.Type != "tendermint/PubKeyEd25519" {
		return nil, fmt.Errorf("%s holds a %q key: want tendermint/PubKeyEd25519", path, f.PubKey.Type)
	}
	pub, err := base64.StdEncoding.DecodeString(f.PubKey.Value)
	if err != nil || len(pub) != 32 {
		return nil, fmt.Errorf("%s: pub_key.value is not a base64 32-byte ed25519 key", path)
	}
	return pub, nil
}

// ---- jobs ----

// shortFlagHelp documents --short (market/short.go).
const shortFlagHelp = "what a stage left with fewer than --redundancy eligible providers (or agreeing results) gets: audit (the validators re-execute it before it is paid; the default, fine-tune excepted), refund (not awarded, or settled unverified: nobody paid) or rebid (one more bid window, then refund)"

// JobPostOutput is what `tx job post` prints.
type JobPostOutput struct {
	TxOutput
	Job        uint64       `json:"job"`
	Locked     *uint256.Int `json:"locked"`
	BidEnd     uint64       `json:"bid_end"`
	RevealEnd  uint64       `json:"reveal_end"`
	CanaryFile string       `json:"canary_file,omitempty"`
}

func newJobTxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "Post and cancel jobs"}
	cmd.AddCommand(newJobPostCmd(), newJobCancelCmd())
	return cmd
}

func newJobPostCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "post",
		Short: "Post a job; locks stages × redundancy × max price + the validator fee in escrow",
		Long: `Post a job. Posting locks stages × redundancy × max-price plus the validator
fee from --from's balance. Providers bid during --bid-blocks blocks, reveal
during --reveal-blocks, and the award runs by itself at the end of the reveal
window; winners then have --execute-blocks to commit a result and
--verify-blocks more to reveal it. Every job carries a random 32-byte seal.
With --canary-answer (one per stage) and --canary-validator, the job is a
spot check: the seal commits the validator to the known answers, whose salts
are saved under the wallet home. Post a canary from an account that is not
the validator's, so that nothing tells it from a client's job; if the
providers agree on a wrong result, the validator contests it with
` + "`ogpu tx canary reveal JOB --from VALIDATOR`" + ` before the task confirms.`,
		Args: cobra.NoArgs,
		RunE: runJobPost,
	}
	f := cmd.Flags()
	f.String("kind", market.KindInference, "inference or pipeline")
	f.String("mode", market.ModeAuction, "auction (sealed bids) or pool (first claims at the fixed max price)")
	f.String("model", "", "sha256 of the model (required)")
	f.Uint64("model-size", 0, "model size in bytes")
	f.Uint16("stages", 1, "number of stages")
	f.Uint16("redundancy", 2, "providers per stage (at least 2)")
	f.String("short", "", shortFlagHelp)
	f.String("max-price", "", "price cap per stage replica, e.g. 10ogpu (required)")
	f.String("min-stake", "0", "least bonded stake of a provider, on top of the chain minimum")
	f.Uint64("min-reputation", 0, "least reputation score (0..1000)")
	f.StringArray("require", nil, "attribute requirement, e.g. gpu/vendor/nvidia or ram>=32Gi (repeatable)")
	f.String("runtime", "", "runtime a provider must offer")
	f.String("class", "", "determinism class a provider must be in")
	f.String("input", "", "sha256 of the (encrypted) input")
	f.Uint64("max-tokens", 0, "token budget of an inference job (providers price by it)")
	f.Uint64("bid-blocks", 10, "blocks of sealed bidding")
	f.Uint64("reveal-blocks", 10, "blocks of bid reveals")
	f.Uint64("execute-blocks", 30, "blocks from the award to the last result commitment")
	f.Uint64("verify-blocks", 20, "blocks from the commit deadline to the last result reveal")
	f.StringArray("canary-answer", nil, "post a canary: the known result hash of a stage (repeat for every stage)")
	f.String("canary-validator", "", "the validator operator (address or key name) that may reveal the canary; default --from")
	f.Uint64("prompt-tokens", 0, "the prompt's length in model tokens (inference jobs; providers check it against their context)")
	_ = cmd.MarkFlagRequired("model")
	_ = cmd.MarkFlagRequired("max-price")
	addSignFlags(cmd)
	return cmd
}

func runJobPost(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	m := &market.MsgPostJob{}
	m.Kind, _ = f.GetString("kind")
	m.Mode, _ = f.GetString("mode")
	var err error
	modelStr, _ := f.GetString("model")
	if m.Model, err = parseHash("model hash", modelStr); err != nil {
		return err
	}
	m.ModelSize, _ = f.GetUint64("model-size")
	m.Stages, _ = f.GetUint16("stages")
	m.Redundancy, _ = f.GetUint16("redundancy")
	m.Short, _ = f.GetString("short")
	m.MaxTokens, _ = f.GetUint64("max-tokens")
	priceStr, _ := f.GetString("max-price")
	if m.MaxPrice, err = parsePositiveAmount("max price", priceStr); err != nil {
		return err
	}
	minStake, _ := f.GetString("min-stake")
	if m.Req.MinStake, err = types.ParseAmount(minStake); err != nil {
		return fmt.Errorf("min stake: %w", err)
	}
	m.Req.MinReputation, _ = f.GetUint64("min-reputation")
	m.Req.Attributes, _ = f.GetStringArray("require")
	m.Req.Runtime, _ = f.GetString("runtime")
	m.Req.Class, _ = f.GetString("class")
	if in, _ := f.GetString("input"); in != "" {
		if m.Input, err = parseHash("input hash", in); err != nil {
			return err
		}
	}
	m.Windows.Bid, _ = f.GetUint64("bid-blocks")
	m.Windows.Reveal, _ = f.GetUint64("reveal-blocks")
	m.Windows.Execute, _ = f.GetUint64("execute-blocks")
	m.Windows.Verify, _ = f.GetUint64("verify-blocks")
	if m.Mode == market.ModePool && !f.Changed("reveal-blocks") {
		m.Windows.Reveal = 0
	}
	m.PromptTokens, _ = f.GetUint64("prompt-tokens")
	var answers []types.Hash
	list, _ := f.GetStringArray("canary-answer")
	for _, a := range list {
		h, err := parseHash("canary answer", a)
		if err != nil {
			return err
		}
		answers = append(answers, h)
	}
	if len(answers) != 0 && len(answers) != int(m.Stages) {
		return fmt.Errorf("--canary-answer given %d times for %d stages: give one known answer per stage", len(answers), m.Stages)
	}
	s, err := openSession(cmd)
	if err != nil {
		return err
	}
	defer s.close()
	var sec *Secret
	salt, err := randomSalt()
	if err != nil {
		return err
	}
	m.Seal = salt
	if len(answers) > 0 {
		validator := s.from.Address
		if v, _ := f.GetString("canary-validator"); v != "" {
			if validator, err = resolveAddress(cmd, v); err != nil {
				return err
			}
		}
		hashes := make([]types.Hash, len(answers))
		for i, a := range answers {
			hashes[i] = verifier.CanaryStageHash(a, canarySalt(salt, i))
		}
		m.Seal = verifier.CanarySeal(validator, hashes)
		sec = &Secret{Kind: "canary", ChainID: s.chainID, Account: validator, Result: &answers[0], Salt: salt, Commitment: m.Seal, Answers: answers, StageHashes: hashes}
	}
	// The chain's own checks, before anything is signed or saved.
	if _, err := market.DecodeMsgPostJob(m.Raw().Data); err != nil {
		return err
	}
	bz, err := s.sign([]types.RawMsg{m.Raw()})
	if err != nil {
		return err
	}
	var pending string
	if sec != nil {
		sec.Tx = strings.ToUpper(hex.EncodeToString(types.TxHash(bz)))
		dir, err := s.secretDir("canary")
		if err != nil {
			return err
		}
		pending = filepath.Join(dir, "pending-"+sec.Tx+".json")
		if err := saveSecret(pending, sec); err != nil {
			return err
		}
	}
	var renameErr error
	err = s.send(bz, func(res *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
		var ev market.EventJobPosted
		evErr := node.FindEvent(res, &ev)
		o := JobPostOutput{TxOutput: out, Job: ev.Job, Locked: ev.Locked, BidEnd: ev.BidEnd, RevealEnd: ev.RevealEnd}
		if evErr == nil && sec != nil {
			sec.Job = ev.Job
			final, err := s.secretPathFor("canary", ev.Job, 0, sec.Account)
			if err == nil {
				if err = saveSecret(final, sec); err == nil {
					os.Remove(pending)
					o.CanaryFile = final
				}
			}
			renameErr = err
		}
		return o, func(w io.Writer) {
			if evErr != nil {
				fmt.Fprintf(w, "warning: %v\n", evErr)
				return
			}
			fmt.Fprintf(w, "job %d posted: %s locked in escrow (%d stage(s) × %d replicas × %s cap + validator fee)\n",
				ev.Job, types.FormatAmount(ev.Locked), ev.Stages, ev.Redundancy, types.FormatAmount(ev.MaxPrice))
			if ev.Mode == market.ModePool {
				fmt.Fprintf(w, "providers claim tasks until height %d; then each task goes to %d of its eligible claimants drawn by the chain's randomness beacon (arriving first wins nothing), a block or two after %d; the job runs once the draw is made\n", ev.RevealEnd, ev.Redundancy, ev.RevealEnd)
			} else {
				fmt.Fprintf(w, "sealed bids until height %d, reveals until %d; the award runs at the end of the block in which the last sealed bid is revealed, at the latest of block %d\n", ev.BidEnd, ev.RevealEnd, ev.RevealEnd)
			}
			if o.CanaryFile != "" {
				fmt.Fprintf(w, "canary salts saved in %s: if the providers agree on a wrong result, contest it with `ogpu tx canary reveal %d --stage S --from %s` while the task confirms\n", o.CanaryFile, ev.Job, sec.Account.Hex())
			}
			fmt.Fprintf(w, "follow it with `ogpu query job %d`\n", ev.Job)
		}
	})
	if refused(err) && pending != "" {
		os.Remove(pending)
	}
	if err == nil && renameErr != nil {
		return fmt.Errorf("the job was posted but its canary salt stays in %s: %w", pending, renameErr)
	}
	return err
}

func newJobCancelCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel --from's job before its award; the escrow and all bid deposits are refunded",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			return signAndSendMsgs(cmd, []types.RawMsg{(&market.MsgCancelJob{Job: id}).Raw()}, func(res *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				var ev market.EventJobCancelled
				_ = node.FindEvent(res, &ev)
				return out, func(w io.Writer) {
					fmt.Fprintf(w, "job %d cancelled: %s refunded\n", id, types.FormatAmount(ev.Refund))
				}
			})
		},
	}
	addSignFlags(cmd)
	return cmd
}

// ---- bids ----

func newMarketTxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "market", Short: "Bid in auctions (sealed, then revealed) and claim pool tasks"}
	cmd.AddCommand(newBidCmd(), newRevealBidCmd(), newClaimCmd())
	return cmd
}

// BidOutput is what `tx market bid` prints.
type BidOutput struct {
	TxOutput
	Job        uint64       `json:"job"`
	Stage      uint16       `json:"stage"`
	Price      *uint256.Int `json:"price"`
	Commitment types.Hash   `json:"commitment"`
	SaltFile   string       `json:"salt_file"`
	RevealFrom uint64       `json:"reveal_from"`
	RevealEnd  uint64       `json:"reveal_end"`
}

func newBidCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bid JOB STAGE PRICE",
		Short: "Place a sealed bid of PRICE on a job's stage; the salt and price are saved under the wallet home for the reveal",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, stage, err := parseJobStage(args)
			if err != nil {
				return err
			}
			price, err := parsePositiveAmount("price", args[2])
			if err != nil {
				return err
			}
			s, err := openSession(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			j, err := s.job(id)
			if err != nil {
				return err
			}
			if err := checkStage(j, stage); err != nil {
				return err
			}
			switch {
			case j.Mode != market.ModeAuction:
				return fmt.Errorf("job %d is a %s job: claim its tasks with `ogpu tx market claim %d STAGE`", id, j.Mode, id)
			case j.State != market.JobBidding:
				return fmt.Errorf("job %d is %s, not taking bids (bids were accepted until height %d)", id, j.State, j.BidEnd)
			case price.Gt(j.MaxPrice):
				return fmt.Errorf("price %s is above job %d's cap of %s: it could never be revealed", types.FormatAmount(price), id, types.FormatAmount(j.MaxPrice))
			}
			path, err := s.secretPath("bid", id, stage)
			if err != nil {
				return err
			}
			var bids []chain.BidView
			if err := s.query(chain.QueryBids+strconv.FormatUint(id, 10), &bids); err != nil {
				return err
			}
			for _, b := range bids {
				if b.Stage == stage && b.Provider == s.from.Address {
					return fmt.Errorf("%s already has a sealed bid on job %d stage %d (its salt: %s); reveal it with `ogpu tx market reveal %d`", s.from.Address.Hex(), id, stage, path, id)
				}
			}
			if err := checkNoPendingSecret(path); err != nil {
				return err
			}
			salt, err := randomSalt()
			if err != nil {
				return err
			}
			commit := market.BidCommitment(id, stage, price, salt, s.from.Address)
			bz, err := s.sign([]types.RawMsg{(&market.MsgCommitBid{Job: id, Stage: stage, Commitment: commit}).Raw()})
			if err != nil {
				return err
			}
			sec := &Secret{Kind: "bid", ChainID: s.chainID, Job: id, Stage: stage, Account: s.from.Address, Price: price, Salt: salt, Commitment: commit,
				Tx: strings.ToUpper(hex.EncodeToString(types.TxHash(bz)))}
			if err := saveSecret(path, sec); err != nil {
				return err
			}
			err = s.send(bz, func(_ *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				o := BidOutput{TxOutput: out, Job: id, Stage: stage, Price: price, Commitment: commit, SaltFile: path, RevealFrom: j.BidEnd + 1, RevealEnd: j.RevealEnd}
				return o, func(w io.Writer) {
					fmt.Fprintf(w, "sealed bid of %s on job %d stage %d placed (deposit locked until the award)\n", types.FormatAmount(price), id, stage)
					fmt.Fprintf(w, "salt saved in %s\n", path)
					fmt.Fprintf(w, "reveal it at heights %d..%d with `ogpu tx market reveal %d`, or the deposit is lost\n", o.RevealFrom, o.RevealEnd, id)
				}
			})
			if refused(err) {
				os.Remove(path) // nothing on chain commits to this salt
			}
			return err
		},
	}
	addSignFlags(cmd)
	return cmd
}

// RevealOutput is what `tx market reveal` prints.
type RevealOutput struct {
	TxOutput
	Job      uint64        `json:"job"`
	Revealed []RevealedBid `json:"revealed"`
}

// RevealedBid is one opened bid.
type RevealedBid struct {
	Stage uint16       `json:"stage"`
	Price *uint256.Int `json:"price"`
}

func newRevealBidCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reveal JOB",
		Short: "Reveal every sealed bid --from saved for JOB (or only --stage), in one transaction",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			s, err := openSession(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			j, err := s.job(id)
			if err != nil {
				return err
			}
			onlyStage := cmd.Flags().Changed("stage")
			st, _ := cmd.Flags().GetUint16("stage")
			if onlyStage {
				if err := checkStage(j, st); err != nil {
					return err
				}
			}
			dir, err := s.secretDir("bid")
			if err != nil {
				return err
			}
			files, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%d-*-%s.json", id, s.from.Address.Hex())))
			sort.Strings(files)
			var secs []*Secret
			for _, file := range files {
				sec, err := loadSecret(file)
				if err != nil {
					return err
				}
				if sec.Job != id || sec.Account != s.from.Address || (onlyStage && sec.Stage != st) {
					continue
				}
				secs = append(secs, sec)
			}
			if len(secs) == 0 {
				what := fmt.Sprintf("job %d", id)
				if onlyStage {
					what = fmt.Sprintf("job %d stage %d", id, st)
				}
				return fmt.Errorf("no saved bid of %s on %s in %s: bids are revealed from the salt `ogpu tx market bid` saved on the machine (and wallet home) that placed them", s.from.Address.Hex(), what, dir)
			}
			var bids []chain.BidView
			if err := s.query(chain.QueryBids+strconv.FormatUint(id, 10), &bids); err != nil {
				return err
			}
			var msgs []types.RawMsg
			var opened []RevealedBid
			for _, sec := range secs {
				var onChain *chain.BidView
				for i := range bids {
					if bids[i].Stage == sec.Stage && bids[i].Provider == s.from.Address {
						onChain = &bids[i]
					}
				}
				switch {
				case onChain == nil:
					fmt.Fprintf(cmd.ErrOrStderr(), "skipping stage %d: the bid saved in %s is not on chain (was its tx refused?)\n", sec.Stage, dir)
					continue
				case onChain.Revealed:
					continue
				case onChain.Commitment != sec.Commitment:
					return fmt.Errorf("the saved bid on job %d stage %d does not match the commitment on chain: %w", id, sec.Stage, types.ErrCommitMismatch)
				}
				msgs = append(msgs, (&market.MsgRevealBid{Job: id, Stage: sec.Stage, Price: sec.Price, Salt: sec.Salt}).Raw())
				opened = append(opened, RevealedBid{Stage: sec.Stage, Price: sec.Price})
			}
			if len(msgs) == 0 {
				return fmt.Errorf("every saved bid of %s on job %d is already revealed or not on chain (`ogpu query bids %d`)", s.from.Address.Hex(), id, id)
			}
			switch {
			case j.State == market.JobBidding:
				return fmt.Errorf("job %d is still taking sealed bids: reveals open at height %d (now %d); wait and retry", id, j.BidEnd+1, s.height)
			case j.State != market.JobRevealing:
				return fmt.Errorf("job %d is %s: its reveal window ended at height %d", id, j.State, j.RevealEnd)
			}
			bz, err := s.sign(msgs)
			if err != nil {
				return err
			}
			return s.send(bz, func(_ *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				return RevealOutput{TxOutput: out, Job: id, Revealed: opened}, func(w io.Writer) {
					for _, o := range opened {
						fmt.Fprintf(w, "revealed bid of %s on job %d stage %d\n", types.FormatAmount(o.Price), id, o.Stage)
					}
					fmt.Fprintf(w, "the award runs at the end of block %d, or of the block that reveals the last sealed bid if that is sooner: see `ogpu query job %d`\n", j.RevealEnd, id)
				}
			})
		},
	}
	cmd.Flags().Uint16("stage", 0, "reveal only the bid on this stage")
	addSignFlags(cmd)
	return cmd
}

func newClaimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "claim JOB STAGE",
		Short: "Claim a task of a pool-mode job at its fixed reward",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, stage, err := parseJobStage(args)
			if err != nil {
				return err
			}
			s, err := openSession(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			j, err := s.job(id)
			if err != nil {
				return err
			}
			if err := checkStage(j, stage); err != nil {
				return err
			}
			if j.Mode != market.ModePool {
				return fmt.Errorf("job %d is an auction: bid with `ogpu tx market bid %d %d PRICE`", id, id, stage)
			}
			bz, err := s.sign([]types.RawMsg{(&market.MsgClaimTask{Job: id, Stage: stage}).Raw()})
			if err != nil {
				return err
			}
			return s.send(bz, func(res *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				var filled market.EventTaskFilled
				fillErr := node.FindEvent(res, &filled)
				return out, func(w io.Writer) {
					switch {
					case fillErr == nil && filled.Filled == filled.Stages:
						fmt.Fprintf(w, "claimed job %d task %d at %s: the last of the task's %d claims: it is awarded to %s and the job runs now\n", id, stage, types.FormatAmount(j.MaxPrice), j.Redundancy, strings.Join(filled.Providers, ", "))
					case fillErr == nil:
						fmt.Fprintf(w, "claimed job %d task %d at %s: the last of the task's %d claims: it is awarded to %s and runs when the job's other tasks are (at the latest after block %d)\n", id, stage, types.FormatAmount(j.MaxPrice), j.Redundancy, strings.Join(filled.Providers, ", "), j.RevealEnd)
					default:
						fmt.Fprintf(w, "claimed job %d task %d at %s; it is awarded once %d eligible providers claimed it, or at the end of block %d\n", id, stage, types.FormatAmount(j.MaxPrice), j.Redundancy, j.RevealEnd)
					}
				}
			})
		},
	}
	addSignFlags(cmd)
	return cmd
}

// ---- results ----

func newResultTxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "result", Short: "Commit to a stage's result hash, then reveal it"}
	cmd.AddCommand(newResultCommitCmd(), newResultRevealCmd())
	return cmd
}

// assignedTask finds the live slot of addr in a job's stage.
func assignedTask(j *chain.JobView, stage uint16, addr types.Address) (*chain.TaskView, *chain.SlotView, error) {
	for i := range j.Tasks {
		t := &j.Tasks[i]
		if t.Stage != stage {
			continue
		}
		for k := range t.Slots {
			if t.Slots[k].Provider == addr && !t.Slots[k].NoShow {
				return t, &t.Slots[k], nil
			}
		}
		return t, nil, fmt.Errorf("%s is not assigned to job %d stage %d (its providers: `ogpu query job %d`)", addr.Hex(), j.ID, stage, j.ID)
	}
	if j.State == market.JobBidding || j.State == market.JobRevealing {
		return nil, nil, fmt.Errorf("job %d is not awarded yet: the award runs once every sealed bid is revealed, at the latest at the end of block %d", j.ID, j.RevealEnd)
	}
	return nil, nil, fmt.Errorf("job %d stage %d was not awarded (job %s)", j.ID, stage, j.State)
}

// ResultCommitOutput is what `tx result commit` prints.
type ResultCommitOutput struct {
	TxOutput
	Job         uint64     `json:"job"`
	Stage       uint16     `json:"stage"`
	Result      types.Hash `json:"result"`
	Commitment  types.Hash `json:"commitment"`
	SaltFile    string     `json:"salt_file"`
	RevealsOpen bool       `json:"reveals_open"`
}

func newResultCommitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "commit JOB STAGE RESULT_HASH",
		Short: "Commit to RESULT_HASH for an assigned stage; the salt is saved under the wallet home for the reveal",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, stage, err := parseJobStage(args)
			if err != nil {
				return err
			}
			result, err := parseHash("result hash", args[2])
			if err != nil {
				return err
			}
			s, err := openSession(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			j, err := s.job(id)
			if err != nil {
				return err
			}
			if err := checkStage(j, stage); err != nil {
				return err
			}
			t, slot, err := assignedTask(j, stage, s.from.Address)
			if err != nil {
				return err
			}
			path, err := s.secretPath("result", id, stage)
			if err != nil {
				return err
			}
			switch {
			case slot.Committed:
				return fmt.Errorf("%s already committed a result for job %d stage %d (salt in %s): reveal it with `ogpu tx result reveal %d %d`", s.from.Address.Hex(), id, stage, path, id, stage)
			case t.Status != verifier.TaskExecuting.String():
				return fmt.Errorf("job %d stage %d is %s, not taking results", id, stage, t.Status)
			}
			if err := checkNoPendingSecret(path); err != nil {
				return err
			}
			salt, err := randomSalt()
			if err != nil {
				return err
			}
			commit := verifier.ResultCommitment(result, salt, s.from.Address)
			bz, err := s.sign([]types.RawMsg{(&verifier.MsgCommitResult{Job: id, Stage: stage, Commitment: commit}).Raw()})
			if err != nil {
				return err
			}
			sec := &Secret{Kind: "result", ChainID: s.chainID, Job: id, Stage: stage, Account: s.from.Address, Result: &result, Salt: salt, Commitment: commit,
				Tx: strings.ToUpper(hex.EncodeToString(types.TxHash(bz)))}
			if err := saveSecret(path, sec); err != nil {
				return err
			}
			err = s.send(bz, func(res *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				var ev market.EventResultCommitted
				_ = node.FindEvent(res, &ev)
				o := ResultCommitOutput{TxOutput: out, Job: id, Stage: stage, Result: result, Commitment: commit, SaltFile: path, RevealsOpen: ev.RevealsOpen}
				return o, func(w io.Writer) {
					fmt.Fprintf(w, "committed to result %x for job %d stage %d; salt saved in %s\n", result, id, stage, path)
					if ev.RevealsOpen {
						fmt.Fprintf(w, "every provider has committed: reveal now with `ogpu tx result reveal %d %d` (until height %d)\n", id, stage, t.RevealDeadline)
					} else {
						fmt.Fprintf(w, "reveal with `ogpu tx result reveal %d %d` once every provider has committed or after height %d\n", id, stage, t.CommitDeadline)
					}
				}
			})
			if refused(err) {
				os.Remove(path)
			}
			return err
		},
	}
	addSignFlags(cmd)
	return cmd
}

// ResultRevealOutput is what `tx result reveal` prints.
type ResultRevealOutput struct {
	TxOutput
	Job     uint64     `json:"job"`
	Stage   uint16     `json:"stage"`
	Result  types.Hash `json:"result"`
	Outcome string     `json:"outcome,omitempty"` // confirming (agreed, settles after the canary window), disputed, or empty while others have yet to reveal
}

func newResultRevealCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reveal JOB STAGE",
		Short: "Reveal the result --from committed for a stage, from the saved salt",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, stage, err := parseJobStage(args)
			if err != nil {
				return err
			}
			s, err := openSession(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			j, err := s.job(id)
			if err != nil {
				return err
			}
			if err := checkStage(j, stage); err != nil {
				return err
			}
			path, err := s.secretPath("result", id, stage)
			if err != nil {
				return err
			}
			sec, err := loadSecret(path)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no saved result commitment of %s for job %d stage %d in %s: commit first with `ogpu tx result commit %d %d RESULT_HASH` (from this machine)", s.from.Address.Hex(), id, stage, filepath.Dir(path), id, stage)
			}
			if err != nil {
				return err
			}
			_, slot, err := assignedTask(j, stage, s.from.Address)
			if err != nil {
				return err
			}
			switch {
			case !slot.Committed:
				return fmt.Errorf("%s has no result commitment on chain for job %d stage %d (was the commit refused?): commit again with `ogpu tx result commit`", s.from.Address.Hex(), id, stage)
			case slot.Revealed:
				return fmt.Errorf("%s already revealed its result for job %d stage %d", s.from.Address.Hex(), id, stage)
			}
			bz, err := s.sign([]types.RawMsg{(&verifier.MsgRevealResult{Job: id, Stage: stage, Result: *sec.Result, Salt: sec.Salt}).Raw()})
			if err != nil {
				return err
			}
			return s.send(bz, func(res *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				o := ResultRevealOutput{TxOutput: out, Job: id, Stage: stage, Result: *sec.Result}
				var settled market.EventTaskSettled
				var disputed market.EventDisputeOpened
				var confirming market.EventTaskConfirming
				if node.FindEvent(res, &settled) == nil {
					o.Outcome = settled.Outcome
				} else if node.FindEvent(res, &disputed) == nil {
					o.Outcome = "disputed"
				} else if node.FindEvent(res, &confirming) == nil {
					o.Outcome = "confirming"
				}
				return o, func(w io.Writer) {
					fmt.Fprintf(w, "revealed result %x for job %d stage %d\n", *sec.Result, id, stage)
					switch o.Outcome {
					case "":
						fmt.Fprintln(w, "waiting for the other providers' reveals")
					case "disputed":
						fmt.Fprintf(w, "the revealed results differ: dispute opened, validators seal votes until height %d and open them until %d (`ogpu tx dispute vote|open`)\n", disputed.SealBy, disputed.Deadline)
					case "confirming":
						fmt.Fprintf(w, "the results agree: the stage settles at the end of block %d (after its canary window)\n", confirming.SettlesAt)
					default:
						fmt.Fprintf(w, "stage settled (%s): %s paid to providers, %s refunded\n", o.Outcome, types.FormatAmount(settled.Paid), types.FormatAmount(settled.Refund))
					}
				}
			})
		},
	}
	addSignFlags(cmd)
	return cmd
}

func newDisputeTxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "dispute", Short: "Validators vote on disputed results and input checks: seal, then open"}
	vote := &cobra.Command{
		Use:   "vote JOB STAGE RESULT_HASH|available|bad|abstain",
		Short: "Seal a vote, as an active validator's operator, on a disputed stage (the result you re-executed) or an input check",
		Long: `Seal a vote: the chain stores hash(job, stage, result, salt, validator), and
the salt is saved under the wallet home. Open it with ` + "`ogpu tx dispute open JOB STAGE`" + `
once every active validator has sealed or the sealing phase is over.`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, stage, err := parseJobStage(args)
			if err != nil {
				return err
			}
			var result types.Hash
			switch args[2] {
			case "available":
				result = verifier.InputAvailable
			case "bad":
				result = verifier.InputBad
			case "abstain":
				result = verifier.Abstain
			default:
				if result, err = parseHash("result hash", args[2]); err != nil {
					return err
				}
			}
			salt, err := randomSalt()
			if err != nil {
				return err
			}
			s, err := openSession(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			c := verifier.VoteCommitment(id, stage, result, salt, s.from.Address)
			path, err := s.secretPath("vote", id, stage)
			if err != nil {
				return err
			}
			sec := &Secret{Kind: "vote", ChainID: s.chainID, Job: id, Stage: stage, Account: s.from.Address, Result: &result, Salt: salt, Commitment: c}
			if err := saveSecret(path, sec); err != nil {
				return err
			}
			bz, err := s.sign([]types.RawMsg{(&verifier.MsgCommitVote{Job: id, Stage: stage, Commitment: c}).Raw()})
			if err != nil {
				return err
			}
			return s.send(bz, func(_ *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				return out, func(w io.Writer) {
					fmt.Fprintf(w, "sealed a vote for %x on job %d stage %d (salt in %s): open it with `ogpu tx dispute open %d %d`\n", result, id, stage, path, id, stage)
				}
			})
		},
	}
	open := &cobra.Command{
		Use:   "open JOB STAGE",
		Short: "Open the vote you sealed on a disputed stage or input check",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, stage, err := parseJobStage(args)
			if err != nil {
				return err
			}
			s, err := openSession(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			path, err := s.secretPath("vote", id, stage)
			if err != nil {
				return err
			}
			sec, err := loadSecret(path)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no sealed vote of %s on job %d stage %d in %s: seal one with `ogpu tx dispute vote`", s.from.Address.Hex(), id, stage, filepath.Dir(path))
			}
			if err != nil {
				return err
			}
			result := *sec.Result
			bz, err := s.sign([]types.RawMsg{(&verifier.MsgVoteDispute{Job: id, Stage: stage, Result: result, Salt: sec.Salt}).Raw()})
			if err != nil {
				return err
			}
			return s.send(bz, func(res *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				var settled market.EventTaskSettled
				decided := node.FindEvent(res, &settled) == nil
				v := struct {
					TxOutput
					Job     uint64     `json:"job"`
					Stage   uint16     `json:"stage"`
					Result  types.Hash `json:"result"`
					Decided bool       `json:"decided"`
				}{out, id, stage, result, decided}
				return v, func(w io.Writer) {
					fmt.Fprintf(w, "opened the vote for %x on job %d stage %d\n", result, id, stage)
					if decided {
						fmt.Fprintf(w, "every active validator voted: the stage settled %s on %x (%s paid, %s refunded)\n", settled.Outcome, settled.Result, types.FormatAmount(settled.Paid), types.FormatAmount(settled.Refund))
					} else {
						fmt.Fprintln(w, "the vote ends when every active validator has opened its vote, or at the dispute deadline")
					}
				}
			})
		},
	}
	addSignFlags(vote)
	addSignFlags(open)
	cmd.AddCommand(vote, open)
	return cmd
}

func newCanaryTxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "canary", Short: "Contest a wrong result of your canary job with its known answer"}
	reveal := &cobra.Command{
		Use:   "reveal JOB",
		Short: "Claim a canary job's known answer for --stage, --from the validator its seal names (saved by `ogpu tx job post --canary-answer`)",
		Long: `Claim a canary job's known answer for one stage. The chain accepts it from
the active validator the seal names, after every provider of the stage
revealed (while the task confirms) or while its dispute takes sealed votes.
If the answer differs from the providers', the validators vote; a claim the
vote rejects costs the validator fraud_slash_bps of its stake.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			stage, _ := cmd.Flags().GetUint16("stage")
			s, err := openSession(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			path, err := s.secretPath("canary", id, 0)
			if err != nil {
				return err
			}
			sec, err := loadSecret(path)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no saved canary of job %d in %s: only the machine that posted the canary with --canary-answer has its salts", id, filepath.Dir(path))
			}
			if err != nil {
				return err
			}
			if int(stage) >= len(sec.Answers) {
				return fmt.Errorf("canary job %d has %d stage(s): --stage %d does not exist", id, len(sec.Answers), stage)
			}
			m := &verifier.MsgRevealCanary{Job: id, Stage: stage, Answer: sec.Answers[stage], Salt: canarySalt(sec.Salt, int(stage)), StageHashes: sec.StageHashes}
			bz, err := s.sign([]types.RawMsg{m.Raw()})
			if err != nil {
				return err
			}
			return s.send(bz, func(_ *ctypes.ResultTx, out TxOutput) (any, func(io.Writer)) {
				return out, func(w io.Writer) {
					fmt.Fprintf(w, "canary answer %x of job %d stage %d claimed\n", m.Answer, id, stage)
				}
			})
		},
	}
	reveal.Flags().Uint16("stage", 0, "the stage whose answer to claim")
	addSignFlags(reveal)
	cmd.AddCommand(reveal)
	return cmd
}

// parseJobStage reads the JOB STAGE arguments of a command.
func parseJobStage(args []string) (uint64, uint16, error) {
	id, err := parseJobID(args[0])
	if err != nil {
		return 0, 0, err
	}
	stage, err := parseStage(args[1])
	return id, stage, err
}

func ptr[T any](v T) *T { return &v }
