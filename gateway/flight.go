package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// recording is one request's answer as it is produced: the status and
// headers once decided, then body chunks. The HTTP client that sent the
// request and any retry that joins it replay the same recording, so a
// retried request gets the first attempt's answer, not a second job.
type recording struct {
	mu      sync.Mutex
	status  int
	header  http.Header
	chunks  [][]byte
	done    bool
	changed chan struct{}
}

func newRecording() *recording { return &recording{changed: make(chan struct{})} }

func (r *recording) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// start decides the status and headers (the first call wins).
func (r *recording) start(status int, h http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status != 0 || r.done {
		return
	}
	r.status, r.header = status, h.Clone()
	r.notify()
}

func (r *recording) started() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status != 0
}

// write appends a body chunk (after start).
func (r *recording) write(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.chunks = append(r.chunks, b)
	r.notify()
}

// finish ends the body.
func (r *recording) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	r.notify()
}

func (r *recording) from(i int) (status int, h http.Header, chunks [][]byte, done bool, changed <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status, r.header, r.chunks[i:], r.done, r.changed
}

// replay writes the recording to w as it grows, until it is done or ctx
// (the HTTP client) goes away, or a write stalls longer than stall (a
// client that stopped reading: its connection is cut); the work behind it
// goes on either way.
func (r *recording) replay(ctx context.Context, w http.ResponseWriter, stall time.Duration) {
	rc := http.NewResponseController(w)
	// Deadlines bound writes only, never the wait between chunks.
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	wrote := false
	for i := 0; ; {
		status, h, chunks, done, changed := r.from(i)
		if status != 0 && !wrote {
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(status)
			wrote = true
		}
		if wrote {
			if len(chunks) > 0 {
				_ = rc.SetWriteDeadline(time.Now().Add(stall))
				for _, c := range chunks {
					if _, err := w.Write(c); err != nil {
						return
					}
				}
				if err := rc.Flush(); err != nil {
					return
				}
				_ = rc.SetWriteDeadline(time.Time{})
			}
			i += len(chunks)
			if done {
				return
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// flight is one request being answered, findable by its retries.
type flight struct {
	key []byte
	// print is the request's bodyPrint: a request reusing an
	// Idempotency-Key with another body is refused, not joined.
	print [32]byte
	rec   *recording
	// dispatched is set once money moved; ended when the answer is
	// complete. Both under flights.mu.
	dispatched bool
	ended      time.Time
}

// flights finds the answer to a retried request. A request is keyed by
// its route and its Idempotency-Key if it sent one, else its route and
// canonical body: a retry of a posted
// request within the window replays the first answer instead of posting
// again. A request that failed before anything was posted is forgotten at
// once, so its retry runs afresh.
type flights struct {
	mu     sync.Mutex
	m      map[[32]byte]*flight
	window time.Duration
	now    func() time.Time
}

// maxFlights bounds the table; the oldest ended entries go first.
const maxFlights = 4096

func requestKey(route string, idem string, print [32]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(route))
	h.Write([]byte{0})
	if idem != "" {
		// The key alone names the request (its body is checked apart).
		h.Write([]byte{1})
		h.Write([]byte(idem))
	} else {
		h.Write([]byte{0})
		h.Write(print[:])
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// bodyPrint is the sha256 of the request's JSON in canonical form (keys
// sorted, no spaces): a retry whose client serialized the same request
// in another order is the same request.
func bodyPrint(body []byte) [32]byte {
	var v any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if d.Decode(&v) == nil {
		if c, err := json.Marshal(v); err == nil {
			return sha256.Sum256(c)
		}
	}
	return sha256.Sum256(body)
}

// join returns the flight a retry with key k should replay, if any.
func (fs *flights) join(k [32]byte) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.m[k]
	if f == nil {
		return nil
	}
	if !f.ended.IsZero() && fs.now().Sub(f.ended) > fs.window {
		delete(fs.m, k)
		return nil
	}
	return f
}

// add registers a new flight under k (a newer request with the same key
// replaces an older one: retries join the latest).
func (fs *flights) add(k, print [32]byte) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m == nil {
		fs.m = map[[32]byte]*flight{}
	}
	if len(fs.m) >= maxFlights {
		fs.evictLocked()
	}
	f := &flight{key: k[:], print: print, rec: newRecording()}
	fs.m[k] = f
	return f
}

func (fs *flights) setDispatched(f *flight) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f.dispatched = true
}

// end marks f complete: kept for the window if it dispatched, else
// forgotten.
func (fs *flights) end(f *flight) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var k [32]byte
	copy(k[:], f.key)
	f.ended = fs.now()
	if !f.dispatched && fs.m[k] == f {
		delete(fs.m, k)
	}
}

func (fs *flights) evictLocked() {
	now := fs.now()
	for k, f := range fs.m {
		if !f.ended.IsZero() && now.Sub(f.ended) > fs.window {
			delete(fs.m, k)
		}
	}
	for len(fs.m) >= maxFlights {
		var oldest [32]byte
		var at time.Time
		for k, f := range fs.m {
			if !f.ended.IsZero() && (at.IsZero() || f.ended.Before(at)) {
				oldest, at = k, f.ended
			}
		}
		if at.IsZero() {
			return // all in flight: bounded by the concurrency cap
		}
		delete(fs.m, oldest)
	}
}
