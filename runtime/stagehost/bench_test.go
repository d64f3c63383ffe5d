package stagehost

import (
	"context"
	"crypto/ecdsa"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/market"
	"github.com/ogpu-network/ogpu/node/p2p"
	"github.com/ogpu-network/ogpu/runtime/llm"
	"github.com/ogpu-network/ogpu/split"
	"github.com/ogpu-network/ogpu/types"
)

// The split benchmarks' setup is BenchmarkSplitDecode's (runtime/llm:
// the same prompt, tokens, context, batch and thread), so that its
// in-process figures are the compute reference.
const (
	loopTokens  = 256 // generated tokens per job
	loopContext = 512
	loopChainID = "ogpu-bench"
)

var (
	loopOpts = llm.Options{Threads: 1, ContextSize: loopContext}
	// loopPrompt is "Once upon a time" in stories260K's vocabulary.
	loopPrompt = []int32{1, 403, 407, 261, 378}
	quietLog   = slog.New(slog.DiscardHandler)

	loopTransport = flag.String("loopback.transport", "", "BenchmarkSplitLoopback: the transport hosts dial each other over: tcp or quic-v1 (default: libp2p's choice among both)")
)

// loopCases are the splits benchmarked: the whole model as one stage
// (the anchor), 2 stages cut at layer 3, 3 stages cut at 2 and 4.
var loopCases = []struct {
	name string
	at   []int
}{{"whole", nil}, {"stages2", []int{3}}, {"stages3", []int{2, 4}}}

// BenchmarkSplitLoopback runs split generations as providers run them:
// every stage of stories260K in its own supervised worker process
// (1 thread) behind its own libp2p host and split.Server on loopback, fed
// by a client host running split.Generate in lockstep over r replica
// chains (r = 1 and 2). One job is loopTokens tokens on fresh links.
//
// Sub-benchmarks: whole (the whole model as the single stage of the same
// transport: the anchor) and stages2 (cut at layer 3), stages3 (cuts 2,
// 4). A split sub-benchmark runs the anchor's job and its own alternately
// (one op is both), so that the ratio holds up on a machine whose load
// moves between runs; x-whole is its µs/token over the anchor's, and
// µs/added-hop is (µs/token − anchor's) / (K − 1): K stages put K + 1
// hops on a token's path, the whole model 2.
//
// Reported separately: ttft-µs (from Generate to the first token: opening
// the links, the prompt through every hop, the token back), decode
// tokens/s and µs/token (first token to last), the bytes per decoded
// token of an activation hop and of a token hop (frame header + payload +
// signature) and on a whole chain, and the largest stage's estimated
// memory (llm.EstimateStageMemory) against the whole model's. Every job's
// tokens must equal the whole model's (in-process llm.Stage): a
// correctness guard, not a timing assertion.
func BenchmarkSplitLoopback(b *testing.B) {
	info, want, files := splitSetup(b)
	for _, r := range []int{1, 2} {
		for _, c := range loopCases {
			b.Run(fmt.Sprintf("r=%d/%s", r, c.name), func(b *testing.B) {
				job, conn := newLoopback(b, files[c.name], r, want)
				var anchor jobFunc
				if c.at != nil {
					anchor, _ = newLoopback(b, files["whole"], r, want)
					if r == 1 {
						logMemory(b, info, files[c.name])
					}
				} else if r == 1 {
					b.Logf("the client reaches stage 0 over %s", conn)
				}
				runPaired(b, anchor, job, len(c.at))
				reportBytes(b, info, len(files[c.name]))
				reportMemory(b, info, files[c.name])
			})
		}
	}
}

// BenchmarkSplitWorkers is BenchmarkSplitLoopback's r = 1 without the
// network: the benchmark process drives the stages' worker processes
// itself, one after the other, over their pipes: no frames, signatures
// or libp2p. Beside BenchmarkSplitDecode (in process) and
// BenchmarkSplitLoopback it splits a hop's cost into the worker's pipe
// round trip and the transport's. The same pairing with the whole model.
func BenchmarkSplitWorkers(b *testing.B) {
	_, want, files := splitSetup(b)
	for _, c := range loopCases {
		b.Run(c.name, func(b *testing.B) {
			job := newWorkers(b, files[c.name], want)
			var anchor jobFunc
			if c.at != nil {
				anchor = newWorkers(b, files["whole"], want)
			}
			runPaired(b, anchor, job, len(c.at))
		})
	}
}

