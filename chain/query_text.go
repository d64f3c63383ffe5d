package chain

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// WriteText explains the job read at height to a person: what it asks,
// where it is, every stage's slots. It is the text `ogpu query job`
// prints; the devnet prints it too.
func (j *JobView) WriteText(w io.Writer, height int64) {
	fmt.Fprintf(w, "job %d: %s %s, %s (at height %d)\n", j.ID, j.Kind, j.Mode, j.StateName, height)
	fmt.Fprintf(w, "  phase:      %s\n", j.Phase)
	fmt.Fprintf(w, "  client:     %s\n", j.Client.Hex())
	fmt.Fprintf(w, "  model:      %x (%d bytes)\n", j.Model, j.ModelSize)
	if j.Input != (types.Hash{}) {
		fmt.Fprintf(w, "  input:      %x\n", j.Input)
	}
	if j.MaxTokens > 0 {
		fmt.Fprintf(w, "  tokens:     at most %d\n", j.MaxTokens)
	}
	fmt.Fprintf(w, "  work:       %d stage(s) × %d replicas, cap %s per replica\n", j.Stages, j.Redundancy, types.FormatAmount(j.MaxPrice))
	fmt.Fprintf(w, "  escrow:     %s locked (validator fee %s)\n", types.FormatAmount(j.Locked), types.FormatAmount(j.ValidatorFee))
	if j.Mode == market.ModePool {
		fmt.Fprintf(w, "  timeline:   posted %d, claims until %d, expires after %d\n", j.Posted, j.RevealEnd, j.Expiry)
	} else {
		fmt.Fprintf(w, "  timeline:   posted %d, sealed bids %d..%d, reveals %d..%d, award once every sealed bid is revealed, at the latest at the end of %d, expires after %d\n",
			j.Posted, j.Posted, j.BidEnd, j.BidEnd+1, j.RevealEnd, j.RevealEnd, j.Expiry)
	}
	req := []string{"min stake " + types.FormatAmount(j.Req.MinStake), "min reputation " + strconv.FormatUint(j.Req.MinReputation, 10)}
	if len(j.Req.Attributes) > 0 {
		req = append(req, "attributes "+strings.Join(j.Req.Attributes, ", "))
	}
	if j.Req.Runtime != "" {
		req = append(req, "runtime "+j.Req.Runtime)
	}
	if j.Req.Class != "" {
		req = append(req, "class "+j.Req.Class)
	}
	fmt.Fprintf(w, "  requires:   %s\n", strings.Join(req, "; "))
	if j.CanaryBy != (types.Address{}) {
		fmt.Fprintf(w, "  canary:     posted by validator %s, which contested a result\n", j.CanaryBy.Hex())
	}
	var bids uint32
	for _, n := range j.Bids {
		bids += n
	}
	fmt.Fprintf(w, "  bids:       %d\n", bids)
	if j.State >= market.JobRunning {
		fmt.Fprintf(w, "  money:      paid %s to providers, refunded %s, compensated %s to the client\n",
			types.FormatAmount(j.Paid), types.FormatAmount(j.Refunded), types.FormatAmount(j.Compensated))
	}
	for _, t := range j.Tasks {
		waiting := t.Status == "waiting" // verifier.TaskWaiting
		if waiting {
			// A pipeline stage: its deadlines are set when the stage before it settles.
			fmt.Fprintf(w, "  stage %d: %s at %s per replica; opens when stage %d settles", t.Stage, t.Status, types.FormatAmount(t.Price), t.Stage-1)
		} else {
			fmt.Fprintf(w, "  stage %d: %s at %s per replica; commits until %d, reveals until %d", t.Stage, t.Status, types.FormatAmount(t.Price), t.CommitDeadline, t.RevealDeadline)
		}
		if t.DisputeDeadline != 0 {
			fmt.Fprintf(w, ", votes until %d", t.DisputeDeadline)
		}
		fmt.Fprintln(w)
		if t.Audit != "" && t.Status != "settled" {
			fmt.Fprintf(w, "    audit (%s): fewer than %d agreeing results, so the validators re-execute it before it is paid\n", t.Audit, j.Redundancy)
		}
		if t.Outcome != "" {
			verified := "not verified: nobody was paid for it"
			if t.Verified {
				verified = "verified"
			}
			fmt.Fprintf(w, "    outcome: %s (%s)\n", t.Outcome, verified)
		}
		if t.Status == "settled" && t.Verdict != (types.Hash{}) {
			fmt.Fprintf(w, "    verdict: %x\n", t.Verdict)
		}
		for _, s := range t.Slots {
			state := "waiting for its result commitment"
			switch {
			case waiting:
				state = "assigned; computes on stage " + strconv.Itoa(int(t.Stage)-1) + "'s settled result"
			case s.NoShow:
				state = "no-show (missed a deadline: slashed and jailed)"
			case s.Revealed && s.Result != nil:
				state = fmt.Sprintf("committed, revealed result %x", *s.Result)
				if t.Status == "settled" && t.Verdict != (types.Hash{}) {
					if *s.Result == t.Verdict {
						state += " (correct)"
					} else {
						state += " (wrong: slashed)"
					}
				}
			case s.Committed:
				state = "committed, not revealed yet"
			}
			fmt.Fprintf(w, "    slot %s: %s\n", s.Provider.Hex(), state)
		}
		for _, b := range t.Backups {
			fmt.Fprintf(w, "    backup %s\n", b.Hex())
		}
		for _, v := range t.Votes {
			fmt.Fprintf(w, "    vote by %s (power %d): %x\n", v.Validator.Hex(), v.Power, v.Result)
		}
	}
}
