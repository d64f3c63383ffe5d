package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/node"
)

// clientBuffer is how many messages a browser may fall behind before it is
// dropped (its EventSource reconnects by itself).
const clientBuffer = 64

// maxClients bounds the open event streams.
const maxClients = 256

// hub fans the one chain subscription out to browsers.
type hub struct {
	c       *node.Client
	mu      sync.Mutex
	clients map[*sseClient]struct{}
}

type sseClient struct {
	job uint64 // 0: blocks only
	ch  chan []byte
}

func newHub(c *node.Client) *hub { return &hub{c: c, clients: map[*sseClient]struct{}{}} }

// run subscribes from the next block and broadcasts; it re-subscribes with
// backoff if the node goes away.
func (h *hub) run(ctx context.Context) {
	backoff := time.Second
	var from int64
	for ctx.Err() == nil {
		sub, err := h.c.Subscribe(ctx, from)
		if err != nil {
			from = 0 // e.g. pruned past from: go on from the next block
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		for b := range sub {
			h.broadcast(b, h.meta(ctx, b.Height))
			from = b.Height + 1
		}
	}
}

// blockMsg is the "block" event every stream gets.
type blockMsg struct {
	Height int64  `json:"height"`
	Time   string `json:"time"`
	Events int    `json:"events"`
	Txs    int    `json:"txs"`
	Hash   string `json:"hash"`
}

// meta reads block h's tx count and hash, once for every browser.
func (h *hub) meta(ctx context.Context, height int64) blockMsg {
	m := blockMsg{Txs: -1}
	info, err := h.c.RPC.BlockchainInfo(ctx, height, height)
	if err == nil && len(info.BlockMetas) == 1 {
		m.Txs, m.Hash = info.BlockMetas[0].NumTxs, info.BlockMetas[0].BlockID.Hash.String()
	}
	return m
}

// jobMsg is the "job" event a job's stream gets.
type jobMsg struct {
	timelineEntry
	Phase string `json:"phase"`
}

func (h *hub) broadcast(b node.BlockEvents, m blockMsg) {
	m.Height, m.Time, m.Events = b.Height, b.Time.UTC().Format(timeFormat), len(b.Events)
	bm, _ := json.Marshal(m)
	blockLine := []byte("event: block\ndata: " + string(bm) + "\n\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	for cl := range h.clients {
		msgs := [][]byte{blockLine}
		if cl.job != 0 {
			for _, ev := range b.Events {
				if e, ok := entryOf(cl.job, b.Height, b.Time, ev); ok {
					jm, _ := json.Marshal(jobMsg{timelineEntry: e, Phase: e.Step})
					msgs = append(msgs, []byte("event: job\ndata: "+string(jm)+"\n\n"))
				}
			}
		}
		for _, m := range msgs {
			if !trySend(cl.ch, m) { // too slow: drop it; EventSource reconnects
				delete(h.clients, cl)
				close(cl.ch)
				break
			}
		}
	}
}

// textMsg is the "text" event: tokens a job of this console generated.
type textMsg struct {
	Job  uint64 `json:"job"`
	Text string `json:"text"`
}

// text sends generated text to the streams following its job.
func (h *hub) text(job uint64, text string) {
	bz, _ := json.Marshal(textMsg{Job: job, Text: text})
	line := []byte("event: text\ndata: " + string(bz) + "\n\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	for cl := range h.clients {
		if cl.job == job && !trySend(cl.ch, line) {
			delete(h.clients, cl)
			close(cl.ch)
		}
	}
}

func (h *hub) add(job uint64) (*sseClient, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.clients) >= maxClients {
		return nil, false
	}
	cl := &sseClient{job: job, ch: make(chan []byte, clientBuffer)}
	h.clients[cl] = struct{}{}
	return cl, true
}

func (h *hub) remove(cl *sseClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[cl]; ok {
		delete(h.clients, cl)
		close(cl.ch)
	}
}

// events streams blocks (and, with ?job=ID, that job's events) as SSE.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	var job uint64
	if q := r.URL.Query().Get("job"); q != "" {
		id, err := strconv.ParseUint(q, 10, 64)
		if err != nil || id == 0 {
			http.Error(w, fmt.Sprintf("job %q: want a job id, a number from 1", q), http.StatusBadRequest)
			return
		}
		job = id
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	cl, ok := s.hub.add(job)
	if !ok {
		http.Error(w, "too many open event streams: close some console tabs", http.StatusServiceUnavailable)
		return
	}
	defer s.hub.remove(cl)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprint(w, "retry: 2000\n\n")
	fl.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case m, ok := <-cl.ch:
			if !ok {
				return
			}
			if _, err := w.Write(m); err != nil {
				return
			}
			fl.Flush()
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
			fl.Flush()
		}
	}
}

// attr returns an event attribute's value.
func attr(ev abci.Event, key string) (string, bool) {
	for _, a := range ev.Attributes {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

func trySend(ch chan []byte, m []byte) bool {
	select {
	case ch <- m:
		return true
	default:
		return false
	}
}
