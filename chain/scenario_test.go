package chain

// Scenario tests: line-oriented scripts in testdata/scenarios/*.txt drive the
// real App through ABCI (InitChain, CheckTx, FinalizeBlock with a block
// hash, last-commit votes and misbehaviour, Commit), with every invariant
// checked after every block (WithInvariants): supply conservation, exact
// job escrow, stake totals, validator power == stake. Each script's output
// (tx results, events, dumps) must equal its .golden file;
//
//	go test ./chain -run TestScenarios -update
//
// rewrites the goldens, which are then reviewed by hand.
//
// The language, one command per line ('#' at the start of a line or after a
// blank starts a comment):
//
//	genesis param PATH VALUE           e.g. market.dispute_blocks 5, market.bid_deposit 1ogpu
//	genesis account NAME AMOUNT
//	genesis validator NAME STAKE       operator addrOf(NAME), consensus key from NAME
//	tx NAME VERB ARGS... [expect-code N]
//	                                   one tx in its own block; CheckTx must give the same
//	                                   code as FinalizeBlock (0 unless expect-code)
//	block [hash=WORD] [absent=N,..] [double-sign=N,..] [infraction=H]
//	                                   infraction: the height of the double signing
//	                                   (default: the block before)
//	  tx ...                           several txs in one block
//	end
//	advance N [absent=N,..]            N blocks without txs
//	expect balance|stake|unbonding NAME AMOUNT
//	expect power NAME N                validator power last sent to CometBFT
//	expect active NAME true|false      escrow.IsActiveValidator
//	expect reputation NAME SCORE
//	expect job ID state STATE | expect job ID locked AMOUNT
//	expect dispute SESSION N STATUS    open, decided, dismissed, equivocation, unresolved
//	expect fee-pool AMOUNT | expect burned AMOUNT | expect height N
//	expect event TYPE [KEY=VALUE...]   an event of the last block (values as printed)
//	tiebreak JOB STAGE WORD NAME...    the auction tie-break order under block hash WORD,
//	                                   computed here from the rule in DESIGN.md
//	dump                               balances, stakes, validators, providers, jobs
//
// Tx verbs: send TO AMT | bond AMT | unbond AMT | register-provider
// [attrs=a,b] [runtimes=r] [class=c] | post-job [stages=1] [r=2] max=AMT
// [bid=2] [reveal=2] [execute=3] [verify=3] [mode=auction|pool]
// [canary=WORD] [canary-by=NAME] [prompt-tokens=N] [min-stake=AMT]
// [min-rep=N] [attrs=p,q] [runtime=r] [class=c] | cancel JOB | bid JOB
// STAGE PRICE | reveal-bid JOB STAGE [PRICE] | claim JOB STAGE |
// commit-result JOB STAGE WORD | reveal-result JOB STAGE [WORD] |
// report-input JOB STAGE REASON | vote JOB STAGE WORD [copy=NAME] |
// open-vote JOB STAGE [WORD] [salt-of=NAME] | reveal-canary JOB STAGE WORD
// [stages=N] | unjail-provider | create-validator SELFBOND |
// unjail-validator.
//
// post-job gives every job a seal: random (from the sender and the line)
// for a client's job; with canary=WORD it is the canary seal of validator
// canary-by (default: the sender) with answer WORD at every stage, so the
// job may be posted from any account. reveal-canary, sent by that
// validator, claims WORD for one stage (stages=N: the job's stage count).
// The canary salts depend only on the validator and the stage: two
// canaries of one validator with the same answer have the same seal, so
// scripts give each canary its own answer.
// Split jobs: post-job kind=split stages=K slices=W0,W1,.. [max-tokens=N];
// register-provider models=W,..; commit-transcript JOB STAGE STEPS HIN
// HOUT (the sender's chain index read from the state); reveal-transcript
// JOB STAGE [STEPS HIN HOUT]; prove-handoff JOB STAGE CHAIN STEPS HIN
// SIGNER: SIGNER's hand-off signature over what chain CHAIN's link into
// STAGE carried (from stage STAGE-1, or the client's stage for 0);
// replace-stage JOB STAGE CHAIN|NAME: the client's order to replace the
// provider of chain CHAIN (or of NAME's chain) of STAGE.
// report-input: an assigned provider cannot get or use its input (REASON
// 1 unavailable, 2 too long, 3 invalid).
// Sessions: voucher SESSION PROVIDER CUMULATIVE SEQ [signer=NAME]
// [chain=ID]; close-session SESSION; dispute-session SESSION PROVIDER SEQ
// PROMPT OUTPUT NIN NOUT [a second receipt the same way] [req-signer=NAME]
// [rcpt-signer=NAME] (requests signed by the session's client, receipts
// by their provider, unless named); seal-svote SESSION DISPUTE VERDICT
// and open-svote SESSION DISPUTE [VERDICT] (VERDICT: nodata or a mask of
// the invalid receipts).
// vote SEALS a validator's vote (MsgCommitVote); open-vote opens it
// (MsgVoteDispute) with the word sealed unless one is given. WORD may be
// available, bad or abstain (the input-check answers and an abstention,
// printed by name) or any word. copy=NAME seals exactly the commitment NAME
// seals for WORD; salt-of=NAME opens with NAME's salt (a copier's attempt).
//
// WORD stands for the hash sha256("scenario/" + WORD) and is printed as
// #WORD; NAME stands for addrOf(NAME). Salts are derived from the sender,
// job and stage, so a script needs none. Every tx pays a fee of 1ogpu,
// which the end of its block pays out to validators by power. A tx CheckTx
// refuses does not use its nonce in the mempool: in a block, put it after
// the sender's other txs.
//
// The attack scripts c1_canary_theft, h4_canary_looks_like_a_job,
// h1_withheld_input and m5_votes are also run by the tests named after
// their findings (findings_test.go).

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmttypes "github.com/cometbft/cometbft/api/cometbft/types/v1"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/escrow"
	"github.com/ogpu-network/ogpu/genesis"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/store"
	"github.com/ogpu-network/ogpu/types"
	"github.com/ogpu-network/ogpu/verifier"
)

var updateGolden = flag.Bool("update", false, "rewrite chain/testdata/scenarios/*.golden from the scripts' output")

// requiredScenarios must exist: a missing script fails the test rather than
// silently shrinking the suite.
var requiredScenarios = []string{
	"happy_path", "ties", "no_bids", "unrevealed_bid", "cancel", "dispute",
	"noshow_backup", "noshow_refund", "unbonding_slash", "canary",
	"validator_downtime", "pool", "deadlines", "split", "split_replace",
	// the attacks of security review 1, each also run by a test named
	// after its finding (findings_test.go)
	"c1_canary_theft", "h4_canary_looks_like_a_job", "h1_withheld_input", "m5_votes",
	// session leases and their disputes (issue 14)
	"session", "session_dispute", "session_caps",
	// the ranking at the reveal (issue 17, AppVersion 7)
	"leaders",
}

func scenarioFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range requiredScenarios {
		if !slices.Contains(files, filepath.Join("testdata", "scenarios", name+".txt")) {
			t.Errorf("scenario %s.txt is missing", name)
		}
	}
	return files
}

func TestScenarios(t *testing.T) {
	for _, file := range scenarioFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".txt")
		t.Run(name, func(t *testing.T) {
			checkGolden(t, file, runScenarioState(t, file))
		})
	}
}

