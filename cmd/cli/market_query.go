package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/holiman/uint256"
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/types"
)

// marketQueryCmds are the market, staking and verification queries.
func marketQueryCmds() []*cobra.Command {
	return []*cobra.Command{newQueryJobCmd(), newQueryJobsCmd(), newQueryBidsCmd(), newQueryProviderCmd(), newQueryProvidersCmd(),
		newQueryWhyNoBidsCmd(), newQueryEscrowCmd(), newQueryStakeCmd(), newQueryReputationCmd(), newQueryValidatorsCmd(), newQuerySessionCmd()}
}

// queryCmd makes a query command whose answer is one JSON value at path.
func runQuery[T any](cmd *cobra.Command, path string, data []byte, text func(w io.Writer, v T, height int64)) error {
	ctx, c, cancel, err := connect(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	var v T
	h, err := c.QueryJSON(ctx, path, data, &v)
	if err != nil {
		return err
	}
	return output(cmd, v, func(w io.Writer) { text(w, v, h) })
}

func shortHash(h types.Hash) string { return fmt.Sprintf("%x", h[:8]) }

func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func newQueryJobCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "job ID",
		Short: "Show a job: phase, escrow, requirements, per-stage slots and results",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			return runQuery(cmd, chain.QueryJob+strconv.FormatUint(id, 10), nil, func(w io.Writer, j chain.JobView, h int64) { j.WriteText(w, h) })
		},
	}
}

func newQueryJobsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs, optionally by --state, --client or --provider",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			state, _ := cmd.Flags().GetString("state")
			client, _ := cmd.Flags().GetString("client")
			provider, _ := cmd.Flags().GetString("provider")
			n := 0
			for _, s := range []string{state, client, provider} {
				if s != "" {
					n++
				}
			}
			if n > 1 {
				return fmt.Errorf("give at most one of --state, --client and --provider")
			}
			path := chain.QueryJobs
			switch {
			case state != "":
				if _, err := market.ParseJobState(state); err != nil {
					return err
				}
				path += "/state/" + state
			case client != "":
				a, err := resolveAddress(cmd, client)
				if err != nil {
					return err
				}
				path += "/client/" + a.Hex()
			case provider != "":
				a, err := resolveAddress(cmd, provider)
				if err != nil {
					return err
				}
				path += "/provider/" + a.Hex()
			}
			return runQuery(cmd, path, nil, func(w io.Writer, jobs []chain.JobView, h int64) {
				if len(jobs) == 0 {
					fmt.Fprintf(w, "no jobs (at height %d)\n", h)
				}
				for _, j := range jobs {
					fmt.Fprintf(w, "%-6d %-10s %s/%s  %d×%d at ≤%s  client %s\n       %s\n", j.ID, j.StateName, j.Kind, j.Mode, j.Stages, j.Redundancy,
						types.FormatAmount(j.MaxPrice), j.Client.Hex(), j.Phase)
				}
			})
		},
	}
	cmd.Flags().String("state", "", "bidding, revealing, running, completed, expired or cancelled")
	cmd.Flags().String("client", "", "jobs posted by this address or key name")
	cmd.Flags().String("provider", "", "jobs awarded to this address or key name")
	return cmd
}

func newQueryBidsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "bids JOB",
		Short: "List a job's bids: sealed, or revealed with their prices",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			return runQuery(cmd, chain.QueryBids+strconv.FormatUint(id, 10), nil, func(w io.Writer, bids []chain.BidView, _ int64) {
				if len(bids) == 0 {
					fmt.Fprintf(w, "no bids on job %d (why: `ogpu query why-no-bids %d`)\n", id, id)
				}
				for _, b := range bids {
					price := "sealed (commitment " + shortHash(b.Commitment) + "…)"
					if b.Revealed {
						price = "revealed " + types.FormatAmount(b.Price)
					}
					fmt.Fprintf(w, "stage %d  %s  %s, deposit %s\n", b.Stage, b.Provider.Hex(), price, types.FormatAmount(b.Deposit))
				}
			})
		},
	}
}

