package split

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"strings"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// ReplayConfig names the stage a transcript is replayed through.
type ReplayConfig struct {
	ChainID string
	Job     uint64
	Chain   uint16
	// Stage is the replayed stage, Stages the job's K.
	Stage, Stages uint16
	// Upstream is the account that signed the input transcript: the
	// upstream stage's provider, or the job's client for stage 0.
	Upstream types.Address
	Limits   Limits
}

// Replay re-executes a stage on its input transcript (the frames its
// upstream sent, as Transcript.WriteTo writes them), without the network:
// it checks every frame as the stage's Receiver did (signature by
// Upstream, steps, positions, sizes), runs fwd on it as Stage does, and
// returns the Commitment an honest stage makes: T frames, Hin over the
// input, Hout over the frames it would have sent. Output frames are hashed
// exactly as Stage seals them (the signature is not hashed), so a
// validator's replay gives the honest Hout bit for bit within the
// determinism class, and a replacement stage rebuilds its KV cache the
// same way. fwd must be a fresh session.
func Replay(r io.Reader, c ReplayConfig, fwd Forwarder) (Commitment, error) {
	from, carries := c.Stage-1, KindActivations
	if c.Stage == 0 {
		from, carries = market.ClientStage, KindTokens
	}
	rc, err := NewReceiver(ReceiverConfig{
		Link:   Link{ChainID: c.ChainID, Job: c.Job, Chain: c.Chain, From: from},
		Signer: c.Upstream, Limits: c.Limits, Carries: carries, MaxTranscript: -1,
	})
	if err != nil {
		return Commitment{}, err
	}
	// The output's running hash does not depend on the key: any key seals
	// the frames an honest stage would have sent.
	key, err := replayKey()
	if err != nil {
		return Commitment{}, err
	}
	out, err := NewSender(key, Link{ChainID: c.ChainID, Job: c.Job, Chain: c.Chain, From: c.Stage})
	if err != nil {
		return Commitment{}, err
	}
	st := &Stage{c: StageConfig{Job: c.Job, Chain: c.Chain, Stage: c.Stage, Stages: c.Stages, Limits: c.Limits, Forwarder: fwd}}
	for {
		wire, _, err := ReadFrame(r, c.Limits)
		if err == io.EOF {
			break
		}
		if err != nil {
			return Commitment{}, fmt.Errorf("transcript frame %d: %w", rc.Steps()+1, err)
		}
		f, err := rc.Accept(wire)
		if err != nil {
			return Commitment{}, fmt.Errorf("transcript frame %d: %w", rc.Steps()+1, err)
		}
		var reply Frame
		switch f.Kind {
		case KindClose:
			reply = Frame{Header: Header{Kind: KindClose}}
		case KindError:
			reply = errorFrame(fmt.Errorf("%w: %s", ErrStage, f.Message))
		default:
			if reply, err = st.forward(f); err != nil {
				reply = errorFrame(err)
			}
		}
		if _, err := out.Seal(reply); err != nil {
			return Commitment{}, fmt.Errorf("replaying frame %d: %w", rc.Steps(), err)
		}
		if reply.Kind == KindClose || reply.Kind == KindError {
			break
		}
	}
	if rc.Steps() == 0 {
		return Commitment{}, errors.New("empty transcript: nothing to replay")
	}
	return Commitment{T: rc.Steps(), Hin: rc.Run(), Hout: out.Run()}, nil
}

// errorFrame is the error frame a stage sends for err (Stage.fail).
func errorFrame(err error) Frame {
	msg := err.Error()
	if len(msg) > MaxMessage {
		msg = strings.ToValidUTF8(msg[:MaxMessage], "")
	}
	return Frame{Header: Header{Kind: KindError, N: uint32(len(msg))}, Message: msg}
}

func replayKey() (*ecdsa.PrivateKey, error) { return ethcrypto.GenerateKey() }