// checkGolden compares a script's output with its .golden file (or, with
// -update, rewrites the golden).
func checkGolden(t *testing.T, file string, s *scenario) {
	t.Helper()
	out := s.out.String()
	golden := strings.TrimSuffix(file, ".txt") + ".golden"
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v: run go test ./chain -run TestScenarios -update, then review the golden", err)
	}
	if d := firstDiff(string(want), out); d != "" {
		t.Errorf("%s differs from the output:\n%s", golden, d)
	}
}

// TestScenarioDeterminism runs every script twice on fresh stores: the app
// hash after every block and the whole output must be equal.
func TestScenarioDeterminism(t *testing.T) {
	for _, file := range scenarioFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			out1, hashes1 := runScenario(t, file)
			out2, hashes2 := runScenario(t, file)
			if len(hashes1) < 2 {
				t.Fatalf("the script ran no block")
			}
			if strings.Join(hashes1, ",") != strings.Join(hashes2, ",") {
				t.Fatalf("app hashes differ between two runs:\n%v\n%v", hashes1, hashes2)
			}
			if out1 != out2 {
				t.Fatalf("outputs differ between two runs:\n%s", firstDiff(out1, out2))
			}
			t.Logf("%d blocks, final app hash %s", len(hashes1)-1, hashes1[len(hashes1)-1])
		})
	}
}

// firstDiff describes the first differing line of want and got, or "".
func firstDiff(want, got string) string {
	if want == got {
		return ""
	}
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	line := func(s []string, i int) string {
		if i < len(s) {
			return s[i]
		}
		return "<end of file>"
	}
	from := max(0, i-3)
	return fmt.Sprintf("line %d:\n  context: %s\n  want: %s\n  got:  %s",
		i+1, strings.Join(w[from:i], "\n           "), line(w, i), line(g, i))
}

// ---- the interpreter ----

type scenario struct {
	t      testing.TB
	file   string
	lineNo int
	out    strings.Builder
	doc    *genesis.Doc
	h      *harness

	names  []string // in order of first use
	byAddr map[types.Address]string
	words  map[types.Hash]string
	repl   *strings.Replacer // addresses and hashes to names; nil when stale

	prices  map[string]*uint256.Int // sealed bid prices by sender/job/stage
	results map[string]string       // committed result words by sender/job/stage
	votes   map[string]string       // sealed vote words by sender/job/stage

	group      *pendingBlock // inside block ... end
	lastEvents []abci.Event  // every event of the last block, txs' and its end's
}

type pendingTx struct {
	name string
	bz   []byte
	want uint32
}

type blockOpts struct {
	hash       []byte
	absent     []string
	doubleSign []string
	infraction int64
}

type pendingBlock struct {
	opts blockOpts
	txs  []pendingTx
}

// runScenario runs a script and returns its output and the app hashes
// after InitChain and every block.
func runScenario(t testing.TB, file string) (string, []string) {
	t.Helper()
	s := runScenarioState(t, file)
	return s.out.String(), s.h.hashes
}

// runScenarioState runs a script and returns the interpreter, its chain at
// the script's last block.
func runScenarioState(t testing.TB, file string) *scenario {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := &scenario{
		t: t, file: file, doc: genesis.Default(),
		byAddr: map[types.Address]string{}, words: map[types.Hash]string{},
		prices: map[string]*uint256.Int{}, results: map[string]string{}, votes: map[string]string{},
	}
	for i, raw := range strings.Split(string(src), "\n") {
		s.lineNo = i + 1
		line := strings.TrimSpace(raw)
		line = stripComment(line)
		if line == "" {
			continue
		}
		s.exec(line)
	}
	if s.group != nil {
		s.fatalf("block without end")
	}
	if s.h == nil {
		s.start()
	}
	return s
}

// stripComment drops a comment: a '#' at the start of the line or after
// a blank ("result=#out1" is a word, not a comment).
func stripComment(line string) string {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			return strings.TrimSpace(line[:i])
		}
	}
	return line
}

func (s *scenario) fatalf(format string, a ...any) {
	s.t.Helper()
	s.t.Fatalf("%s:%d: %s", s.file, s.lineNo, fmt.Sprintf(format, a...))
}

func (s *scenario) printf(format string, a ...any) {
	fmt.Fprintf(&s.out, format, a...)
}

// addr registers a name (its address prints as the name from now on) and
// returns its address.
func (s *scenario) addr(name string) types.Address {
	a := addrOf(name)
	if _, ok := s.byAddr[a]; !ok {
		s.byAddr[a] = name
		s.names = append(s.names, name)
		s.repl = nil
	}
	return a
}

// word is the hash a script word stands for.
func (s *scenario) word(w string) types.Hash {
	h := types.Hash(sha256.Sum256([]byte("scenario/" + w)))
	if _, ok := s.words[h]; !ok {
		s.words[h] = w
		s.repl = nil
	}
	return h
}

func salt(parts ...any) types.Hash {
	return types.Hash(sha256.Sum256([]byte("scenario salt " + fmt.Sprint(parts...))))
}

// scenarioValKey is the consensus key of the validator operated by name.
func scenarioValKey(name string) []byte {
	seed := sha256.Sum256([]byte("scenario validator " + name))
	return ed25519.NewKeyFromSeed(seed[:]).Public().(ed25519.PublicKey)
}

// subst rewrites addresses and known hashes in s into names and #words.
func (s *scenario) subst(str string) string {
	if s.repl == nil {
		var pairs []string
		for _, n := range s.names {
			a := addrOf(n)
			pairs = append(pairs, a.Hex(), n, strings.ToLower(a.Hex()), n)
		}
		// Sorted, so the replacer is the same on every run.
		var ws []string
		for h := range s.words {
			ws = append(ws, hex.EncodeToString(h[:]))
		}
		slices.Sort(ws)
		for _, w := range ws {
			b, _ := hex.DecodeString(w)
			pairs = append(pairs, "0x"+w, "#"+s.words[types.Hash(b)], w, "#"+s.words[types.Hash(b)])
		}
		s.repl = strings.NewReplacer(pairs...)
	}
	return s.repl.Replace(str)
}

func (s *scenario) nameOf(a types.Address) string {
	if n, ok := s.byAddr[a]; ok {
		return n
	}
	return a.Hex()
}

func (s *scenario) hashStr(h types.Hash) string {
	switch h {
	case types.Hash{}:
		return "-"
	case verifier.InputAvailable: // the input-check answers and abstain, by name
		return "available"
	case verifier.InputBad:
		return "bad"
	case verifier.Abstain:
		return "abstain"
	}
	if w, ok := s.words[h]; ok {
		return "#" + w
	}
	return hex.EncodeToString(h[:])
}

func amt(a *uint256.Int) string { return types.FormatAmount(a) }

// amtOrZero is amt, with nil (an optional field never set) as 0.
func amtOrZero(a *uint256.Int) string {
	if a == nil {
		return "0ogpu"
	}
	return amt(a)
}

func (s *scenario) parseAmount(v string) *uint256.Int {
	a, err := types.ParseAmount(v)
	if err != nil {
		s.fatalf("%v", err)
	}
	return a
}

func (s *scenario) parseUint(v string) uint64 {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		s.fatalf("want a number, got %q", v)
	}
	return n
}