func printProvider(w io.Writer, p *chain.ProviderView) {
	state := "active"
	switch {
	case p.Tombstoned:
		state = "tombstoned for fraud: can never bid again"
	case p.Jailed:
		state = fmt.Sprintf("jailed until height %d, then `ogpu tx provider unjail`", p.JailedUntil)
	}
	fmt.Fprintf(w, "provider %s: %s\n", p.Address.Hex(), state)
	fmt.Fprintf(w, "  peer id:    %s\n", p.PeerID)
	if len(p.Addrs) > 0 {
		fmt.Fprintf(w, "  addresses:  %s\n", strings.Join(p.Addrs, " "))
	}
	if len(p.Attributes) > 0 {
		fmt.Fprintf(w, "  attributes: %s\n", strings.Join(p.Attributes, " "))
	}
	if len(p.Runtimes) > 0 {
		fmt.Fprintf(w, "  runtimes:   %s\n", strings.Join(p.Runtimes, " "))
	}
	if p.Class != "" {
		fmt.Fprintf(w, "  class:      %s\n", p.Class)
	}
	for _, m := range p.Models {
		fmt.Fprintf(w, "  model:      %x\n", m)
	}
	fmt.Fprintf(w, "  bonded:     %s\n", types.FormatAmount(p.Bonded))
	for _, u := range p.Unbonding {
		fmt.Fprintf(w, "  unbonding:  %s until height %d\n", types.FormatAmount(u.Amount), u.Matures)
	}
	r := p.Reputation
	fmt.Fprintf(w, "  reputation: %d/1000 (%d done, %d agreed, %d lost, %d no-shows)\n", p.Score, r.Done, r.Agreed, r.Lost, r.NoShows)
	fmt.Fprintf(w, "  registered: height %d\n", p.Registered)
}

func newQueryProviderCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "provider ADDRESS|NAME",
		Short: "Show a provider's record, stake, jail state and reputation",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := resolveAddress(cmd, args[0])
			if err != nil {
				return err
			}
			return runQuery(cmd, chain.QueryProvider+a.Hex(), nil, func(w io.Writer, p chain.ProviderView, _ int64) { printProvider(w, &p) })
		},
	}
}

func newQueryProvidersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "providers",
		Short: "List providers; --match (or any requirement flag) lists only those eligible under the requirements",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			match, _ := f.GetBool("match")
			for _, n := range []string{"require", "min-stake", "min-reputation", "runtime", "class"} {
				match = match || f.Changed(n)
			}
			text := func(w io.Writer, ps []chain.ProviderView, _ int64) {
				if len(ps) == 0 {
					fmt.Fprintln(w, yesNo(match, "no provider meets these requirements", "no provider is registered"))
				}
				for _, p := range ps {
					state := yesNo(p.Tombstoned, "tombstoned", yesNo(p.Jailed, "jailed", "active"))
					fmt.Fprintf(w, "%s  %-10s bonded %s, reputation %d, peer %s\n", p.Address.Hex(), state, types.FormatAmount(p.Bonded), p.Score, p.PeerID)
				}
			}
			page := ""
			if after, _ := f.GetString("after"); after != "" {
				page = "?after=" + after
			}
			if !match {
				return runQuery(cmd, chain.QueryProviders+page, nil, text)
			}
			var req market.Requirements
			minStake, _ := f.GetString("min-stake")
			var err error
			if req.MinStake, err = types.ParseAmount(minStake); err != nil {
				return fmt.Errorf("min stake: %w", err)
			}
			req.MinReputation, _ = f.GetUint64("min-reputation")
			req.Attributes, _ = f.GetStringArray("require")
			req.Runtime, _ = f.GetString("runtime")
			req.Class, _ = f.GetString("class")
			for _, r := range req.Attributes {
				if _, err := market.ParseRequirement(r); err != nil {
					return err
				}
			}
			bz, err := json.Marshal(req)
			if err != nil {
				return err
			}
			return runQuery(cmd, chain.QueryMatch+page, bz, text)
		},
	}
	f := cmd.Flags()
	f.String("after", "", "page on after this provider address (a query examines at most 500 records)")
	f.Bool("match", false, "list only providers eligible under the requirement flags")
	f.StringArray("require", nil, "attribute requirement, e.g. gpu/vendor/nvidia or ram>=32Gi (repeatable)")
	f.String("min-stake", "0", "least bonded stake, on top of the chain minimum")
	f.Uint64("min-reputation", 0, "least reputation score (0..1000)")
	f.String("runtime", "", "runtime the provider must offer")
	f.String("class", "", "determinism class the provider must be in")
	return cmd
}

func newQueryWhyNoBidsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "why-no-bids JOB",
		Short: "Explain, provider by provider, who may bid on a job and why the others may not",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			path := chain.QueryWhyNoBids + strconv.FormatUint(id, 10)
			if after, _ := cmd.Flags().GetString("after"); after != "" {
				path += "?after=" + after
			}
			return runQuery(cmd, path, nil, func(w io.Writer, v chain.WhyNoBidsView, _ int64) {
				fmt.Fprintf(w, "job %d (%s), %d bid(s): %s\n", v.Job, v.State, v.Bids, v.Summary)
				if v.Next != "" {
					defer fmt.Fprintf(w, "more providers are registered: ogpu query why-no-bids %d --after %s\n", v.Job, v.Next)
				}
				for _, p := range v.Providers {
					switch {
					case p.Eligible && p.Bid:
						fmt.Fprintf(w, "  %s  eligible, bid\n", p.Provider.Hex())
					case p.Eligible:
						fmt.Fprintf(w, "  %s  eligible, did not bid\n", p.Provider.Hex())
					default:
						fmt.Fprintf(w, "  %s  not eligible: %s\n", p.Provider.Hex(), p.Reason)
					}
				}
			})
		},
	}
	cmd.Flags().String("after", "", "page on after this provider address (a query examines at most 500 records)")
	return cmd
}

func newQueryEscrowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "escrow JOB",
		Short: "Show a job's escrow: locked, maximum payout, fee, paid, refunded, compensated",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			return runQuery(cmd, chain.QueryEscrow+strconv.FormatUint(id, 10), nil, func(w io.Writer, v chain.EscrowView, _ int64) {
				fmt.Fprintf(w, "job %d (%s)\n  locked:        %s\n  max payout:    %s\n  validator fee: %s\n  paid:          %s\n  refunded:      %s\n  compensated:   %s\n",
					v.Job, v.State, types.FormatAmount(v.Locked), types.FormatAmount(v.MaxPayout), types.FormatAmount(v.ValidatorFee),
					types.FormatAmount(v.Paid), types.FormatAmount(v.Refunded), types.FormatAmount(v.Compensated))
			})
		},
	}
}

func newQuerySessionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "session ID",
		Short: "Show a session lease: client, prices, each lane's budget and what it was paid, expiry, phase, disputes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || id == 0 {
				return fmt.Errorf("session %q: want a session id, a number from 1 (the id of the job that opened it)", args[0])
			}
			return runQuery(cmd, chain.QuerySession+strconv.FormatUint(id, 10), nil, func(w io.Writer, v chain.SessionView, _ int64) {
				fmt.Fprintf(w, "session %d (%s at height %d), client %s\n  price per token: %s in, %s out\n  serves until %d, redemptions until %d\n",
					v.ID, v.Phase, v.Height, v.Client.Hex(), types.FormatAmount(v.PriceIn), types.FormatAmount(v.PriceOut), v.Expiry, v.Due)
				for _, l := range v.Lanes {
					fmt.Fprintf(w, "  lane %s: budget %s, paid %s\n", l.Provider.Hex(), types.FormatAmount(l.Budget), types.FormatAmount(l.Paid))
				}
				if len(v.Disputes) > 0 {
					fmt.Fprintf(w, "  disputes: %d (ogpu query session %d --output json has them)\n", len(v.Disputes), v.ID)
				}
			})
		},
	}
}

func newQueryStakeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stake ADDRESS|NAME",
		Short: "Show an account's bonded and unbonding stake (and its validator, if any)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := resolveAddress(cmd, args[0])
			if err != nil {
				return err
			}
			return runQuery(cmd, chain.QueryStake+a.Hex(), nil, func(w io.Writer, v chain.StakeView, _ int64) {
				fmt.Fprintf(w, "%s\n  bonded:    %s\n", v.Address.Hex(), types.FormatAmount(v.Bonded))
				total := new(uint256.Int)
				for _, u := range v.Unbonding {
					total.Add(total, u.Amount)
					fmt.Fprintf(w, "  unbonding: %s, returns at height %d (slashable until then)\n", types.FormatAmount(u.Amount), u.Matures)
				}
				if len(v.Unbonding) == 0 {
					fmt.Fprintln(w, "  unbonding: none")
				}
				if v.Validator != nil {
					fmt.Fprintf(w, "  validator: %s, power %d%s\n", v.Validator.Name, v.Validator.Power, validatorState(v.Validator))
				}
			})
		},
	}
}

func validatorState(v *chain.ValidatorView) string {
	switch {
	case v.Tombstoned:
		return ", tombstoned"
	case v.Jailed:
		return fmt.Sprintf(", jailed until height %d (then `ogpu tx validator unjail`)", v.JailedUntil)
	}
	return ""
}

func newQueryReputationCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "reputation ADDRESS|NAME",
		Short: "Show a provider's reputation counters and score (0..1000)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := resolveAddress(cmd, args[0])
			if err != nil {
				return err
			}
			return runQuery(cmd, chain.QueryReputation+a.Hex(), nil, func(w io.Writer, v chain.ReputationView, _ int64) {
				fmt.Fprintf(w, "%s: score %d/1000\n  done %d, agreed %d, lost %d, no-shows %d\n", v.Address.Hex(), v.Score, v.Done, v.Agreed, v.Lost, v.NoShows)
			})
		},
	}
}

func newQueryValidatorsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validators",
		Short: "List validators: operator, voting power, stake, jail state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runQuery(cmd, chain.QueryValidators, nil, func(w io.Writer, vals []chain.ValidatorView, _ int64) {
				if len(vals) == 0 {
					fmt.Fprintln(w, "no validators")
				}
				for _, v := range vals {
					fmt.Fprintf(w, "%-20s operator %s, power %d, stake %s, missed %d%s\n", v.Name, v.Operator.Hex(), v.Power, types.FormatAmount(v.Stake), v.Missed, validatorState(&v))
				}
			})
		},
	}
}
