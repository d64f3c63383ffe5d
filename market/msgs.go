package market

import (
	"fmt"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/types"
)

// Bounds on message contents: the chain stores every byte forever.
const (
	MaxPeerIDLen  = 128
	MaxAddrs      = 16
	MaxAddrLen    = 256
	MaxAttributes = 64
	MaxRuntimes   = 8
	MaxRuntimeLen = 32
	MaxModels     = 64
	MaxClassLen   = 256
	MaxMonikerLen = 70
	// MaxJobTokens bounds an inference job's MaxTokens.
	MaxJobTokens = 1 << 20
)

// ProviderInfo is what a provider publishes about itself.
type ProviderInfo struct {
	PeerID     string
	Addrs      []string
	Attributes []string
	Runtimes   []string
	Models     []types.Hash
	Class      string
	// Moniker is a name shown to people (consoles, explorers): anyone's
	// text, at most MaxMonikerLen printable characters, escaped where
	// shown. Optional (older records and messages have none).
	Moniker string `rlp:"optional"`
	// TrainClass is the provider's training determinism class (empty: it
	// takes no fine-tune job): a fine-tune job's Req.Class must equal it.
	TrainClass string `rlp:"optional"`
}

// Validate checks the bounds and syntax of everything in the record.
func (p *ProviderInfo) Validate() error {
	switch {
	case p.PeerID == "" || len(p.PeerID) > MaxPeerIDLen || !types.Printable(p.PeerID):
		return fmt.Errorf("peer id must be 1..%d printable characters", MaxPeerIDLen)
	case len(p.Addrs) > MaxAddrs:
		return fmt.Errorf("%d addresses, at most %d", len(p.Addrs), MaxAddrs)
	case len(p.Attributes) > MaxAttributes:
		return fmt.Errorf("%d attributes, at most %d", len(p.Attributes), MaxAttributes)
	case len(p.Runtimes) > MaxRuntimes:
		return fmt.Errorf("%d runtimes, at most %d", len(p.Runtimes), MaxRuntimes)
	case len(p.Models) > MaxModels:
		return fmt.Errorf("%d models, at most %d", len(p.Models), MaxModels)
	case len(p.Class) > MaxClassLen || !types.Printable(p.Class):
		return fmt.Errorf("determinism class must be at most %d printable characters", MaxClassLen)
	case len(p.TrainClass) > MaxClassLen || !types.Printable(p.TrainClass):
		return fmt.Errorf("training class must be at most %d printable characters", MaxClassLen)
	case len(p.Moniker) > MaxMonikerLen || !types.Printable(p.Moniker):
		return fmt.Errorf("moniker must be at most %d printable characters", MaxMonikerLen)
	}
	for _, a := range p.Addrs {
		if a == "" || len(a) > MaxAddrLen || !types.Printable(a) {
			return fmt.Errorf("address %q: want 1..%d printable characters", a, MaxAddrLen)
		}
	}
	for _, a := range p.Attributes {
		if err := ValidateAttribute(a); err != nil {
			return err
		}
	}
	for _, r := range p.Runtimes {
		if !validSegment(r, false) || len(r) > MaxRuntimeLen {
			return fmt.Errorf("runtime %q: want 1..%d of [A-Za-z0-9._:-]", r, MaxRuntimeLen)
		}
	}
	return nil
}

// MsgRegisterProvider registers the sender as a provider.
type MsgRegisterProvider struct{ Info ProviderInfo }

// Raw encodes the message.
func (m *MsgRegisterProvider) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeRegisterProvider, m)
}

// MsgUpdateProvider replaces the sender's published record.
type MsgUpdateProvider struct{ Info ProviderInfo }

// Raw encodes the message.
func (m *MsgUpdateProvider) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeUpdateProvider, m)
}

func decodeProviderInfo(name string, data []byte) (*ProviderInfo, error) {
	var m MsgRegisterProvider
	if err := types.DecodeMsgPayload(name, data, &m); err != nil {
		return nil, err
	}
	if err := m.Info.Validate(); err != nil {
		return nil, types.ErrInvalidMsg.Wrapf("%s: %v", name, err)
	}
	return &m.Info, nil
}

// DecodeMsgRegisterProvider parses and checks a MsgRegisterProvider payload.
func DecodeMsgRegisterProvider(data []byte) (*MsgRegisterProvider, error) {
	info, err := decodeProviderInfo("register-provider", data)
	if err != nil {
		return nil, err
	}
	return &MsgRegisterProvider{Info: *info}, nil
}

// DecodeMsgUpdateProvider parses and checks a MsgUpdateProvider payload.
func DecodeMsgUpdateProvider(data []byte) (*MsgUpdateProvider, error) {
	info, err := decodeProviderInfo("update-provider", data)
	if err != nil {
		return nil, err
	}
	return &MsgUpdateProvider{Info: *info}, nil
}