// opts splits key=value options from positional arguments.
func opts(args []string) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	return pos, kv
}

func (s *scenario) exec(line string) {
	f := strings.Fields(line)
	if s.group != nil {
		switch f[0] {
		case "tx":
			s.printf(">   %s\n", line)
			s.tx(f[1:])
		case "end":
			s.printf("> end\n")
			g := s.group
			s.group = nil
			s.finalize(g.txs, g.opts)
		default:
			s.fatalf("only tx lines and end inside a block, got %q", f[0])
		}
		return
	}
	if f[0] == "genesis" {
		if s.h != nil {
			s.fatalf("genesis after the chain started")
		}
		s.genesis(f[1:])
		return
	}
	if s.h == nil {
		s.start()
	}
	s.printf("> %s\n", line)
	switch f[0] {
	case "tx":
		s.tx(f[1:])
		g := s.group
		s.group = nil
		s.finalize(g.txs, g.opts)
	case "block":
		s.group = &pendingBlock{opts: s.blockOpts(f[1:])}
	case "advance":
		if len(f) < 2 {
			s.fatalf("advance N")
		}
		n := s.parseUint(f[1])
		o := s.blockOpts(f[2:])
		for i := uint64(0); i < n; i++ {
			s.finalize(nil, o)
		}
	case "expect":
		s.expect(f[1:])
	case "dump":
		s.dump()
	case "tiebreak":
		s.tiebreak(f[1:])
	default:
		s.fatalf("unknown command %q", f[0])
	}
}

func (s *scenario) blockOpts(args []string) blockOpts {
	pos, kv := opts(args)
	if len(pos) > 0 {
		s.fatalf("unexpected %q", pos[0])
	}
	var o blockOpts
	for k, v := range kv {
		switch k {
		case "hash":
			h := s.word(v)
			o.hash = h[:]
		case "absent":
			o.absent = strings.Split(v, ",")
		case "double-sign":
			o.doubleSign = strings.Split(v, ",")
		case "infraction":
			o.infraction = int64(s.parseUint(v))
		default:
			s.fatalf("unknown block option %q", k)
		}
	}
	return o
}

// ---- genesis ----

func (s *scenario) genesis(f []string) {
	if len(f) < 3 {
		s.fatalf("genesis param PATH VALUE | account NAME AMOUNT | validator NAME STAKE")
	}
	switch f[0] {
	case "param":
		if err := setParam(&s.doc.Params, f[1], f[2]); err != nil {
			s.fatalf("%v", err)
		}
	case "account":
		if err := s.doc.AddAccount(s.addr(f[1]), s.parseAmount(f[2])); err != nil {
			s.fatalf("%v", err)
		}
	case "validator":
		s.doc.Validators = append(s.doc.Validators, genesis.Validator{
			Name: f[1], Operator: s.addr(f[1]), PubKey: scenarioValKey(f[1]), Stake: s.parseAmount(f[2]),
		})
	default:
		s.fatalf("unknown genesis command %q", f[0])
	}
}

// setParam sets the parameter at a dotted path of JSON names.
func setParam(p *genesis.Params, path, value string) error {
	v := reflect.ValueOf(p).Elem()
	parts := strings.Split(path, ".")
	for i, part := range parts {
		found := false
		for j := 0; j < v.NumField(); j++ {
			if name, _, _ := strings.Cut(v.Type().Field(j).Tag.Get("json"), ","); name == part {
				v, found = v.Field(j), true
				break
			}
		}
		if !found {
			return fmt.Errorf("no parameter %q", path)
		}
		if i < len(parts)-1 {
			continue
		}
		switch v.Interface().(type) {
		case uint64:
			n, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				return fmt.Errorf("parameter %s: %v", path, err)
			}
			v.SetUint(n)
		case *uint256.Int:
			a, err := types.ParseAmount(value)
			if err != nil {
				return fmt.Errorf("parameter %s: %v", path, err)
			}
			v.Set(reflect.ValueOf(a))
		default:
			return fmt.Errorf("parameter %s is not a number or an amount", path)
		}
	}
	return nil
}

func (s *scenario) start() {
	if err := s.doc.Validate(); err != nil {
		s.fatalf("genesis: %v", err)
	}
	s.h = newHarness(s.t, store.NewMemTree(), s.doc)
}

// ---- transactions ----

func (s *scenario) tx(f []string) {
	if len(f) < 2 {
		s.fatalf("tx NAME VERB ARGS...")
	}
	var want uint32
	if i := slices.Index(f, "expect-code"); i >= 0 {
		if i+1 >= len(f) {
			s.fatalf("expect-code N")
		}
		want = uint32(s.parseUint(f[i+1]))
		f = append(f[:i:i], f[i+2:]...)
	}
	name := f[0]
	from := s.addr(name)
	msg := s.msg(name, from, f[1], f[2:])
	bz := s.h.tx(name, msg)
	// CheckTx runs against the mempool's state: the last commit plus the
	// txs of this block checked so far. It must agree with FinalizeBlock.
	if res := s.h.checkTx(bz); res.Code != want {
		s.t.Errorf("%s:%d: CheckTx gave code %d (%s), want %d", s.file, s.lineNo, res.Code, s.subst(res.Log), want)
	}
	if s.group == nil {
		s.group = &pendingBlock{}
	}
	s.group.txs = append(s.group.txs, pendingTx{name: name, bz: bz, want: want})
}

func (s *scenario) need(args []string, n int, usage string) {
	if len(args) < n {
		s.fatalf("usage: %s", usage)
	}
}

func (s *scenario) key(name string, job uint64, stage uint16) string {
	return fmt.Sprintf("%s/%d/%d", name, job, stage)
}

func (s *scenario) jobStage(args []string) (uint64, uint16) {
	return s.parseUint(args[0]), uint16(s.parseUint(args[1]))
}

