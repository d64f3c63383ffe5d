package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// A provider's node may be down or catching up for a while (a restart, a
// crash): a task does not end on a failed chain read or transaction, only
// on an answer of the chain (a refused query or transaction) or its
// deadline. These are the retries' bounds.
const (
	chainRetryMin = 200 * time.Millisecond
	chainRetryMax = 2 * time.Second
	// commitAttempt bounds one task transaction's wait for its block:
	// a node killed after taking it into its mempool forgets it, so it
	// is sent again (a second commit of the same commitment is refused
	// as a duplicate, which then means the first is on chain).
	commitAttempt = 30 * time.Second
)

// chainUnreachable reports whether err is a failure to reach the chain
// (the node down, catching up, or its answer lost) rather than its
// answer: not a refused query or transaction, not a closed task, not the
// end of ctx. A transaction refused for its nonce or fee is the sender's
// view being stale (node.Sender resynchronizes them): unreachable too.
func chainUnreachable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, errTaskClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var qe *node.QueryError
	if errors.As(err, &qe) {
		return false
	}
	var te *node.TxError
	if errors.As(err, &te) {
		switch te.Code {
		case types.ErrNonceUsed.Code, types.ErrNonceAhead.Code, types.ErrFeeTooLow.Code:
			return true
		}
		return false
	}
	return true
}

// untilChain calls f until it returns anything but a failure to reach the
// chain (chainUnreachable), waiting a bounded backoff between calls; the
// first failure and the recovery are logged. It returns f's last error,
// joined with ctx's once ctx ends.
func (p *Provider) untilChain(ctx context.Context, k taskKey, what string, f func() error) error {
	wait := chainRetryMin
	for failures := 0; ; failures++ {
		err := f()
		if !chainUnreachable(ctx, err) {
			if err == nil && failures > 0 {
				p.log.Info("the node answers again", "job", k.Job, "stage", k.Stage, "what", what, "failures", failures)
			}
			if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = errors.Join(err, ctx.Err())
			}
			return err
		}
		if failures == 0 {
			p.log.Warn("cannot reach the node; retrying until the task's deadline", "job", k.Job, "stage", k.Stage, "what", what, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (%w)", what, err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, chainRetryMax)
	}
}

// sendTask sends msg, a commitment or an input report of task k, until
// the chain takes it or answers with a refusal, or ctx ends: a node that
// is down or catching up, a lost answer or a transaction its node forgot
// is sent again (see commitAttempt). A duplicate refused after an earlier
// attempt is that attempt's message on chain: taken.
func (p *Provider) sendTask(ctx context.Context, k taskKey, what string, msg types.RawMsg) error {
	tried := false // an earlier attempt may have reached a mempool
	return p.untilChain(ctx, k, what, func() error {
		actx, cancel := context.WithTimeout(ctx, commitAttempt)
		_, err := p.sender.Send(actx, msg)
		cancel()
		var te *node.TxError
		if tried && errors.As(err, &te) && te.Code == types.ErrDuplicate.Code {
			// This commitment, sent by an earlier attempt, is on chain.
			return nil
		}
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			// The attempt's own time ran out (not the task's): the
			// transaction was not seen in a block; send it again.
			err = fmt.Errorf("not included within %s: %s", commitAttempt, err.Error())
		}
		tried = true
		return err
	})
}

// untilChain is Provider.untilChain for a validator's vote: it calls f
// until it returns anything but a failure to reach the chain, or ctx
// ends. A validator whose node is down or catching up for a few blocks
// (a restart, a pause, blocks full of spam) still seals and opens its
// vote once the node answers, rather than missing it and being slashed.
func (v *Validator) untilChain(ctx context.Context, job uint64, stage uint16, what string, f func() error) error {
	wait := chainRetryMin
	for failures := 0; ; failures++ {
		err := f()
		if !chainUnreachable(ctx, err) {
			if err == nil && failures > 0 {
				v.Logger.Info("the node answers again", "job", job, "stage", stage, "what", what, "failures", failures)
			}
			if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = errors.Join(err, ctx.Err())
			}
			return err
		}
		if failures == 0 {
			v.Logger.Warn("cannot reach the node; retrying until the vote's deadline", "job", job, "stage", stage, "what", what, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (%w)", what, err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, chainRetryMax)
	}
}

// sendVote sends msg, a sealed vote or its opening on stage of job, until
// the chain takes it or answers with a refusal, or ctx ends (see
// Provider.sendTask). A duplicate is this operator's own seal or opening
// already on chain, sent by an earlier attempt or before the agent
// restarted (the salt is derived, voteSalt, so it is the same vote): taken
// (height 0: its height is not known).
func (v *Validator) sendVote(ctx context.Context, job uint64, stage uint16, what string, msg types.RawMsg) (height int64, err error) {
	err = v.untilChain(ctx, job, stage, what, func() error {
		actx, cancel := context.WithTimeout(ctx, commitAttempt)
		res, err := v.sender.Send(actx, msg)
		cancel()
		var te *node.TxError
		if errors.As(err, &te) && te.Code == types.ErrDuplicate.Code {
			height = 0
			return nil
		}
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("not included within %s: %s", commitAttempt, err.Error())
		}
		if err == nil {
			height = res.Height
		}
		return err
	})
	return height, err
}