// MsgUnjailProvider lets a jailed provider bid again after its jail time.
type MsgUnjailProvider struct{}

// Raw encodes the message.
func (m *MsgUnjailProvider) Raw() types.RawMsg {
	return types.NewRawMsg(types.MsgTypeUnjailProvider, m)
}

// DecodeMsgUnjailProvider parses a MsgUnjailProvider payload.
func DecodeMsgUnjailProvider(data []byte) (*MsgUnjailProvider, error) {
	var m MsgUnjailProvider
	return &m, types.DecodeMsgPayload("unjail-provider", data, &m)
}

// MsgPostJob posts a job and locks stages × r × max price + the validator
// fee from the sender.
type MsgPostJob struct {
	Kind       string
	Mode       string
	Model      types.Hash
	ModelSize  uint64
	Stages     uint16
	Redundancy uint16
	MaxPrice   *uint256.Int
	Req        Requirements
	Input      types.Hash
	Windows    Windows
	// Seal: see Job.Seal. 32 random bytes, or a canary seal.
	Seal types.Hash
	// MaxTokens: see Job.MaxTokens.
	MaxTokens uint64 `rlp:"optional"`
	// PromptTokens: see Job.PromptTokens.
	PromptTokens uint64 `rlp:"optional"`
	// Slices: see Job.Slices (split jobs only, one per stage).
	Slices []types.Hash `rlp:"optional"`
	// Session: see Job.Session (session jobs only).
	Session *SessionTerms `rlp:"nil,optional"`
	// Finetune: see Job.Finetune (fine-tune jobs only).
	Finetune *FinetuneTerms `rlp:"nil,optional"`
	// Short: see Job.Short. Empty takes the kind's default (ShortDefault).
	Short string `rlp:"optional"`
}

// Raw encodes the message.
func (m *MsgPostJob) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypePostJob, m) }

// DecodeMsgPostJob parses a MsgPostJob payload and checks what does not
// depend on parameters (PostJob checks those).
func DecodeMsgPostJob(data []byte) (*MsgPostJob, error) {
	var m MsgPostJob
	if err := types.DecodeMsgPayload("post-job", data, &m); err != nil {
		return nil, err
	}
	bad := func(f string, a ...any) error {
		return types.ErrInvalidMsg.Wrapf("post-job: "+f, a...)
	}
	switch {
	case m.Kind != KindInference && m.Kind != KindPipeline && m.Kind != KindSplit && m.Kind != KindSession && m.Kind != KindFinetune:
		return nil, bad("kind %q: want %s, %s, %s, %s or %s", m.Kind, KindInference, KindPipeline, KindSplit, KindSession, KindFinetune)
	case (m.Kind == KindSession) != (m.Session != nil):
		return nil, bad("session terms go with kind %s, and only with it", KindSession)
	case (m.Kind == KindFinetune) != (m.Finetune != nil):
		return nil, bad("fine-tune terms go with kind %s, and only with it", KindFinetune)
	case m.Mode != ModeAuction && m.Mode != ModePool:
		return nil, bad("mode %q: want %s or %s", m.Mode, ModeAuction, ModePool)
	case m.Model == (types.Hash{}):
		return nil, bad("model hash is missing")
	case m.Stages == 0:
		return nil, bad("a job has at least one stage")
	case m.Redundancy < 2 && m.Kind != KindSession:
		return nil, bad("redundancy %d: at least 2 replicas, or nothing can be verified", m.Redundancy)
	case m.MaxPrice == nil || m.MaxPrice.IsZero():
		return nil, bad("max price must be positive")
	case m.MaxPrice.Gt(types.MaxSupply):
		return nil, bad("max price is above the supply")
	case m.Req.MinStake == nil:
		return nil, bad("requirements: min stake is missing (use 0)")
	case m.Req.MinReputation > 1000:
		return nil, bad("requirements: min reputation %d is above the maximum score of 1000", m.Req.MinReputation)
	case len(m.Req.Attributes) > MaxAttributes:
		return nil, bad("requirements: %d attributes, at most %d", len(m.Req.Attributes), MaxAttributes)
	case len(m.Req.Runtime) > MaxRuntimeLen || !types.Printable(m.Req.Runtime):
		return nil, bad("requirements: runtime is too long")
	case len(m.Req.Class) > MaxClassLen || !types.Printable(m.Req.Class):
		return nil, bad("requirements: class is too long")
	case m.Windows.Bid == 0 || (m.Kind != KindSession && (m.Windows.Execute == 0 || m.Windows.Verify == 0)):
		return nil, bad("windows: bid, execute and verify must each be at least one block")
	case m.Kind == KindSession && (m.Windows.Execute != 0 || m.Windows.Verify != 0):
		return nil, bad("windows: a session has no execute or verify window (its terms say how long it serves)")
	case m.Mode == ModeAuction && m.Windows.Reveal == 0:
		return nil, bad("windows: an auction needs a reveal window of at least one block")
	case m.Seal == (types.Hash{}):
		return nil, bad("seal is missing: 32 random bytes (the wallet picks them)")
	case m.MaxTokens > MaxJobTokens:
		return nil, bad("max tokens %d: at most %d", m.MaxTokens, MaxJobTokens)
	case m.MaxTokens != 0 && m.Kind != KindInference && m.Kind != KindSplit:
		return nil, bad("max tokens applies to %s and %s jobs only", KindInference, KindSplit)
	case m.PromptTokens > MaxJobTokens:
		return nil, bad("prompt tokens %d: at most %d", m.PromptTokens, MaxJobTokens)
	case m.PromptTokens != 0 && m.Kind != KindInference && m.Kind != KindSplit:
		return nil, bad("prompt tokens applies to %s and %s jobs only", KindInference, KindSplit)
	case len(m.Slices) != 0 && m.Kind != KindSplit:
		return nil, bad("slices apply to %s jobs only", KindSplit)
	}
	if err := validateShort(m.Kind, m.Short); err != nil {
		return nil, bad("%v", err)
	}
	if m.Kind == KindSplit {
		if err := validateSplitPost(&m); err != nil {
			return nil, bad("%v", err)
		}
	}
	if m.Kind == KindSession {
		if err := validateSessionPost(&m); err != nil {
			return nil, bad("%v", err)
		}
	}
	if m.Kind == KindFinetune {
		if err := validateFinetunePost(&m); err != nil {
			return nil, bad("%v", err)
		}
	}
	for _, r := range m.Req.Attributes {
		if _, err := ParseRequirement(r); err != nil {
			return nil, bad("requirements: %v", err)
		}
	}
	return &m, nil
}