func (s *scenario) msg(name string, from types.Address, verb string, args []string) types.RawMsg {
	pos, kv := opts(args)
	switch verb {
	case "send":
		s.need(pos, 2, "send TO AMOUNT")
		return (&escrow.MsgSend{To: s.addr(pos[0]), Amount: s.parseAmount(pos[1])}).Raw()
	case "bond":
		s.need(pos, 1, "bond AMOUNT")
		return (&escrow.MsgBond{Amount: s.parseAmount(pos[0])}).Raw()
	case "unbond":
		s.need(pos, 1, "unbond AMOUNT")
		return (&escrow.MsgUnbond{Amount: s.parseAmount(pos[0])}).Raw()
	case "register-provider", "update-provider":
		info := market.ProviderInfo{PeerID: "peer-" + name, Class: kv["class"]}
		if v := kv["attrs"]; v != "" {
			info.Attributes = strings.Split(v, ",")
		}
		if v := kv["runtimes"]; v != "" {
			info.Runtimes = strings.Split(v, ",")
		}
		if v := kv["models"]; v != "" {
			for _, w := range strings.Split(v, ",") {
				info.Models = append(info.Models, s.word(w))
			}
		}
		if verb == "update-provider" {
			return (&market.MsgUpdateProvider{Info: info}).Raw()
		}
		return (&market.MsgRegisterProvider{Info: info}).Raw()
	case "unjail-provider":
		return (&market.MsgUnjailProvider{}).Raw()
	case "post-job":
		m := &market.MsgPostJob{Kind: market.KindInference, Mode: market.ModeAuction, Stages: 1, Redundancy: 2,
			Req: market.Requirements{MinStake: new(uint256.Int)}, Input: s.word("input"), ModelSize: 1000,
			Windows: market.Windows{Bid: 2, Reveal: 2, Execute: 3, Verify: 3}}
		m.Model = s.word("model")
		m.Seal = salt(name, "seal", s.lineNo)
		canary, canaryBy := "", name
		_, execGiven := kv["execute"]
		_, verifyGiven := kv["verify"]
		for k, v := range kv {
			switch k {
			case "stages":
				m.Stages = uint16(s.parseUint(v))
			case "r":
				m.Redundancy = uint16(s.parseUint(v))
			case "max":
				m.MaxPrice = s.parseAmount(v)
			case "bid":
				m.Windows.Bid = s.parseUint(v)
			case "reveal":
				m.Windows.Reveal = s.parseUint(v)
			case "execute":
				m.Windows.Execute = s.parseUint(v)
			case "verify":
				m.Windows.Verify = s.parseUint(v)
			case "mode":
				m.Mode = v
			case "kind":
				m.Kind = v
			case "model":
				m.Model = s.word(v)
			case "canary":
				canary = v
			case "canary-by":
				canaryBy = v
			case "prompt-tokens":
				m.PromptTokens = s.parseUint(v)
			case "max-tokens":
				m.MaxTokens = s.parseUint(v)
			case "slices":
				for _, w := range strings.Split(v, ",") {
					m.Slices = append(m.Slices, s.word(w))
				}
			case "min-stake":
				m.Req.MinStake = s.parseAmount(v)
			case "min-rep":
				m.Req.MinReputation = s.parseUint(v)
			case "attrs":
				m.Req.Attributes = strings.Split(v, ",")
			case "runtime":
				m.Req.Runtime = v
			case "class":
				m.Req.Class = v
			case "budget", "session-blocks", "grace", "input-bps":
				if m.Session == nil {
					m.Session = &market.SessionTerms{Budget: types.OGPU(10), Blocks: 20, Grace: 5}
				}
				switch k {
				case "budget":
					m.Session.Budget = s.parseAmount(v)
				case "session-blocks":
					m.Session.Blocks = s.parseUint(v)
				case "grace":
					m.Session.Grace = s.parseUint(v)
				case "input-bps":
					m.Session.InputPriceBps = s.parseUint(v)
				}
			default:
				s.fatalf("unknown post-job option %q", k)
			}
		}
		if m.Kind == market.KindSession {
			// A session has no input and no execute/verify windows (unless
			// the script gives them, to be refused).
			m.Input = types.Hash{}
			if !execGiven {
				m.Windows.Execute = 0
			}
			if !verifyGiven {
				m.Windows.Verify = 0
			}
		}
		if m.MaxPrice == nil {
			s.fatalf("post-job needs max=AMOUNT")
		}
		if canary != "" {
			_, m.Seal = scenarioCanary(s.word(canary), canaryBy, int(m.Stages))
		}
		return m.Raw()
	case "voucher":
		s.need(pos, 4, "voucher SESSION PROVIDER CUMULATIVE SEQ [signer=NAME] [chain=ID]")
		v := session.Voucher{ChainID: testChainID, Session: s.parseUint(pos[0]), Provider: s.addr(pos[1]), Cumulative: s.parseAmount(pos[2]), Seq: s.parseUint(pos[3])}
		if c, ok := kv["chain"]; ok {
			v.ChainID = c
		}
		signer := name
		if n, ok := kv["signer"]; ok {
			signer = n
		}
		sig, err := session.Sign(testKey(signer), v.Hash())
		if err != nil {
			s.fatalf("sign: %v", err)
		}
		return (&session.MsgRedeemVoucher{Voucher: v, Sig: sig}).Raw()
	case "dispute-session":
		return s.disputeSession(pos, kv)
	case "seal-svote":
		s.need(pos, 3, "seal-svote SESSION DISPUTE VERDICT")
		id, d := s.parseUint(pos[0]), s.parseUint(pos[1])
		key := fmt.Sprintf("%s/s%d/%d", name, id, d)
		s.votes[key] = pos[2]
		return (&session.MsgSealSessionVote{Session: id, Dispute: d,
			Commitment: session.SessionVoteCommitment(id, d, s.verdict(pos[2]), salt(name, "svote", id, d), from)}).Raw()
	case "open-svote":
		s.need(pos, 2, "open-svote SESSION DISPUTE [VERDICT]")
		id, d := s.parseUint(pos[0]), s.parseUint(pos[1])
		w := s.votes[fmt.Sprintf("%s/s%d/%d", name, id, d)]
		if len(pos) > 2 {
			w = pos[2]
		}
		if w == "" {
			w = "0" // never sealed: the chain says so
		}
		return (&session.MsgOpenSessionVote{Session: id, Dispute: d, Verdict: s.verdict(w), Salt: salt(name, "svote", id, d)}).Raw()
	case "close-session":
		s.need(pos, 1, "close-session SESSION")
		return (&session.MsgCloseSession{Session: s.parseUint(pos[0])}).Raw()
	case "cancel":
		s.need(pos, 1, "cancel JOB")
		return (&market.MsgCancelJob{Job: s.parseUint(pos[0])}).Raw()
	case "bid":
		s.need(pos, 3, "bid JOB STAGE PRICE")
		job, stage := s.jobStage(pos)
		price := s.parseAmount(pos[2])
		s.prices[s.key(name, job, stage)] = price
		return (&market.MsgCommitBid{Job: job, Stage: stage,
			Commitment: market.BidCommitment(job, stage, price, salt(name, "bid", job, stage), from)}).Raw()
	case "reveal-bid":
		s.need(pos, 2, "reveal-bid JOB STAGE [PRICE]")
		job, stage := s.jobStage(pos)
		price := s.prices[s.key(name, job, stage)]
		if len(pos) > 2 {
			price = s.parseAmount(pos[2])
		}
		if price == nil {
			price = types.OGPU(1) // never bid: the chain says so
		}
		return (&market.MsgRevealBid{Job: job, Stage: stage, Price: price, Salt: salt(name, "bid", job, stage)}).Raw()
	case "claim":
		s.need(pos, 2, "claim JOB STAGE")
		job, stage := s.jobStage(pos)
		return (&market.MsgClaimTask{Job: job, Stage: stage}).Raw()
	case "commit-result":
		s.need(pos, 3, "commit-result JOB STAGE WORD")
		job, stage := s.jobStage(pos)
		s.results[s.key(name, job, stage)] = pos[2]
		return (&verifier.MsgCommitResult{Job: job, Stage: stage,
			Commitment: verifier.ResultCommitment(s.word(pos[2]), salt(name, "result", job, stage), from)}).Raw()
	case "reveal-result":
		s.need(pos, 2, "reveal-result JOB STAGE [WORD]")
		job, stage := s.jobStage(pos)
		w := s.results[s.key(name, job, stage)]
		if len(pos) > 2 {
			w = pos[2]
		}
		return (&verifier.MsgRevealResult{Job: job, Stage: stage, Result: s.word(w), Salt: salt(name, "result", job, stage)}).Raw()
	case "vote":
		s.need(pos, 3, "vote JOB STAGE WORD [copy=NAME]")
		job, stage := s.jobStage(pos)
		s.votes[s.key(name, job, stage)] = pos[2]
		// copy=NAME seals exactly the commitment NAME seals for WORD.
		by := name
		if v, ok := kv["copy"]; ok {
			by = v
		}
		return (&verifier.MsgCommitVote{Job: job, Stage: stage,
			Commitment: verifier.VoteCommitment(job, stage, s.voteWord(pos[2]), salt(by, "vote", job, stage), s.addr(by))}).Raw()
	case "open-vote":
		s.need(pos, 2, "open-vote JOB STAGE [WORD] [salt-of=NAME]")
		job, stage := s.jobStage(pos)
		w := s.votes[s.key(name, job, stage)]
		if len(pos) > 2 {
			w = pos[2]
		}
		// salt-of=NAME opens with the salt NAME's vote opened with.
		by := name
		if v, ok := kv["salt-of"]; ok {
			by = v
		}
		return (&verifier.MsgVoteDispute{Job: job, Stage: stage, Result: s.voteWord(w), Salt: salt(by, "vote", job, stage)}).Raw()
	case "commit-transcript":
		s.need(pos, 5, "commit-transcript JOB STAGE STEPS HIN HOUT")
		job, stage := s.jobStage(pos)
		s.results[s.key(name, job, stage)] = strings.Join(pos[2:5], " ")
		return (&verifier.MsgCommitResult{Job: job, Stage: stage, Commitment: market.SplitCommitment(job, stage, s.chainOf(from, job, stage),
			uint32(s.parseUint(pos[2])), s.word(pos[3]), s.word(pos[4]), salt(name, "result", job, stage), from)}).Raw()
	case "reveal-transcript":
		s.need(pos, 2, "reveal-transcript JOB STAGE [STEPS HIN HOUT]")
		job, stage := s.jobStage(pos)
		f := strings.Fields(s.results[s.key(name, job, stage)])
		if len(pos) >= 5 {
			f = pos[2:5]
		}
		if len(f) != 3 {
			s.fatalf("reveal-transcript of nothing committed: give STEPS HIN HOUT")
		}
		return (&market.MsgRevealTranscript{Job: job, Stage: stage, Steps: uint32(s.parseUint(f[0])), Hin: s.word(f[1]), Hout: s.word(f[2]),
			Salt: salt(name, "result", job, stage)}).Raw()
	case "prove-handoff":
		s.need(pos, 6, "prove-handoff JOB STAGE CHAIN STEPS HIN SIGNER")
		job, stage := s.jobStage(pos)
		chain, steps, hin := uint16(s.parseUint(pos[2])), uint32(s.parseUint(pos[3])), s.word(pos[4])
		up := uint16(market.ClientStage)
		if stage > 0 {
			up = stage - 1
		}
		d := market.HandoffDigest(testChainID, job, chain, up, steps, hin)
		sig, err := crypto.Sign(d[:], testKey(pos[5]))
		if err != nil {
			s.fatalf("sign: %v", err)
		}
		return (&market.MsgProveHandoff{Job: job, Stage: stage, Chain: chain, Steps: steps, Hin: hin, Sig: sig}).Raw()
	case "replace-stage":
		s.need(pos, 3, "replace-stage JOB STAGE CHAIN|NAME")
		job, stage := s.jobStage(pos)
		var chain uint16
		if n, err := strconv.ParseUint(pos[2], 10, 16); err == nil {
			chain = uint16(n)
		} else {
			chain = s.chainOf(s.addr(pos[2]), job, stage)
		}
		return (&market.MsgReplaceStage{Job: job, Stage: stage, Chain: chain}).Raw()
	case "report-input":
		s.need(pos, 3, "report-input JOB STAGE REASON")
		job, stage := s.jobStage(pos)
		return (&verifier.MsgReportInput{Job: job, Stage: stage, Reason: uint8(s.parseUint(pos[2]))}).Raw()
	case "reveal-canary":
		s.need(pos, 3, "reveal-canary JOB STAGE WORD [stages=N]")
		job, stage := s.jobStage(pos)
		n := 1
		if v, ok := kv["stages"]; ok {
			n = int(s.parseUint(v))
		}
		hashes, _ := scenarioCanary(s.word(pos[2]), name, n)
		return (&verifier.MsgRevealCanary{Job: job, Stage: stage, Answer: s.word(pos[2]), Salt: salt(name, "canary", int(stage)), StageHashes: hashes}).Raw()
	case "create-validator":
		s.need(pos, 1, "create-validator SELFBOND")
		return (&escrow.MsgCreateValidator{Name: name, PubKey: scenarioValKey(name), SelfBond: s.parseAmount(pos[0])}).Raw()
	case "unjail-validator":
		return (&escrow.MsgUnjailValidator{}).Raw()
	}
	s.fatalf("unknown tx verb %q", verb)
	return types.RawMsg{}
}

