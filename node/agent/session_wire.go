package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/holiman/uint256"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/ogpu-network/ogpu/session"
	"github.com/ogpu-network/ogpu/types"
)

// SessionProtocol carries a session's requests from its client to one of
// its providers, over one long-lived stream per lane (package session has
// the signed objects; research/protocol-threats.md §1 the attacks).
//
// Every message is one line of JSON. The client opens with
// {"session":N}; the provider serves only the session's client (the peer
// whose key is the client's account) and answers with the lane's state
// ({"ready":{...}}: the last seq it served, what the lane is owed and the
// highest voucher it holds, its context and its credit). Then, per
// request:
//
//	client:   {"request":Q,"request_sig":..,"prompt":"..","voucher":V,"voucher_sig":..}
//	          V prepays the prompt: cumulative = owed + n_in × price_in, seq = Q.seq
//	provider: {"token":N,"piece":".."} per generated token (the line of /ogpu/llm/stream/1)
//	client:   {"voucher":V,..} every credit/2 tokens: owed + n_in × price_in + tokens × price_out
//	provider: {"receipt":R,"receipt_sig":..}
//	client:   {"voucher":V,..} with the lane's new cumulative, exactly
//	provider: {"ack":{"seq":N,"cumulative":".."}}: stored; the next request may come
//
// or {"refusal":F,"refusal_sig":..}, a signed refusal, instead of tokens,
// or {"error":".."} where the provider stops (a stranger, a broken
// protocol). Amounts are decimal strings in base units; signatures are
// 65 bytes [R || S || V], low S, in base64.
const SessionProtocol = "/ogpu/session/1"

// Session stream limits.
const (
	// maxSessionLine bounds one line: a prompt of MaxPromptBytes, JSON
	// escaped (at most 6 bytes a byte), and its signed objects.
	maxSessionLine = 6*MaxPromptBytes + 8<<10
	// sessionIdle is how long a stream may stay silent between requests.
	sessionIdle = 10 * time.Minute
	// sessionVoucherWait is how long a provider waits for a voucher it is
	// owed (interim or final) before it stops serving the client.
	sessionVoucherWait = 30 * time.Second
	// DefaultSessionCredit is the output tokens a provider generates ahead
	// of the voucher paying them (rule 3: what a client can take unpaid is
	// at most this many tokens).
	DefaultSessionCredit = 64
	// sessionTokenFlush is the least time between two writes of token
	// lines (the first line of an answer and its last go at once). A
	// model slower than one token per interval sends each token alone, as
	// it is made; a faster one sends them in groups, so that the per-line
	// work on the stream (the encoding, the transport's packets and the
	// client's wakeups) does not take CPU from the decode loop on a
	// machine with few cores: docs/benchmarks.md, "the gateway in session
	// mode".
	sessionTokenFlush = 8 * time.Millisecond
)

// sessionHello opens a stream.
type sessionHello struct {
	Session uint64 `json:"session"`
}

// LaneStatus is a provider's account of its lane, sent when a stream opens.
type LaneStatus struct {
	Provider types.Address `json:"provider"`
	// Seq is the last request the provider took (0: none); Request its
	// hash; Owed what the lane is owed after it, Held the highest voucher
	// the provider holds (Held < Owed: the voucher for Seq is missing).
	Seq     uint64       `json:"seq"`
	Request types.Hash   `json:"request"`
	Owed    *uint256.Int `json:"owed"`
	Held    *uint256.Int `json:"held"`
	// Answered: the provider holds the answer to Seq (the same request
	// again replays it); false if Seq was refused or cut off.
	Answered bool `json:"answered,omitempty"`
	// Context is the provider's context in tokens (prompt + max_tokens
	// must fit); Credit the output tokens it generates ahead of a voucher.
	Context uint64 `json:"context"`
	Credit  uint64 `json:"credit"`
	// Stopped, if set, says why the provider serves this client no more.
	Stopped string `json:"stopped,omitempty"`
}

// sessionAck confirms a stored voucher.
type sessionAck struct {
	Seq        uint64       `json:"seq"`
	Cumulative *uint256.Int `json:"cumulative"`
}

// clientMsg is a line from the client: a request (with the voucher
// prepaying its prompt) or a voucher alone.
type clientMsg struct {
	Request    *session.Request `json:"request,omitempty"`
	RequestSig []byte           `json:"request_sig,omitempty"`
	Prompt     string           `json:"prompt,omitempty"`
	Voucher    *session.Voucher `json:"voucher,omitempty"`
	VoucherSig []byte           `json:"voucher_sig,omitempty"`
}

// providerMsg is a line from the provider. Token lines are those of
// StreamProtocol.
type providerMsg struct {
	Ready      *LaneStatus      `json:"ready,omitempty"`
	Token      *int             `json:"token,omitempty"`
	Piece      string           `json:"piece,omitempty"`
	Receipt    *session.Receipt `json:"receipt,omitempty"`
	ReceiptSig []byte           `json:"receipt_sig,omitempty"`
	Refusal    *session.Refusal `json:"refusal,omitempty"`
	RefusalSig []byte           `json:"refusal_sig,omitempty"`
	Ack        *sessionAck      `json:"ack,omitempty"`
	Error      string           `json:"error,omitempty"`
}

