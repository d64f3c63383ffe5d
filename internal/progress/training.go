// Package progress draws progress on a terminal for the commands: the
// training bar of a fine-tune job (`ogpu job run --kind finetune`).
package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// Training draws a fine-tune job's progress on w: chain events and
// epoch lines each on a line of their own, the streamed steps as one bar
// redrawn in place ("training [#######             ]  35%  step 14/40").
type Training struct {
	mu    sync.Mutex
	w     io.Writer
	drawn bool
}

// NewTraining returns a bar drawing on w.
func NewTraining(w io.Writer) *Training { return &Training{w: w} }

// clear ends the bar's line before other text.
func (b *Training) clear() {
	if b.drawn {
		fmt.Fprintln(b.w)
		b.drawn = false
	}
}

// Line prints an event line (a printf format), ending the bar first.
// Line prints an event line (a printf format), ending the bar first.
func (b *Training) Line(format string, a ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear()
	fmt.Fprintf(b.w, format+"\n", a...)
}

// Epoch prints an epoch's loss line, ending the bar first.
// Epoch prints an epoch's loss line, ending the bar first.
func (b *Training) Epoch(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear()
	fmt.Fprintln(b.w, line)
}

// Step redraws the bar at step s of n (out of range: ignored).
// Step redraws the bar at step s of n (out of range: ignored).
func (b *Training) Step(s, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n <= 0 || s > n {
		return
	}
	k := s * 20 / n
	fmt.Fprintf(b.w, "\rtraining [%s%s] %3d%%  step %d/%d", strings.Repeat("#", k), strings.Repeat(" ", 20-k), s*100/n, s, n)
	b.drawn = true
}

// End ends the bar's line.
// End ends the bar's line.
func (b *Training) End() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear()
}