// verdict reads a session vote: nodata, or a mask of the invalid receipts.
func (s *scenario) verdict(w string) uint8 {
	if w == "nodata" {
		return session.VerdictNoData
	}
	n, err := strconv.ParseUint(w, 10, 8)
	if err != nil {
		s.fatalf("verdict %q: want nodata or a mask (0..3)", w)
	}
	return uint8(n)
}

// disputeSession builds a MsgDisputeSession: SESSION, then per receipt
// PROVIDER SEQ PROMPT OUTPUT NIN NOUT (one or two receipts). The request
// is signed by the session's client (req-signer=NAME: by NAME, a
// forgery), the receipt by PROVIDER (rcpt-signer=NAME: by NAME).
func (s *scenario) disputeSession(pos []string, kv map[string]string) types.RawMsg {
	const usage = "dispute-session SESSION PROVIDER SEQ PROMPT OUTPUT NIN NOUT [PROVIDER SEQ PROMPT OUTPUT NIN NOUT] [req-signer=NAME] [rcpt-signer=NAME]"
	if len(pos) != 7 && len(pos) != 13 {
		s.fatalf("usage: %s", usage)
	}
	id := s.parseUint(pos[0])
	reqSigner := ""
	if sess, ok := session.Get(s.view(), id); ok {
		reqSigner = s.nameOf(sess.Client)
	}
	if n, ok := kv["req-signer"]; ok {
		reqSigner = n
	}
	if reqSigner == "" {
		s.fatalf("session %d does not exist: give req-signer=NAME", id)
	}
	m := &session.MsgDisputeSession{Session: id, Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}}
	for f := pos[1:]; len(f) >= 6; f = f[6:] {
		q := session.Request{ChainID: testChainID, Session: id, Provider: s.addr(f[0]), Seq: s.parseUint(f[1]), Prompt: s.word(f[2]), MaxTokens: 256}
		qsig, err := session.Sign(testKey(reqSigner), q.Hash())
		if err != nil {
			s.fatalf("sign: %v", err)
		}
		r := session.Receipt{ChainID: testChainID, Session: id, Provider: q.Provider, Seq: q.Seq, Request: q.Hash(), Output: s.word(f[3]),
			NIn: s.parseUint(f[4]), NOut: s.parseUint(f[5])}
		signer := f[0]
		if n, ok := kv["rcpt-signer"]; ok {
			signer = n
		}
		rsig, err := session.Sign(testKey(signer), r.Hash())
		if err != nil {
			s.fatalf("sign: %v", err)
		}
		m.Requests = append(m.Requests, session.SignedRequest{Request: q, Sig: qsig})
		m.Receipts = append(m.Receipts, session.SignedReceipt{Receipt: r, Sig: rsig})
	}
	return m.Raw()
}