// splitSetup finds the model, computes the reference tokens and writes
// every case's slices (whole: the model file itself).
func splitSetup(b *testing.B) (*llm.ModelInfo, []int32, map[string][]llm.SliceFile) {
	path := modelPath(b)
	info, err := llm.Inspect(path)
	if err != nil {
		b.Fatal(err)
	}
	files := map[string][]llm.SliceFile{}
	for _, c := range loopCases {
		if c.at == nil {
			files[c.name] = []llm.SliceFile{{Path: path, Range: llm.LayerRange{From: 0, To: info.Layers, Of: info.Layers}, Size: info.Size}}
			continue
		}
		r, err := llm.Cuts(info.Layers, len(c.at)+1, c.at)
		if err != nil {
			b.Fatal(err)
		}
		if files[c.name], err = llm.WriteSlices(path, b.TempDir(), r); err != nil {
			b.Fatal(err)
		}
	}
	return info, referenceTokens(b, path), files
}

// referenceTokens is the whole model's greedy generation of loopTokens
// tokens in process (as BenchmarkSplitDecode's whole: no end-of-text
// stop).
func referenceTokens(b *testing.B, path string) []int32 {
	st, err := llm.LoadStage(path, loopOpts)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ss, err := st.NewSession()
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	toks := make([]int, len(loopPrompt))
	for i, t := range loopPrompt {
		toks[i] = int(t)
	}
	var out []int32
	for pos := 0; len(out) < loopTokens; {
		o, err := ss.Forward(pos, toks, nil)
		if err != nil {
			b.Fatal(err)
		}
		pos += len(toks)
		out = append(out, int32(o.Token))
		toks = []int{o.Token}
	}
	return out
}

// jobFunc runs one generation and returns its time to first token, the
// time from the first token to the last and the tokens decoded in it.
// It fails the benchmark if the tokens are not the whole model's.
type jobFunc func() (ttft, decode time.Duration, decoded int)

// runPaired runs job (and anchor, if any, alternating which goes first)
// once per op and reports the figures; added is the hops job adds.
func runPaired(b *testing.B, anchor, job jobFunc, added int) {
	var st, sd, at, ad time.Duration
	var sn, an int
	for i := 0; b.Loop(); i++ {
		if anchor != nil && i%2 == 0 {
			t, d, n := anchor()
			at, ad, an = at+t, ad+d, an+n
		}
		t, d, n := job()
		st, sd, sn = st+t, sd+d, sn+n
		if anchor != nil && i%2 == 1 {
			t, d, n := anchor()
			at, ad, an = at+t, ad+d, an+n
		}
	}
	us := float64(sd.Microseconds()) / float64(sn)
	b.ReportMetric(float64(st.Microseconds())/float64(b.N), "ttft-µs")
	b.ReportMetric(float64(sn)/sd.Seconds(), "tokens/s")
	b.ReportMetric(us, "µs/token")
	if anchor != nil {
		aus := float64(ad.Microseconds()) / float64(an)
		b.ReportMetric(float64(at.Microseconds())/float64(b.N), "whole-ttft-µs")
		b.ReportMetric(aus, "whole-µs/token")
		b.ReportMetric(us/aus, "x-whole")
		b.ReportMetric((us-aus)/float64(added), "µs/added-hop")
	}
}

// reportBytes reports what a decoded token puts on the wire, per chain:
// one token frame client → stage 0, one row of activations on each of
// the K − 1 hops between stages, one token frame last stage → client.
func reportBytes(b *testing.B, info *llm.ModelInfo, k int) {
	tokHop := split.HeaderSize + 4 + split.SigSize
	actHop := 0
	if k > 1 {
		actHop = split.HeaderSize + 4*info.NEmbd + split.SigSize
	}
	b.ReportMetric(float64(actHop), "act-B/hop")
	b.ReportMetric(float64(tokHop), "token-B/hop")
	b.ReportMetric(float64(2*tokHop+(k-1)*actHop), "B/token/chain")
}

// wholeMemory is llama.cpp's estimated memory for the whole model at the
// benchmark's context and batch.
func wholeMemory(info *llm.ModelInfo) llm.StageMemory {
	return llm.EstimateStageMemory(info, llm.LayerRange{From: 0, To: info.Layers, Of: info.Layers}, loopContext, llm.DefaultBatchSize)
}

// reportMemory reports the largest stage's estimated memory, in bytes and
// over the whole model's.
func reportMemory(b *testing.B, info *llm.ModelInfo, fs []llm.SliceFile) {
	var largest uint64
	for _, f := range fs {
		largest = max(largest, llm.EstimateStageMemory(info, f.Range, loopContext, llm.DefaultBatchSize).Total)
	}
	b.ReportMetric(float64(largest), "mem-max-stage-B")
	b.ReportMetric(float64(largest)/float64(wholeMemory(info).Total), "mem-max-stage/whole")
}