// lineConn reads and writes a session stream's lines.
type lineConn struct {
	s network.Stream
	r *bufio.Reader
}

func newLineConn(s network.Stream) *lineConn {
	return &lineConn{s: s, r: bufio.NewReaderSize(s, 64<<10)}
}

// errLineTooLong: a line beyond maxSessionLine.
var errLineTooLong = fmt.Errorf("a line is longer than %d bytes", maxSessionLine)

// read decodes the next line into v, waiting at most idle.
func (c *lineConn) read(v any, idle time.Duration) error {
	_ = c.s.SetReadDeadline(time.Now().Add(idle))
	var line []byte
	for {
		part, err := c.r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxSessionLine {
			return errLineTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		break
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad message: %w", err)
	}
	return nil
}

// write sends v as one line.
func (c *lineConn) write(v any) error {
	bz, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.writeRaw(append(bz, '\n'))
}

// writeRaw sends whole lines.
func (c *lineConn) writeRaw(lines []byte) error {
	_ = c.s.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err := c.s.Write(lines)
	return err
}

// charge is n_in × priceIn + n_out × priceOut.
// A price may be nil where its count is zero.
func charge(nIn, nOut uint64, priceIn, priceOut *uint256.Int) *uint256.Int {
	a := new(uint256.Int)
	if nIn > 0 {
		a.Mul(uint256.NewInt(nIn), priceIn)
	}
	if nOut > 0 {
		a.Add(a, new(uint256.Int).Mul(uint256.NewInt(nOut), priceOut))
	}
	return a
}

// addCharge is base + charge(nIn, nOut, ...).
func addCharge(base *uint256.Int, nIn, nOut uint64, priceIn, priceOut *uint256.Int) *uint256.Int {
	return new(uint256.Int).Add(base, charge(nIn, nOut, priceIn, priceOut))
}

// checkVoucher checks what every voucher of a lane must be: for this
// chain, session and provider, signed (low S) by the session's client, and
// at most the lane's budget (the chain pays no more: a voucher above it is
// a client's mistake or a trap, S7).
func checkVoucher(v *session.Voucher, sig []byte, chainID string, sessionID uint64, provider, client types.Address, budget *uint256.Int) error {
	switch {
	case v == nil:
		return errors.New("no voucher")
	case v.ChainID != chainID:
		return fmt.Errorf("the voucher is for chain %q, this is %q", v.ChainID, chainID)
	case v.Session != sessionID:
		return fmt.Errorf("the voucher is for session %d, this lane is session %d's", v.Session, sessionID)
	case v.Provider != provider:
		return fmt.Errorf("the voucher pays %s, this lane is %s's", v.Provider, provider)
	case v.Cumulative == nil:
		return errors.New("the voucher has no cumulative amount")
	case v.Cumulative.Gt(budget):
		return fmt.Errorf("the voucher's cumulative %s is above the lane's budget %s: the chain would pay at most the budget", types.FormatAmount(v.Cumulative), types.FormatAmount(budget))
	}
	signer, err := session.Signer(v.Hash(), sig)
	if err != nil {
		return fmt.Errorf("voucher signature: %w", err)
	}
	if signer != client {
		return fmt.Errorf("the voucher is signed by %s, not by the session's client %s", signer, client)
	}
	return nil
}

// tokenPipe writes a request's token lines from a goroutine of its own,
// so that the provider's decode loop never waits on the network: what
// queued while a write was under way, or within sessionTokenFlush of the
// last write, goes out in one Write. The lines are
// those of write, in order; close waits for the last of them.
type tokenPipe struct {
	c       *lineConn
	q       chan providerMsg
	closing chan struct{} // closed by close: no more lines will come
	done    chan struct{}
	mu      sync.Mutex
	err     error
}

func newTokenPipe(c *lineConn, depth int) *tokenPipe {
	p := &tokenPipe{c: c, q: make(chan providerMsg, depth), closing: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// failed is the first write error, if any.
func (p *tokenPipe) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// send queues m (waiting only while the queue is full) or returns the
// error that stopped the writes.
func (p *tokenPipe) send(m providerMsg) error {
	if err := p.failed(); err != nil {
		return err
	}
	p.q <- m
	return nil
}

// close sends what is queued and returns the first write error.
func (p *tokenPipe) close() error {
	close(p.closing)
	close(p.q)
	<-p.done
	return p.failed()
}

func (p *tokenPipe) run() {
	defer close(p.done)
	var buf []byte
	for m := range p.q {
		if p.failed() != nil {
			continue // drain: the stream is broken
		}
		buf = buf[:0]
		for {
			bz, err := json.Marshal(m)
			if err != nil {
				p.fail(err)
				break
			}
			buf = append(append(buf, bz...), '\n')
			if len(p.q) == 0 || len(buf) >= 32<<10 {
				break
			}
			m = <-p.q
		}
		if p.failed() == nil {
			if err := p.c.writeRaw(buf); err != nil {
				p.fail(err)
			}
		}
		// The next lines wait out the flush interval, unless the answer
		// is complete: the last lines go at once.
		t := time.NewTimer(sessionTokenFlush)
		select {
		case <-t.C:
		case <-p.closing:
		}
		t.Stop()
	}
}

func (p *tokenPipe) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}