// chainOf is the replica chain (slot index) from holds in a split stage,
// 0 if it holds none (the chain refuses its commitment anyway).
func (s *scenario) chainOf(from types.Address, job uint64, stage uint16) uint16 {
	if t, ok := verifier.NewKeeper(s.view()).GetTask(job, stage); ok && t.SlotOf(from) >= 0 {
		return uint16(t.SlotOf(from))
	}
	return 0
}

// scenarioCanary is the seal of a canary whose validator is NAME, with
// answer at every one of its stages.
func scenarioCanary(answer types.Hash, validator string, stages int) ([]types.Hash, types.Hash) {
	hashes := make([]types.Hash, stages)
	for i := range hashes {
		hashes[i] = verifier.CanaryStageHash(answer, salt(validator, "canary", i))
	}
	return hashes, verifier.CanarySeal(addrOf(validator), hashes)
}

// voteWord reads a vote: available, bad and abstain are the input-check
// and abstain hashes, any other word the hash of the word.
func (s *scenario) voteWord(w string) types.Hash {
	switch w {
	case "available":
		return verifier.InputAvailable
	case "bad":
		return verifier.InputBad
	case "abstain":
		return verifier.Abstain
	}
	return s.word(w)
}

// ---- blocks ----

func defaultBlockHash(height int64) []byte {
	h := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("scenario block "), uint64(height)))
	return h[:]
}

// validatorsWithPower lists the validators CometBFT was last told have
// power, in operator order.
func (s *scenario) validatorsWithPower() []abci.Validator {
	k := escrow.NewKeeper(store.NewCache(s.h.tree))
	var out []abci.Validator
	k.IterateValidators(func(_ types.Address, v *escrow.Validator) bool {
		if p := k.ReportedPower(v.PubKey); p > 0 {
			a := consAddress(v.PubKey)
			out = append(out, abci.Validator{Address: a[:], Power: p})
		}
		return false
	})
	return out
}

// finalize runs one block through FinalizeBlock and Commit and prints what
// happened: every tx's result and events, the block end's events and the
// validator updates for CometBFT.
func (s *scenario) finalize(txs []pendingTx, o blockOpts) {
	h := s.h
	h.height++
	req := &abci.FinalizeBlockRequest{Height: h.height, Time: time.Unix(0, 0), Hash: o.hash}
	if req.Hash == nil {
		req.Hash = defaultBlockHash(h.height)
	}
	for _, tx := range txs {
		req.Txs = append(req.Txs, tx.bz)
	}
	// The last commit: every validator with power signed, except the
	// absent ones.
	vals := s.validatorsWithPower()
	var total int64
	for _, v := range vals {
		total += v.Power
	}
	for _, v := range vals {
		flag := cmttypes.BlockIDFlagCommit
		for _, n := range o.absent {
			if a := consAddress(scenarioValKey(n)); bytes.Equal(a[:], v.Address) {
				flag = cmttypes.BlockIDFlagAbsent
			}
		}
		req.DecidedLastCommit.Votes = append(req.DecidedLastCommit.Votes, abci.VoteInfo{Validator: v, BlockIdFlag: flag})
	}
	for _, n := range o.doubleSign {
		a := consAddress(scenarioValKey(n))
		at := h.height - 1
		if o.infraction != 0 {
			at = o.infraction
		}
		req.Misbehavior = append(req.Misbehavior, abci.Misbehavior{
			Type: abci.MISBEHAVIOR_TYPE_DUPLICATE_VOTE, Validator: abci.Validator{Address: a[:]},
			Height: at, Time: time.Unix(0, 0), TotalVotingPower: total,
		})
	}
	res, err := h.app.FinalizeBlock(context.Background(), req)
	if err != nil {
		s.fatalf("FinalizeBlock %d: %v", h.height, err) // an invariant broke
	}
	if _, err := h.app.Commit(context.Background(), &abci.CommitRequest{}); err != nil {
		s.fatalf("Commit %d: %v", h.height, err)
	}
	h.hashes = append(h.hashes, hex.EncodeToString(res.AppHash))

	s.lastEvents = nil
	for i, r := range res.TxResults {
		tx := txs[i]
		if r.Code == 0 {
			s.printf("h%d %s: ok\n", h.height, tx.name)
		} else {
			s.printf("h%d %s: code %d: %s\n", h.height, tx.name, r.Code, s.subst(r.Log))
		}
		if r.Code != tx.want {
			s.t.Errorf("%s:%d: tx %d of block %d (%s) gave code %d (%s), want %d", s.file, s.lineNo, i, h.height, tx.name, r.Code, s.subst(r.Log), tx.want)
		}
		s.lastEvents = append(s.lastEvents, r.Events...)
		s.printEvents(r.Events)
	}
	s.lastEvents = append(s.lastEvents, res.Events...)
	var ups []string
	for _, u := range res.ValidatorUpdates {
		name := fmt.Sprintf("%X", u.PubKeyBytes)
		for _, n := range s.names {
			if bytes.Equal(scenarioValKey(n), u.PubKeyBytes) {
				name = n
			}
		}
		ups = append(ups, fmt.Sprintf("%s=%d", name, u.Power))
	}
	if shown := s.shown(res.Events); len(shown) > 0 || len(ups) > 0 {
		s.printf("h%d end:\n", h.height)
		s.printEvents(res.Events)
		if len(ups) > 0 {
			s.printf("  cometbft validator updates: %s\n", strings.Join(ups, " "))
		}
	}
	// Nonces: a tx that failed in the block still used its nonce.
	snap := store.NewCache(h.tree)
	for _, n := range s.names {
		h.nonces[n] = getNonce(snap, addrOf(n))
	}
}

// hiddenEvents are not printed (expect event still sees them): every tx
// has one, and every block with a tx pays fees out.
var hiddenEvents = map[string]bool{EventTypeTx: true, "fees_distributed": true}

func (s *scenario) shown(evs []abci.Event) []abci.Event {
	var out []abci.Event
	for _, e := range evs {
		if !hiddenEvents[e.Type] {
			out = append(out, e)
		}
	}
	return out
}

func (s *scenario) printEvents(evs []abci.Event) {
	for _, e := range s.shown(evs) {
		s.printf("  %s\n", s.fmtEvent(e))
	}
}

// amountKeys are the event attributes that are amounts in base units;
// they print as oGPU.
var amountKeys = map[string]bool{
	"amount": true, "deposit": true, "price": true, "max_price": true, "locked": true, "refund": true,
	"paid": true, "refunded": true, "compensated": true, "validator_fee": true, "compensation": true,
	"burned": true, "slashed": true, "self_bond": true, "bonded": true, "fee": true,
}

func (s *scenario) fmtAttr(key, value string) string {
	if amountKeys[key] {
		if a, err := uint256.FromDecimal(value); err == nil {
			return amt(a)
		}
	}
	parts := strings.Split(value, ",")
	for i, p := range parts {
		if len(p) == 64 {
			if b, err := hex.DecodeString(p); err == nil {
				parts[i] = s.hashStr(types.Hash(b))
				continue
			}
		}
		parts[i] = s.subst(p)
	}
	return strings.Join(parts, ",")
}

