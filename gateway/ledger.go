package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/holiman/uint256"

	"github.com/ogpu-network/ogpu/internal/atomicfile"
	"github.com/ogpu-network/ogpu/types"
)

// ledger enforces the spending caps: a request reserves its worst case
// before anything is posted, and settles to what it actually cost when it
// ends. The day's total (settled plus reserved) is written to a file
// before the reservation is granted, so a crash between posting and
// settling leaves the worst case counted, never nothing.
type ledger struct {
	mu         sync.Mutex
	path       string
	perRequest *uint256.Int
	perDay     *uint256.Int
	now        func() time.Time
	state      ledgerFile
	// onSpent is told what is counted as spent for good (Config.OnSpent).
	onSpent func(*uint256.Int)
}

// ledgerFile is the persisted form: the UTC day and what it has spent and
// reserved, in base units.
type ledgerFile struct {
	Day   string       `json:"day"`
	Spent *uint256.Int `json:"spent"`
}

func openLedger(path string, perRequest, perDay *uint256.Int, now func() time.Time) (*ledger, error) {
	l := &ledger{path: path, perRequest: perRequest, perDay: perDay, now: now, state: ledgerFile{Spent: new(uint256.Int)}}
	bz, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(bz, &l.state); err != nil || l.state.Spent == nil {
			return nil, fmt.Errorf("spending ledger %s is corrupt (%v): fix or delete it (deleting forgets today's spending)", path, err)
		}
	}
	return l, nil
}

func (l *ledger) today() string { return l.now().UTC().Format(time.DateOnly) }

// rollover starts a new day's total when the UTC day changed.
func (l *ledger) rollover() {
	if d := l.today(); d != l.state.Day {
		l.state = ledgerFile{Day: d, Spent: new(uint256.Int)}
	}
}

func (l *ledger) save() error {
	bz, err := json.Marshal(l.state)
	if err != nil {
		return err
	}
	return atomicfile.Write(l.path, bz, 0o600)
}

// reservation is a granted worst case, settled once.
type reservation struct {
	l      *ledger
	day    string
	amount *uint256.Int
	once   sync.Once
}

func budgetError(format string, a ...any) *Error {
	return &Error{Status: http.StatusPaymentRequired, Type: TypeBilling, Code: CodeBudgetExceeded, NoRetry: true, Message: fmt.Sprintf(format, a...)}
}

// reserve grants amount against the caps, or says which cap it breaks.
func (l *ledger) reserve(amount *uint256.Int) (*reservation, error) {
	if amount.Gt(l.perRequest) {
		return nil, budgetError("this request may cost up to %s, over the gateway's per-request cap of %s (lower max_tokens, or raise --max-per-request)",
			types.FormatAmount(amount), types.FormatAmount(l.perRequest))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollover()
	total, overflow := new(uint256.Int).AddOverflow(l.state.Spent, amount)
	if overflow || total.Gt(l.perDay) {
		left := new(uint256.Int)
		if l.perDay.Gt(l.state.Spent) {
			left.Sub(l.perDay, l.state.Spent)
		}
		return nil, budgetError("the day's budget of %s has %s left (UTC day %s, %s spent or reserved), and this request may cost up to %s (wait for the next UTC day, or raise --budget-per-day)",
			types.FormatAmount(l.perDay), types.FormatAmount(left), l.state.Day, types.FormatAmount(l.state.Spent), types.FormatAmount(amount))
	}
	prev := l.state.Spent
	l.state.Spent = total
	if err := l.save(); err != nil {
		l.state.Spent = prev
		return nil, &Error{Status: http.StatusInternalServerError, Type: TypeAPI, Code: "ledger_error", Message: "cannot record the reservation in the spending ledger: " + err.Error()}
	}
	return &reservation{l: l, day: l.state.Day, amount: new(uint256.Int).Set(amount)}, nil
}

// settle replaces the reservation by what the request actually cost (nil:
// keep the worst case counted, when the cost is unknown).
func (r *reservation) settle(actual *uint256.Int) {
	r.once.Do(func() {
		if actual == nil {
			return
		}
		l := r.l
		l.mu.Lock()
		defer l.mu.Unlock()
		l.rollover()
		spent := l.state.Spent
		if l.state.Day == r.day {
			// Take the reservation back out, then count the actual cost.
			if spent.Lt(r.amount) {
				spent = new(uint256.Int)
			} else {
				spent = new(uint256.Int).Sub(spent, r.amount)
			}
		}
		l.state.Spent = new(uint256.Int).Add(spent, actual)
		if l.onSpent != nil {
			l.onSpent(actual)
		}
		// If this write fails the file keeps the reserved figure, which
		// is larger: the caps stay on the safe side after a restart.
		_ = l.save()
	})
}

// spent is the day's total.
func (l *ledger) spent() (day string, spent *uint256.Int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollover()
	return l.state.Day, new(uint256.Int).Set(l.state.Spent)
}

// add counts amount, already spent outside any request (the transaction
// fees of opening and closing sessions), in the day's total. It is never
// refused: the money is gone; later requests see less budget left.
func (l *ledger) add(amount *uint256.Int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollover()
	l.state.Spent = new(uint256.Int).Add(l.state.Spent, amount)
	if l.onSpent != nil {
		l.onSpent(amount)
	}
	_ = l.save()
}

// exhausted refuses when nothing of the day's budget is left.
func (l *ledger) exhausted() *Error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rollover()
	if l.state.Spent.Lt(l.perDay) {
		return nil
	}
	return budgetError("the day's budget of %s is spent (UTC day %s, %s spent or reserved): wait for the next UTC day, or raise --budget-per-day",
		types.FormatAmount(l.perDay), l.state.Day, types.FormatAmount(l.state.Spent))
}