// logMemory logs each stage's estimated memory and file size against the
// whole model's.
func logMemory(b *testing.B, info *llm.ModelInfo, fs []llm.SliceFile) {
	wm := wholeMemory(info)
	b.Logf("memory: whole %s: weights %d B, KV %d B, output %d B, total %d B; file %d B",
		llm.LayerRange{From: 0, To: info.Layers, Of: info.Layers}, wm.Weights, wm.KV, wm.Output, wm.Total, info.Size)
	for s, f := range fs {
		m := llm.EstimateStageMemory(info, f.Range, loopContext, llm.DefaultBatchSize)
		b.Logf("memory: stage %d %s: weights %d B, KV %d B, output %d B, total %d B (%.3f of whole); file %d B (%.3f)",
			s, f.Range, m.Weights, m.KV, m.Output, m.Total, float64(m.Total)/float64(wm.Total), f.Size, float64(f.Size)/float64(info.Size))
	}
}

// startWorkers starts one worker per file (closed at the benchmark's
// end).
func startWorkers(b *testing.B, files []llm.SliceFile) []*Worker {
	var ws []*Worker
	for _, f := range files {
		w, err := Start(Config{Slice: f.Path, Options: loopOpts})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { w.Close() })
		ws = append(ws, w)
	}
	return ws
}