func (s *scenario) fmtEvent(e abci.Event) string {
	var b strings.Builder
	b.WriteString(e.Type)
	for _, a := range e.Attributes {
		v := s.fmtAttr(a.Key, a.Value)
		if strings.ContainsAny(v, " ") {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, " %s=%s", a.Key, v)
	}
	return b.String()
}

// ---- expectations ----

func (s *scenario) failf(format string, a ...any) {
	s.t.Helper()
	msg := fmt.Sprintf(format, a...)
	s.printf("  FAILED: %s\n", msg)
	s.t.Errorf("%s:%d: %s", s.file, s.lineNo, msg)
}

func (s *scenario) view() store.KV { return store.NewCache(s.h.tree) }

func (s *scenario) expectAmount(what string, got *uint256.Int, want string) {
	s.t.Helper()
	if w := s.parseAmount(want); !got.Eq(w) {
		s.failf("%s is %s, want %s", what, amt(got), amt(w))
	}
}

func (s *scenario) expect(f []string) {
	if len(f) < 2 {
		s.fatalf("expect WHAT ...")
	}
	kv := s.view()
	k := escrow.NewKeeper(kv)
	switch f[0] {
	case "balance", "stake", "unbonding":
		s.need(f, 3, "expect "+f[0]+" NAME AMOUNT")
		a := s.addr(f[1])
		got := map[string]func(types.Address) *uint256.Int{"balance": k.Balance, "stake": k.Bonded, "unbonding": k.UnbondingTotal}[f[0]](a)
		s.expectAmount(f[0]+" of "+f[1], got, f[2])
	case "power":
		s.need(f, 3, "expect power NAME N")
		var got int64
		if v, ok := k.GetValidator(s.addr(f[1])); ok {
			got = k.ReportedPower(v.PubKey)
		}
		if want := int64(s.parseUint(f[2])); got != want {
			s.failf("power of %s is %d, want %d", f[1], got, want)
		}
	case "active":
		s.need(f, 3, "expect active NAME true|false")
		got := k.IsActiveValidator(getParams(kv).Staking, s.addr(f[1]))
		if want := f[2] == "true"; got != want {
			s.failf("%s active is %t, want %t", f[1], got, want)
		}
	case "reputation":
		s.need(f, 3, "expect reputation NAME SCORE")
		got := verifier.NewKeeper(kv).GetReputation(s.addr(f[1])).Score()
		if want := s.parseUint(f[2]); got != want {
			s.failf("reputation of %s is %d, want %d", f[1], got, want)
		}
	case "job":
		if len(f) == 3 && f[2] == "pruned" {
			if id := s.parseUint(f[1]); !market.Pruned(kv, id) {
				s.failf("job %d is not pruned", id)
			}
			return
		}
		s.need(f, 4, "expect job ID state STATE | expect job ID locked AMOUNT | expect job ID pruned")
		j, ok := market.GetJob(kv, s.parseUint(f[1]))
		if !ok {
			s.failf("job %s does not exist", f[1])
			return
		}
		switch f[2] {
		case "state":
			if j.State.String() != f[3] {
				s.failf("job %d is %s, want %s", j.ID, j.State, f[3])
			}
		case "locked":
			s.expectAmount(fmt.Sprintf("escrow of job %d", j.ID), k.Locked(j.ID), f[3])
		default:
			s.fatalf("expect job ID state|locked ...")
		}
	case "dispute":
		s.need(f, 4, "expect dispute SESSION N STATUS")
		d, ok := session.GetDispute(kv, s.parseUint(f[1]), s.parseUint(f[2]))
		switch {
		case !ok:
			s.failf("session %s has no dispute %s", f[1], f[2])
		case d.Status.String() != f[3]:
			s.failf("dispute %s of session %s is %s, want %s", f[2], f[1], d.Status, f[3])
		}
	case "fee-pool":
		s.expectAmount("the fee pool", k.FeePool(), f[1])
	case "burned":
		s.expectAmount("burned", k.Burned(), f[1])
	case "height":
		if want := int64(s.parseUint(f[1])); s.h.height != want {
			s.failf("height is %d, want %d", s.h.height, want)
		}
	case "event":
		want := f[2:]
		for _, e := range s.lastEvents {
			if e.Type != f[1] {
				continue
			}
			got := map[string]string{}
			for _, a := range e.Attributes {
				got[a.Key] = s.fmtAttr(a.Key, a.Value)
			}
			match := true
			for _, w := range want {
				k, v, _ := strings.Cut(w, "=")
				match = match && got[k] == v
			}
			if match {
				return
			}
		}
		var seen []string
		for _, e := range s.lastEvents {
			seen = append(seen, s.fmtEvent(e))
		}
		s.failf("no event %s %s in the last block; it had:\n    %s", f[1], strings.Join(want, " "), strings.Join(seen, "\n    "))
	default:
		s.fatalf("unknown expectation %q", f[0])
	}
}

// tiebreak prints providers in the order the auction's last tie-break puts
// them under block hash WORD: by sha256(block hash | job | stage |
// provider), computed here from the rule, independently of the market code.
func (s *scenario) tiebreak(f []string) {
	s.need(f, 4, "tiebreak JOB STAGE WORD NAME...")
	job, stage := s.jobStage(f)
	bh := s.word(f[2])
	type entry struct {
		name string
		tie  []byte
	}
	var es []entry
	for _, n := range f[3:] {
		a := s.addr(n)
		h := sha256.New()
		h.Write(bh[:])
		h.Write(binary.BigEndian.AppendUint64(nil, job))
		h.Write(binary.BigEndian.AppendUint16(nil, stage))
		h.Write(a[:])
		es = append(es, entry{n, h.Sum(nil)})
	}
	slices.SortFunc(es, func(a, b entry) int { return bytes.Compare(a.tie, b.tie) })
	var parts []string
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%s(%x)", e.name, e.tie[:4]))
	}
	s.printf("  tie-break order: %s\n", strings.Join(parts, " < "))
}

// ---- dump ----