// MsgCancelJob cancels the sender's job before the award; escrow and every
// bid deposit are refunded.
type MsgCancelJob struct{ Job uint64 }

// Raw encodes the message.
func (m *MsgCancelJob) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeCancelJob, m) }

// DecodeMsgCancelJob parses a MsgCancelJob payload.
func DecodeMsgCancelJob(data []byte) (*MsgCancelJob, error) {
	var m MsgCancelJob
	return &m, types.DecodeMsgPayload("cancel-job", data, &m)
}

// MsgCommitBid places a sealed bid: Commitment = BidCommitment(job, stage,
// price, salt, sender). It locks the bid deposit.
type MsgCommitBid struct {
	Job        uint64
	Stage      uint16
	Commitment types.Hash
}

// Raw encodes the message.
func (m *MsgCommitBid) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeCommitBid, m) }

// DecodeMsgCommitBid parses and checks a MsgCommitBid payload.
func DecodeMsgCommitBid(data []byte) (*MsgCommitBid, error) {
	var m MsgCommitBid
	if err := types.DecodeMsgPayload("commit-bid", data, &m); err != nil {
		return nil, err
	}
	if m.Commitment == (types.Hash{}) {
		return nil, types.ErrInvalidMsg.Wrapf("commit-bid: empty commitment")
	}
	return &m, nil
}

// MsgRevealBid opens a sealed bid.
type MsgRevealBid struct {
	Job   uint64
	Stage uint16
	Price *uint256.Int
	Salt  types.Hash
}

// Raw encodes the message.
func (m *MsgRevealBid) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeRevealBid, m) }

// DecodeMsgRevealBid parses and checks a MsgRevealBid payload.
func DecodeMsgRevealBid(data []byte) (*MsgRevealBid, error) {
	var m MsgRevealBid
	if err := types.DecodeMsgPayload("reveal-bid", data, &m); err != nil {
		return nil, err
	}
	if m.Price == nil || m.Price.IsZero() {
		return nil, types.ErrInvalidMsg.Wrapf("reveal-bid: price must be positive")
	}
	return &m, nil
}

// MsgClaimTask claims a task of a pool-mode job at its fixed reward.
type MsgClaimTask struct {
	Job   uint64
	Stage uint16
}

// Raw encodes the message.
func (m *MsgClaimTask) Raw() types.RawMsg { return types.NewRawMsg(types.MsgTypeClaimTask, m) }

// DecodeMsgClaimTask parses a MsgClaimTask payload.
func DecodeMsgClaimTask(data []byte) (*MsgClaimTask, error) {
	var m MsgClaimTask
	return &m, types.DecodeMsgPayload("claim-task", data, &m)
}
