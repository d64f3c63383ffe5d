package split

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/types"
)

// testCtx bounds a test's network operations. It is no timing assertion:
// a healthy run takes a small fraction of it.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var quiet = slog.New(slog.DiscardHandler)

// node is a real libp2p host on loopback (the project's p2p.Host) with
// its account key.
type node struct {
	h   *p2p.Host
	key *ecdsa.PrivateKey
}

func newNode(t testing.TB) node {
	t.Helper()
	k := newKey(t)
	h, err := p2p.New(testCtx(t), p2p.Config{Key: k, Listen: p2p.LoopbackListen(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return node{h: h, key: k}
}

func (n node) id() peer.ID { return n.h.ID() }

func connect(t testing.TB, a, b node) {
	t.Helper()
	if err := a.h.ConnectPeer(testCtx(t), b.id(), b.h.Addrs()); err != nil {
		t.Fatal(err)
	}
}

func newServer(t testing.TB, n node, auth Authorize) *Server {
	t.Helper()
	s, err := NewServer(n.h.Host(), ServerConfig{ChainID: testChainID, Authorize: auth, Logger: quiet, ExpectWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// fakeModel is a deterministic stand-in for an LLM split in stages, in
// pure float32 arithmetic: stage 0 embeds tokens, every stage mixes each
// row with a running mean of the session's earlier rows (its "KV
// cache"), the last stage picks the argmax of a fixed linear head. A
// real model cannot run here without llama.cpp (runtime/llm tests it).
type fakeModel struct {
	nEmbd, vocab int
}

var model = fakeModel{nEmbd: 16, vocab: 50}

func (m fakeModel) embed(tok int32, pos int, row []float32) {
	for i := range row {
		row[i] = float32((int(tok)*131+i*17+pos*7)%101)/101 - 0.5
	}
}

func (m fakeModel) head(row []float32) int32 {
	best, arg := float32(0), int32(0)
	for v := 0; v < m.vocab; v++ {
		var s float32
		for i, x := range row {
			s += x * float32((v*31+i*17+v*i)%23-11)
		}
		if v == 0 || s > best {
			best, arg = s, int32(v)
		}
	}
	return arg
}

// fakeStage is stage s of k of fakeModel, one session. lie, if set,
// perturbs the output row at a position (a provider that cheats).
type fakeStage struct {
	m    fakeModel
	s, k int
	lie  func(pos int, row []float32)
	fail func(pos int) error

	mu    sync.Mutex
	sum   []float32
	next  int
	calls int
}

func newFakeStage(s, k int) *fakeStage {
	return &fakeStage{m: model, s: s, k: k, sum: make([]float32, model.nEmbd)}
}

func (f *fakeStage) NEmbd() int { return f.m.nEmbd }

func (f *fakeStage) Reset() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.sum)
	f.next = 0
	return nil
}

func (f *fakeStage) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeStage) Forward(pos0 int, tokens []int32, rows []float32) ([]float32, int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	w := f.m.nEmbd
	if pos0 != f.next {
		return nil, 0, fmt.Errorf("fake stage %d: session is at position %d, asked for %d", f.s, f.next, pos0)
	}
	if (f.s == 0) != (tokens != nil) || (f.s == 0) == (rows != nil) {
		return nil, 0, fmt.Errorf("fake stage %d: tokens %v rows %d", f.s, tokens != nil, len(rows))
	}
	n := len(tokens)
	if f.s > 0 {
		n = len(rows) / w
	}
	out := make([]float32, n*w)
	x := make([]float32, w)
	for r := range n {
		p := pos0 + r
		if f.fail != nil {
			if err := f.fail(p); err != nil {
				return nil, 0, err
			}
		}
		if f.s == 0 {
			f.m.embed(tokens[r], p, x)
		} else {
			copy(x, rows[r*w:(r+1)*w])
		}
		y := out[r*w : (r+1)*w]
		for i := range x {
			f.sum[i] += x[i]
			y[i] = 0.5*x[i] + 0.5*f.sum[i]/float32(p+1) + float32(f.s+1)*0.01*x[(i+1)%w]
		}
		if f.lie != nil {
			f.lie(p, y)
		}
	}
	f.next += n
	if f.s == f.k-1 {
		return nil, f.m.head(out[(n-1)*w:]), nil
	}
	return out, 0, nil
}

// wholeModel generates greedily with the k fake stages composed in one
// process: the reference the split network must equal token for token.
// lie[s], if set, is stage s's perturbation.
func wholeModel(k int, prompt []int32, maxTokens int, lie map[int]func(int, []float32)) []int32 {
	st := make([]*fakeStage, k)
	for s := range st {
		st[s] = newFakeStage(s, k)
		st[s].lie = lie[s]
	}
	run := func(pos int, toks []int32) int32 {
		var rows []float32
		var next int32
		for s, f := range st {
			var err error
			if s == 0 {
				rows, next, err = f.Forward(pos, toks, nil)
			} else {
				rows, next, err = f.Forward(pos, nil, rows)
			}
			if err != nil {
				panic(err)
			}
		}
		return next
	}
	tok := run(0, prompt)
	out := []int32{tok}
	for pos := len(prompt); len(out) < maxTokens; pos++ {
		tok = run(pos, []int32{tok})
		out = append(out, tok)
	}
	return out
}

const testJob = 7

var (
	testPrompt  = []int32{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}
	splitLimits = Limits{Context: 128, MaxRows: 4, NEmbd: uint32(model.nEmbd), Vocab: uint32(model.vocab)}
)

// pipeline is one job on real hosts: a client and r replica chains of k
// stages, each stage on its own host with its own server, and access as
// the agent will give it: a link's sender must be the previous stage of
// the same chain of the job (or the client, for stage 0; the last stage,
// for the client).
type pipeline struct {
	mu     sync.Mutex // guards nodes (a recovery replaces one)
	k, r   int
	client node
	csrv   *Server
	nodes  [][]node
	srvs   [][]*Server
	fakes  [][]*fakeStage
	stages [][]*Stage
}

// sender returns who may send on link (job, chain, stage).
func (p *pipeline) sender(chain, stage uint16) (node, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if int(chain) >= p.r {
		return node{}, false
	}
	if stage == market.ClientStage {
		return p.client, true
	}
	if int(stage) >= p.k {
		return node{}, false
	}
	return p.nodes[chain][stage], true
}

// authorize is the job's access rule, with the receiver's own place: a
// stage (chain j, stage s) takes frames only from (j, s-1), the client
// only from (j, k-1).
func (p *pipeline) authorize(self func(chain, from uint16) bool) Authorize {
	return func(_ context.Context, remote peer.ID, job uint64, chain, stage uint16) (types.Address, error) {
		if job != testJob {
			return types.Address{}, fmt.Errorf("job %d is not one this node works on", job)
		}
		want, ok := p.sender(chain, stage)
		if !ok || want.id() != remote || !self(chain, stage) {
			return types.Address{}, fmt.Errorf("peer %s is not the upstream of this node on chain %d (stage %d) of job %d", remote, chain, int16(stage), job)
		}
		return p2p.AddressOf(remote)
	}
}

type pipeOpt func(p *pipeline, chain, stage int, c *StageConfig)

// newPipeline starts the hosts and stages of a k × r job.
func newPipeline(t testing.TB, k, r int, opts ...pipeOpt) *pipeline {
	t.Helper()
	p := &pipeline{k: k, r: r, client: newNode(t)}
	p.csrv = newServer(t, p.client, p.authorize(func(chain, from uint16) bool { return int(from) == k-1 }))
	for j := range r {
		var ns []node
		var ss []*Server
		var fs []*fakeStage
		for s := range k {
			n := newNode(t)
			ns = append(ns, n)
			self := func(chain, from uint16) bool {
				if s == 0 {
					return int(chain) == j && from == market.ClientStage
				}
				return int(chain) == j && int(from) == s-1
			}
			ss = append(ss, newServer(t, n, p.authorize(self)))
			fs = append(fs, newFakeStage(s, k))
		}
		p.nodes, p.srvs, p.fakes = append(p.nodes, ns), append(p.srvs, ss), append(p.fakes, fs)
	}
	for j := range r {
		connect(t, p.client, p.nodes[j][0])
		for s := 1; s < k; s++ {
			connect(t, p.nodes[j][s-1], p.nodes[j][s])
		}
		connect(t, p.nodes[j][k-1], p.client)
	}
	for j := range r {
		var sts []*Stage
		for s := range k {
			down := p.client.id()
			if s < k-1 {
				down = p.nodes[j][s+1].id()
			}
			c := StageConfig{Job: testJob, Chain: uint16(j), Stage: uint16(s), Stages: uint16(k), Key: p.nodes[j][s].key,
				Limits: splitLimits, Forwarder: p.fakes[j][s], Downstream: down}
			for _, o := range opts {
				o(p, j, s, &c)
			}
			st, err := StartStage(p.srvs[j][s], c)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(st.Close)
			sts = append(sts, st)
		}
		p.stages = append(p.stages, sts)
	}
	return p
}

func (p *pipeline) clientConfig(maxTokens int) ClientConfig {
	c := ClientConfig{Job: testJob, Key: p.client.key, Stages: uint16(p.k), Limits: splitLimits, MaxTokens: maxTokens}
	for j := range p.r {
		c.First = append(c.First, p.nodes[j][0].id())
	}
	return c
}
