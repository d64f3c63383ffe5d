package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/verifier"
)

// Input reports (issue 11, H1). A provider that cannot get or use its
// task's input sends verifier.MsgReportInput instead of missing its commit
// deadline: a reported slot is not a no-show. The validators then check
// the input; if they find it available they serve it and the provider
// gets a fresh window, in which it fetches the input again (from the
// validators too) and computes; a second report is refused.

// minReportMargin is the fewest blocks before its commit deadline at
// which a provider stops fetching its input and reports it unavailable,
// so that the report lands before the deadline. The margin grows with the
// job's commit window (reportMargin).
const minReportMargin = 3

// reportMargin is how many blocks before the commit deadline of a task
// whose commit window is window blocks (the job's Windows.Execute) its
// provider reports an input it could not fetch: a quarter of the window,
// at least minReportMargin. Three blocks were too few in the soak (job 39
// stage 0): with blocks full of spam and a validator down, the report
// reached the chain after the deadline and the provider, who had tried
// to fetch all along, was slashed as a no-show.
func reportMargin(window uint64) uint64 {
	return max(minReportMargin, window/4)
}

// errInputInvalid: the input blob was fetched (it is the job's, by hash)
// but is not a valid input for the job.
var errInputInvalid = errors.New("the input is not valid for the job")

// errInputReported: the provider reported its input instead of computing;
// the validators decide (not a failure of the provider).
var errInputReported = errors.New("input reported to the chain")

// contextFit says why a job of promptTokens (0: not declared) and
// maxTokens does not fit a context of ctxSize tokens, or "".
//
// A job that declares no prompt length could have any prompt up to
// MaxPromptBytes (a llama-style tokenizer emits up to one token per byte):
// a provider bids on it only if max_tokens leaves at least half of its
// context for the prompt. If the prompt then does not fit, it reports
// InputTooLong, and validators uphold the report if the prompt and
// max_tokens do not fit their own context of the model either.
func contextFit(promptTokens, maxTokens uint64, ctxSize int) string {
	c := uint64(max(ctxSize, 0))
	switch {
	case promptTokens > 0 && promptTokens+maxTokens > c:
		return fmt.Sprintf("the prompt (%d tokens, as the job declares) plus max_tokens (%d) exceed this provider's context of %d tokens", promptTokens, maxTokens, c)
	case promptTokens == 0 && maxTokens > c/2:
		return fmt.Sprintf("the job declares no prompt length (prompt_tokens) and its max_tokens (%d) leaves less than half of this provider's context (%d tokens) for the prompt", maxTokens, c)
	}
	return ""
}

// promptFits returns why prompt cannot run as job j declares on model m:
// more tokens than the job's prompt_tokens, or prompt + max_tokens beyond
// m's context. nil if it fits.
func promptFits(m *llm.Model, j *chain.JobView, prompt string) error {
	toks, err := m.Tokenize(prompt)
	if err != nil {
		return nil // Generate reports it
	}
	n := uint64(len(toks))
	c := uint64(m.Options().ContextSize)
	switch {
	case j.PromptTokens > 0 && n > j.PromptTokens:
		return fmt.Errorf("the prompt of job %d is %d tokens, the job declares %d", j.ID, n, j.PromptTokens)
	case n+j.MaxTokens > c:
		return fmt.Errorf("the prompt of job %d (%d tokens) plus max_tokens (%d) exceed the context of %d tokens", j.ID, n, j.MaxTokens, c)
	}
	return nil
}

// reportBy is the height until which a provider fetches its input before
// it reports it unavailable: reportMargin(window) blocks before the commit
// deadline, window being the job's commit window (Windows.Execute). After
// an input check (checked) it may not report again and tries until the
// deadline itself.
func reportBy(commitDeadline, window uint64, checked bool) uint64 {
	m := reportMargin(window)
	if checked || commitDeadline <= m {
		return commitDeadline
	}
	return commitDeadline - m
}

// isChecked reports whether task k's input was reported and found
// available: the provider may not report it again.
func (p *Provider) isChecked(k taskKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checked[k]
}

// reportInput sends the provider's report that it cannot get or use the
// input of task k (reason: verifier.InputUnavailable, InputTooLong or
// InputInvalid) and returns errInputReported, or why the report failed.
func (p *Provider) reportInput(ctx context.Context, k taskKey, reason uint8, why error) error {
	msg := &verifier.MsgReportInput{Job: k.Job, Stage: k.Stage, Reason: reason}
	if err := p.sendTask(ctx, k, "report the input", msg.Raw()); err != nil {
		return fmt.Errorf("cannot report the input (%s: %v): %w", verifier.InputReasonName(reason), why, err)
	}
	p.log.Warn("reported the input: the validators check it", "job", k.Job, "stage", k.Stage,
		"reason", verifier.InputReasonName(reason), "why", why)
	return fmt.Errorf("%w (%s): %v", errInputReported, verifier.InputReasonName(reason), why)
}

// inputCheckOpened holds back the reveals of a task under an input check:
// they are taken once the task reopens (or never, if it settles).
func (p *Provider) inputCheckOpened(e market.EventInputCheckOpened) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.results[taskKey{e.Job, e.Stage}]; ok {
		r.CommitDeadline = max(r.CommitDeadline, e.Deadline)
	}
}

// inputAvailable handles the end of an input check that found the input
// available: the task reopens with a fresh commit window. A provider that
// holds a live slot of it and has not committed (it reported) runs the
// task again, fetching the input from the validators too; it may not
// report again. A provider that committed reveals after the new window.
func (p *Provider) inputAvailable(ctx context.Context, e market.EventInputAvailable) {
	k := taskKey{e.Job, e.Stage}
	p.mu.Lock()
	if r, ok := p.results[k]; ok {
		r.CommitDeadline = max(r.CommitDeadline, e.CommitDeadline)
		r.Revealed = false
	}
	p.mu.Unlock()
	j, err := p.cfg.Chain.Job(ctx, e.Job)
	if err != nil || int(e.Stage) >= len(j.Tasks) {
		return
	}
	for _, s := range j.Tasks[e.Stage].Slots {
		if s.Provider != p.addr || s.NoShow || s.Committed {
			continue
		}
		p.log.Info("the validators found the input available: fetching it again and computing", "job", e.Job, "stage", e.Stage,
			"commit_deadline", e.CommitDeadline)
		p.mu.Lock()
		p.checked[k] = true
		delete(p.running, k)
		p.mu.Unlock()
		p.startTask(ctx, k, e.CommitDeadline)
		return
	}
}