// newWorkers returns a job that drives the workers of files directly.
func newWorkers(b *testing.B, files []llm.SliceFile, want []int32) jobFunc {
	ws := startWorkers(b, files)
	forward := func(pos0 int, toks []int) int {
		out, err := ws[0].Forward(pos0, toks, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, w := range ws[1:] {
			if out, err = w.Forward(pos0, nil, out.Rows); err != nil {
				b.Fatal(err)
			}
		}
		return out.Token
	}
	prompt := make([]int, len(loopPrompt))
	for i, t := range loopPrompt {
		prompt[i] = int(t)
	}
	got := make([]int32, 0, loopTokens)
	return func() (ttft, decode time.Duration, decoded int) {
		for _, w := range ws {
			if err := w.Reset(); err != nil {
				b.Fatal(err)
			}
		}
		got = got[:0]
		start := time.Now()
		tok := forward(0, prompt)
		ttft = time.Since(start)
		got = append(got, int32(tok))
		start = time.Now()
		for pos := len(prompt); len(got) < loopTokens; pos++ {
			tok = forward(pos, []int{tok})
			got = append(got, int32(tok))
		}
		decode = time.Since(start)
		if !slices.Equal(got, want) {
			b.Fatalf("%d stages in workers: tokens differ from the whole model's\ngot  %v\nwant %v", len(ws), got, want)
		}
		return ttft, decode, len(got) - 1
	}
}

// loopNode is one libp2p host on loopback with its account key and split
// server.
type loopNode struct {
	h   *p2p.Host
	key *ecdsa.PrivateKey
	srv *split.Server
}

// loopWorker adapts a Worker to split.Forwarder (the provider agent has
// the same adapter, unexported).
type loopWorker struct {
	w     *Worker
	nEmbd int
}

func (f loopWorker) NEmbd() int   { return f.nEmbd }
func (f loopWorker) Reset() error { return f.w.Reset() }
func (f loopWorker) Forward(pos0 int, tokens []int32, rows []float32) ([]float32, int32, error) {
	var toks []int
	if tokens != nil {
		toks = make([]int, len(tokens))
		for i, t := range tokens {
			toks[i] = int(t)
		}
	}
	out, err := f.w.Forward(pos0, toks, rows)
	if err != nil {
		return nil, 0, err
	}
	return out.Rows, int32(out.Token), nil
}

// limitsOf are a link's limits as the provider agent sets them: the
// context, a prefill chunk of up to the context, the width, and the
// vocabulary where the stage has one.
func limitsOf(i Info) split.Limits {
	lim := split.Limits{Context: loopContext, MaxRows: loopContext, NEmbd: uint32(i.NEmbd)}
	if i.NVocab > 1 {
		lim.Vocab = uint32(i.NVocab)
	}
	return lim
}

// newLoopback sets up r replica chains of the stages in files, each stage
// on its own host with its own worker, and a client host, all connected;
// it returns a job that starts the stages of a new job id and runs
// split.Generate, and the address the client's connection to the first
// stage uses (which transport libp2p chose).
func newLoopback(b *testing.B, files []llm.SliceFile, r int, want []int32) (jobFunc, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	k := len(files)
	// who[peer] is the link (chain, sending stage) that a stage's host
	// may send on; the client sends on (any chain, market.ClientStage).
	who := map[peer.ID][2]uint16{}
	var clientID peer.ID
	authorize := func(_ context.Context, remote peer.ID, _ uint64, chain, stage uint16) (types.Address, error) {
		if remote == clientID && stage == market.ClientStage && int(chain) < r {
			return p2p.AddressOf(remote)
		}
		if l, ok := who[remote]; !ok || l != [2]uint16{chain, stage} {
			return types.Address{}, fmt.Errorf("peer %s may not send on chain %d stage %d", remote, chain, int16(stage))
		}
		return p2p.AddressOf(remote)
	}
	newNode := func() loopNode {
		key, err := ethcrypto.GenerateKey()
		if err != nil {
			b.Fatal(err)
		}
		h, err := p2p.New(ctx, p2p.Config{Key: key, Listen: p2p.LoopbackListen(), Logger: quietLog})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { h.Close() })
		srv, err := split.NewServer(h.Host(), split.ServerConfig{ChainID: loopChainID, Authorize: authorize, Logger: quietLog})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(srv.Close)
		return loopNode{h: h, key: key, srv: srv}
	}
	client := newNode()
	clientID = client.h.ID()
	nodes := make([][]loopNode, r)
	workers := make([][]*Worker, r)
	for j := range r {
		workers[j] = startWorkers(b, files)
		for s := range files {
			n := newNode()
			who[n.h.ID()] = [2]uint16{uint16(j), uint16(s)}
			nodes[j] = append(nodes[j], n)
		}
	}
	switch *loopTransport {
	case "", "tcp", "quic-v1":
	default:
		b.Fatalf("-loopback.transport=%q: want tcp or quic-v1 (or nothing: libp2p's choice)", *loopTransport)
	}
	connect := func(a, c loopNode) {
		addrs := c.h.Addrs()
		if *loopTransport != "" {
			addrs = slices.DeleteFunc(addrs, func(s string) bool { return !strings.Contains(s+"/", "/"+*loopTransport+"/") })
		}
		if err := a.h.ConnectPeer(ctx, c.h.ID(), addrs); err != nil {
			b.Fatal(err)
		}
	}
	first := make([]peer.ID, r)
	for j := range r {
		connect(client, nodes[j][0])
		for s := 1; s < k; s++ {
			connect(nodes[j][s-1], nodes[j][s])
		}
		connect(nodes[j][k-1], client)
		first[j] = nodes[j][0].h.ID()
	}
	conn := "no connection"
	if cs := client.h.Host().Network().ConnsToPeer(first[0]); len(cs) > 0 {
		conn = cs[0].RemoteMultiaddr().String()
	}
	infos := make([]Info, k)
	for s := range k {
		infos[s] = workers[0][s].Info()
	}
	cc := split.ClientConfig{Key: client.key, Stages: uint16(k), First: first, MaxTokens: loopTokens,
		Limits: split.Limits{Context: loopContext, MaxRows: loopContext, Vocab: uint32(infos[k-1].NVocab)}}
	job := uint64(0)
	return func() (ttft, decode time.Duration, decoded int) {
		job++
		var stages []*split.Stage
		for j := range r {
			for s := range k {
				down := client.h.ID()
				if s < k-1 {
					down = nodes[j][s+1].h.ID()
				}
				st, err := split.StartStage(nodes[j][s].srv, split.StageConfig{
					Job: job, Chain: uint16(j), Stage: uint16(s), Stages: uint16(k), Key: nodes[j][s].key,
					Limits: limitsOf(infos[s]), Forwarder: loopWorker{workers[j][s], infos[s].NEmbd},
					Downstream: down, MaxTranscript: -1,
				})
				if err != nil {
					b.Fatal(err)
				}
				stages = append(stages, st)
			}
		}
		var t0, t1 time.Time
		n := 0
		c := cc
		c.Job = job
		c.OnToken = func(int32) {
			now := time.Now()
			if n == 0 {
				t0 = now
			}
			t1 = now
			n++
		}
		start := time.Now()
		res, err := split.Generate(ctx, client.srv, c, loopPrompt)
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range stages {
			if err := st.Wait(ctx); err != nil {
				b.Fatalf("job %d: a stage ended with %v", job, err)
			}
			st.Close()
		}
		// The correctness guard: the network's tokens are the whole
		// model's, on every chain.
		if res.Divergence != nil || !res.Agreed() || !slices.Equal(res.Tokens, want) {
			b.Fatalf("%d stages × %d chains, job %d: tokens differ from the whole model's (divergence %v)\ngot  %v\nwant %v",
				k, r, job, res.Divergence, res.Tokens, want)
		}
		return t0.Sub(start), t1.Sub(t0), n - 1
	}, conn
}
