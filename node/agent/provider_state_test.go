package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/holiman/uint256"
)

// errorLog records the messages of the error records a logger writes.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *errorLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelError }
func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	return nil
}
func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }

// TestSaveSecretsConcurrent: the provider saves its bid secrets from many
// goroutines at once (bids on several jobs, reveals, commits). Every save
// must succeed, and the file left must hold every secret: a restart reads
// it to reveal. The soak found "cannot save bid secrets: rename
// secrets.json.tmp" 20 times on one provider: two saves shared one
// temporary file, the second rename found it gone, and a bid sealed
// between them could be lost (its deposit forfeited at the reveal).
func TestSaveSecretsConcurrent(t *testing.T) {
	dir := t.TempDir()
	log := &errorLog{}
	newProv := func() *Provider {
		return &Provider{cfg: ProviderConfig{StateDir: dir}, log: slog.New(log),
			bids: map[taskKey]*bidSecret{}, results: map[taskKey]*resultSecret{}}
	}
	p := newProv()
	const workers, saves = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range saves {
				p.mu.Lock()
				p.bids[taskKey{uint64(w), uint16(i)}] = &bidSecret{Price: uint256.NewInt(uint64(i + 1)), Salt: randomHash()}
				p.mu.Unlock()
				p.saveSecrets()
			}
		}()
	}
	wg.Wait()
	if len(log.msgs) > 0 {
		t.Fatalf("%d saves failed, the first: %s", len(log.msgs), log.msgs[0])
	}
	q := newProv()
	q.loadSecrets()
	if len(q.bids) != workers*saves {
		t.Fatalf("the saved file holds %d bid secrets, want %d: a stale save was written last", len(q.bids), workers*saves)
	}
}