func (s *scenario) dump() {
	kv := s.view()
	k := escrow.NewKeeper(kv)
	ver := verifier.NewKeeper(kv)
	s.printf("  height %d\n", s.h.height)
	// Accounts: every name, then any other address holding something.
	listed := map[types.Address]bool{}
	s.printf("  accounts:\n")
	account := func(a types.Address) {
		listed[a] = true
		line := fmt.Sprintf("    %-6s balance=%s", s.nameOf(a), amt(k.Balance(a)))
		if b := k.Bonded(a); !b.IsZero() {
			line += " bonded=" + amt(b)
		}
		for _, u := range k.Unbondings(a) {
			line += fmt.Sprintf(" unbonding=%s@%d", amt(u.Amount), u.Matures)
		}
		s.printf("%s\n", line)
	}
	for _, n := range s.names {
		account(addrOf(n))
	}
	var others []types.Address
	collect := func(a types.Address) {
		if !listed[a] && !slices.Contains(others, a) {
			others = append(others, a)
		}
	}
	k.IterateBalances(func(a types.Address, _ *uint256.Int) bool { collect(a); return false })
	k.IterateBonded(func(a types.Address, _ *uint256.Int) bool { collect(a); return false })
	k.IterateUnbonding(func(a types.Address, _ escrow.Unbonding) bool { collect(a); return false })
	for _, a := range others {
		account(a)
	}
	s.printf("  fee_pool=%s burned=%s locked=%s bonded=%s unbonding=%s\n",
		amt(k.FeePool()), amt(k.Burned()), amt(k.TotalLocked()), amt(k.TotalBonded()), amt(k.TotalUnbonding()))

	s.printf("  validators:\n")
	k.IterateValidators(func(op types.Address, v *escrow.Validator) bool {
		line := fmt.Sprintf("    %s power=%d", s.nameOf(op), k.ReportedPower(v.PubKey))
		if v.Jailed {
			line += fmt.Sprintf(" jailed_until=%d", v.JailedUntil)
		}
		if v.Tombstoned {
			line += " tombstoned"
		}
		if v.Missed > 0 {
			line += fmt.Sprintf(" missed=%d", v.Missed)
		}
		s.printf("%s\n", line)
		return false
	})

	var provs []string
	for _, n := range s.names {
		p, ok := market.GetProvider(kv, addrOf(n))
		if !ok {
			continue
		}
		r := ver.GetReputation(addrOf(n))
		line := fmt.Sprintf("    %s registered=%d class=%q attrs=%s reputation=%d (done=%d agreed=%d lost=%d no_shows=%d)",
			n, p.Registered, p.Class, strings.Join(p.Attributes, ","), r.Score(), r.Done, r.Agreed, r.Lost, r.NoShows)
		if p.Jailed {
			line += fmt.Sprintf(" jailed_until=%d", p.JailedUntil)
		}
		if p.Tombstoned {
			line += " tombstoned"
		}
		provs = append(provs, line)
	}
	if len(provs) > 0 {
		s.printf("  providers:\n%s\n", strings.Join(provs, "\n"))
	}

	for id := uint64(1); ; id++ {
		j, ok := market.GetJob(kv, id)
		if !ok {
			break
		}
		if id == 1 {
			s.printf("  jobs:\n")
		}
		s.printf("    job %d client=%s %s/%s state=%s stages=%d r=%d max=%s fee=%s windows=%d/%d/%d/%d posted=%d bid_end=%d reveal_end=%d expiry=%d\n",
			j.ID, s.nameOf(j.Client), j.Mode, j.Kind, j.State, j.Stages, j.Redundancy, amt(j.MaxPrice), amt(j.ValidatorFee),
			j.Windows.Bid, j.Windows.Reveal, j.Windows.Execute, j.Windows.Verify, j.Posted, j.BidEnd, j.RevealEnd, j.Expiry)
		prices := make([]string, len(j.Prices))
		for i, p := range j.Prices {
			prices[i] = amt(p)
		}
		s.printf("      prices=%s paid=%s refunded=%s compensated=%s fee_paid=%t fee_spent=%s locked=%s settled=%d verified=%d\n",
			strings.Join(prices, ","), amt(j.Paid), amt(j.Refunded), amt(j.Compensated), j.FeePaid, amtOrZero(j.FeeSpent), amt(k.Locked(j.ID)), j.Settled, j.Verified)
		// The rest of the record, so that a dump shows every field of a
		// job (h4_canary_looks_like_a_job compares two records).
		bids := make([]string, len(j.Bids))
		for i, n := range j.Bids {
			bids[i] = strconv.FormatUint(uint64(n), 10)
		}
		canaryBy := "-"
		if j.CanaryBy != (types.Address{}) {
			canaryBy = s.nameOf(j.CanaryBy)
		}
		s.printf("      model=%s model_size=%d input=%s seal=%s max_tokens=%d prompt_tokens=%d bids=%s canary_by=%s\n",
			s.hashStr(j.Model), j.ModelSize, s.hashStr(j.Input), s.hashStr(j.Seal), j.MaxTokens, j.PromptTokens, strings.Join(bids, ","), canaryBy)
		if j.Filled > 0 {
			s.printf("      filled=%d\n", j.Filled) // pool tasks awarded at their r-th claim
		}
		if len(j.Slices) > 0 {
			sl := make([]string, len(j.Slices))
			for i, h := range j.Slices {
				sl[i] = s.hashStr(h)
			}
			s.printf("      slices=%s\n", strings.Join(sl, ","))
		}
		s.printf("      req min_stake=%s min_rep=%d attrs=%s runtime=%q class=%q\n",
			amtOrZero(j.Req.MinStake), j.Req.MinReputation, strings.Join(j.Req.Attributes, ","), j.Req.Runtime, j.Req.Class)
		for _, b := range market.Bids(kv, j.ID) {
			state := "sealed"
			if b.Revealed {
				state = "revealed price=" + amt(b.Price)
			}
			s.printf("      bid stage=%d %s seq=%d deposit=%s %s\n", b.Stage, s.nameOf(b.Provider), b.Seq, amt(b.Deposit), state)
		}
		for st := uint16(0); st < j.Stages; st++ {
			t, ok := ver.GetTask(j.ID, st)
			if !ok {
				continue
			}
			backups := make([]string, len(t.Backups))
			for i, b := range t.Backups {
				backups[i] = s.nameOf(b)
			}
			s.printf("      task stage=%d %s commit_by=%d reveal_by=%d", st, t.Status, t.CommitDeadline, t.RevealDeadline)
			if t.ConfirmBy != 0 {
				s.printf(" confirm_by=%d", t.ConfirmBy)
			}
			if t.VoteCommitEnd != 0 {
				s.printf(" seal_by=%d", t.VoteCommitEnd)
			}
			if t.DisputeDeadline != 0 {
				s.printf(" dispute_by=%d", t.DisputeDeadline)
			}
			if t.CanaryBy != (types.Address{}) {
				s.printf(" canary=%s canary_by=%s", s.hashStr(t.Canary), s.nameOf(t.CanaryBy))
			}
			s.printf(" fee_paid=%t verdict=%s backups=[%s]\n", t.FeePaid, s.hashStr(t.Verdict), strings.Join(backups, ","))
			for _, sl := range t.Slots {
				line := "        slot " + s.nameOf(sl.Provider)
				if sl.Committed {
					line += " committed"
				}
				if sl.Revealed {
					line += " revealed=" + s.hashStr(sl.Result)
				}
				if sl.Revealed && j.Kind == market.KindSplit {
					line += fmt.Sprintf(" steps=%d hin=%s", sl.Steps, s.hashStr(sl.Hin))
				}
				if sl.Proven {
					line += " proven"
				}
				if sl.Settled {
					line += " settled"
				}
				if sl.NoShow {
					line += " no-show"
				}
				if len(sl.Replaced) > 0 {
					names := make([]string, len(sl.Replaced))
					for i, a := range sl.Replaced {
						names[i] = s.nameOf(a)
					}
					line += " replaced=[" + strings.Join(names, ",") + "]"
				}
				if sl.InputReport != 0 {
					line += " input_report=" + verifier.InputReasonName(sl.InputReport)
				}
				if sl.Checked {
					line += " input_checked"
				}
				s.printf("%s\n", line)
			}
			for _, n := range s.names {
				if ver.VoteSealed(j.ID, st, addrOf(n)) {
					s.printf("        sealed vote %s\n", n)
				}
			}
			for _, v := range ver.Votes(j.ID, st) {
				s.printf("        vote %s %s\n", s.nameOf(v.Validator), s.hashStr(v.Result))
			}
		}
	}
}
