package devnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ogpu-network/ogpu/chain"
	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/node/agent"
	"github.com/ogpu-network/ogpu/types"
)

// canaryDuringNextJob has the validator agent post a canary mirroring the
// next job client posts, and prints `ogpu query job` of both side by side,
// each read in the block it was posted in. The canary's job id (0 if none
// was posted) arrives on the channel.
func (d *devnet) canaryDuringNextJob(client types.Address) <-chan uint64 {
	ctx, va := d.ctx, d.va
	out := make(chan uint64, 1)
	sctx, stop := context.WithCancel(ctx)
	blocks, err := d.c.Subscribe(sctx, 0)
	if err != nil {
		stop()
		out <- 0
		return out
	}
	d.goAgent(func() {
		posted := uint64(0)
		defer func() { out <- posted }()
		var src market.EventJobPosted
		var srcHeight int64
		for b := range blocks {
			for _, e := range node.EventsOf[market.EventJobPosted](b.Events) {
				if e.Client == client && srcHeight == 0 {
					src, srcHeight = e, b.Height
				}
			}
			if srcHeight != 0 {
				break
			}
		}
		stop()
		for range blocks { // until the subscription has stopped
		}
		if srcHeight == 0 {
			return
		}
		id, err := va.PostCanary(ctx, src.Job)
		if err != nil {
			fmt.Fprintf(d.w, "validator: no canary: %v\n", err)
			return
		}
		posted = id
		var canaryHeight int64
		for _, c := range va.Canaries() {
			if c.Job == id {
				canaryHeight = c.Posted
			}
		}
		left, lerr := d.queryJobText(ctx, src.Job, srcHeight)
		right, rerr := d.queryJobText(ctx, id, canaryHeight)
		if lerr != nil || rerr != nil {
			fmt.Fprintf(d.w, "query job: %v %v\n", lerr, rerr)
			return
		}
		fmt.Fprint(d.w, sideBySide(
			fmt.Sprintf("$ ogpu query job %d   (alice's job, in its block %d)", src.Job, srcHeight), left,
			fmt.Sprintf("$ ogpu query job %d   (?, in its block %d)", id, canaryHeight), right))
	})
	return out
}

// queryJobText is what `ogpu query job ID` prints, read at height, and
// the job's seal (in the query's JSON; the text leaves it out).
func (d *devnet) queryJobText(ctx context.Context, id uint64, height int64) (string, error) {
	res, err := d.c.Query(ctx, chain.QueryJob+strconv.FormatUint(id, 10), nil, height, false)
	if err != nil {
		return "", err
	}
	var j chain.JobView
	if err := json.Unmarshal(res.Value, &j); err != nil {
		return "", err
	}
	var b strings.Builder
	j.WriteText(&b, res.Height)
	fmt.Fprintf(&b, "  seal:       %x\n", j.Seal)
	return b.String(), nil
}

// sideBySide prints two texts in columns.
func sideBySide(lt, left, rt, right string) string {
	l := append([]string{lt}, strings.Split(strings.TrimRight(left, "\n"), "\n")...)
	r := append([]string{rt}, strings.Split(strings.TrimRight(right, "\n"), "\n")...)
	width := 0
	for _, s := range l {
		width = max(width, len(s))
	}
	var b strings.Builder
	b.WriteString("\n-- a client job and a job posted by the validator agent, as anyone sees them (every field but id, client, input, seal and heights is the same; the seal line is from the query's JSON):\n")
	for i := range max(len(l), len(r)) {
		var a, c string
		if i < len(l) {
			a = l[i]
		}
		if i < len(r) {
			c = r[i]
		}
		fmt.Fprintf(&b, "%-*s | %s\n", width, a, c)
	}
	return b.String()
}

// canarySettled waits for the canary the validator posted to settle and
// prints how: agreed with its known answer, nothing is revealed.
func (d *devnet) canarySettled(posted <-chan uint64) (*agent.CanaryStatus, error) {
	ctx, va := d.ctx, d.va
	var id uint64
	select {
	case id = <-posted:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if id == 0 {
		return nil, errors.New("the validator agent posted no canary during round 1")
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		for _, c := range va.Canaries() {
			if c.Job != id || !c.Done {
				continue
			}
			j, err := d.c.Job(ctx, id)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(d.w, "\n-- job %d was the validator's canary (its seal is hash(validator, hash(known answer, salt)); the salt never left the validator)\n", id)
			fmt.Fprintf(d.w, "canary job %d, posted from shell %s for prompt %q: settled %s on %x...; the validator's known answer (re-executed) was %x...\n",
				id, c.Shell.Hex(), c.Prompt, c.Outcome, c.Result[:6], c.Answer[:6])
			if c.Outcome != market.OutcomeAudited || c.Result != c.Answer || c.Claimed || j.CanaryBy != (types.Address{}) {
				return &c, fmt.Errorf("canary %d: outcome %s, claimed %v, CanaryBy %s; want audited (agreed, then audited like every agreed task here) on the known answer, nothing revealed", id, c.Outcome, c.Claimed, j.CanaryBy.Hex())
			}
			fmt.Fprintf(d.w, "the providers answered it right, so nothing was revealed: on chain job %d stays a job like any other\n", id)
			return &c, nil
		}
		select {
		case <-wctx.Done():
			return nil, fmt.Errorf("canary %d did not settle in 30s", id)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
