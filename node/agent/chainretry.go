package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

// An agent reads the chain before its block loop (the chain's parameters,
// its own records, the block to follow from). The node may not answer yet:
// a fresh chain's node before its first commit refuses every state query
// ("no committed state yet"), and a node still starting, catching up or
// restarting does not answer at all. An agent started with its node (ogpud
// start runs the validator agent beside the chain) meets exactly that: it
// waits for the chain (waitForChain) rather than stop, and says what it
// waits for.
const (
	// startRetryMax bounds the wait between two start-up reads.
	startRetryMax = 5 * time.Second
	// startLogEvery: while the node keeps answering the same way, the
	// wait is logged again this often.
	startLogEvery = time.Minute
)

// errNoBlockYet is a node's status at height 0: it has committed no block.
var errNoBlockYet = errors.New("the node has committed no block yet")

// waitRefused reports whether err, met by an agent reading the chain
// before its block loop, is one to wait out: the node cannot be reached or
// is not there yet (chainUnreachable, errNoBlockYet), or it refused a
// query (no committed state yet; a node catching up or pruned refusing a
// height). Not: the end of ctx, a refused transaction (but a stale nonce
// or fee, see chainUnreachable), or an answer this agent cannot decode (a
// node of another version: asking again gets the same answer).
func waitRefused(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var qe *node.QueryError
	if errors.As(err, &qe) {
		return true
	}
	var se *json.SyntaxError
	var ue *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &ue) {
		return false
	}
	return chainUnreachable(ctx, err)
}

// waitingFor says, for the log, what an agent whose read failed with err
// waits for, and how loud: a fresh chain's first block is what every first
// start waits for (information); a node that refuses or does not answer,
// a warning.
func waitingFor(err error) (string, slog.Level) {
	var qe *node.QueryError
	switch {
	case errors.Is(err, errNoBlockYet), errors.As(err, &qe) && strings.Contains(qe.Log, "no committed state"):
		return "its first block (the node has committed none yet)", slog.LevelInfo
	case errors.As(err, &qe):
		return "the node to answer a query it refused", slog.LevelWarn
	default:
		return "the node to answer (down, starting or catching up)", slog.LevelWarn
	}
}

// waitForChain calls read until it returns nil or an error that is not
// waitRefused, or ctx ends, waiting from chainRetryMin, doubling up to
// startRetryMax, between calls. The wait is logged (waitingFor) when it
// starts, when what the node answers changes and every startLogEvery,
// saying which agent waits, for what and why; the end of a wait is logged
// too. It returns read's last error (joined with ctx's once ctx ends).
func waitForChain(ctx context.Context, log *slog.Logger, agent, what string, read func() error) error {
	if log == nil {
		log = slog.Default()
	}
	wait := chainRetryMin
	start := time.Now()
	var said string
	var saidAt time.Time
	for tries := 1; ; tries++ {
		err := read()
		if err == nil {
			if tries > 1 {
				log.Info(agent+" agent: the chain answers, going on", "agent", agent, "what", what,
					"tries", tries, "waited", time.Since(start).Round(time.Second))
			}
			return nil
		}
		if !waitRefused(ctx, err) {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = errors.Join(err, ctx.Err())
			}
			return err
		}
		if why, level := waitingFor(err); why != said || time.Since(saidAt) >= startLogEvery {
			log.Log(ctx, level, agent+" agent waiting for the chain: "+why+"; asking again", "agent", agent, "what", what,
				"tries", tries, "waited", time.Since(start).Round(time.Second), "err", err)
			said, saidAt = why, time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %w)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, startRetryMax)
	}
}

// stoppedForGood logs, at error level, that agent stopped on err while
// ctx is still on: a real error, not a wait for the chain (waitForChain
// waits those out) nor the end of ctx. hint says what it no longer does
// and what to do.
func stoppedForGood(ctx context.Context, log *slog.Logger, agent string, err error, hint string) {
	if err == nil || ctx.Err() != nil {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	log.Error("the "+agent+" agent stopped for good: "+hint, "agent", agent, "err", err)
}
