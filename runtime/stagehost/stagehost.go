// Package stagehost runs a split-inference stage (llm.Stage) in a child
// process and supervises it. llama.cpp reports some failures by calling
// abort() (GGML_ASSERT, GGML_ABORT) and a bad kernel can fault; in-process
// either would take the whole provider down — its chain client, its other
// jobs, its stake's liveness — without a word. Out of process, the provider
// sees a clear error ("stage worker for X died: signal: aborted" with the
// worker's last log lines), starts a fresh worker, and the session is
// replayed from its stored input transcript, which is exact because stages
// are deterministic.
//
// The child is the same executable started with OGPU_STAGE_WORKER=1 (the
// re-exec pattern): every main that may host stages calls MaybeServe first.
// Parent and child speak little-endian binary over the child's stdin and
// stdout: a request is op u8 | pos0 u32 | n u32 | count u32 | payload
// (count int32 tokens or f32 floats), a reply is status u8 | token i32 |
// count u32 | count f32 (or, on error, count bytes of message).
package stagehost

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/ogpu-network/ogpu/internal/workerlog"
	"github.com/ogpu-network/ogpu/runtime/llm"
)

// Env is the variable that turns a process into a stage worker.
const Env = "OGPU_STAGE_WORKER"

const (
	opForward byte = 1
	opReset   byte = 2

	statusOK    byte = 0
	statusError byte = 1
)

// maxFloats bounds one request or reply: 64 Mi floats (256 MiB).
const maxFloats = 64 << 20

// Config says what a worker loads.
type Config struct {
	Slice   string      // GGUF slice (or whole model) file
	Options llm.Options // threads, batch and context: part of the class
	// Exe is the executable to start (default: this one, os.Executable).
	// It must call MaybeServe at start.
	Exe string
}

// Info is what the worker reports once its stage is loaded.
type Info struct {
	From, To, Of int
	NEmbd        int
	NVocab       int
	Class        string // with the greedy sampler
}

// First and Last say the stage's role.
func (i Info) First() bool { return i.From == 0 }
func (i Info) Last() bool  { return i.To == i.Of }

// ErrWorkerDied is returned when the worker process ended during a call.
var ErrWorkerDied = errors.New("stage worker died")

// Worker is a supervised stage process with one session. Calls are
// serialized. After the process dies every call fails with ErrWorkerDied
// until Restart (or Reset, which restarts a dead worker).
type Worker struct {
	cfg Config

	mu       sync.Mutex
	cmd      *exec.Cmd
	in       *bufio.Writer
	inClose  io.Closer
	out      *bufio.Reader
	logs     *workerlog.Tail
	done     chan struct{} // closed when the process exited
	waitErr  error
	info     Info
	dead     error // why the current process is unusable, or nil
	restarts int
}

// Start starts a worker and waits until its stage is loaded.
func Start(cfg Config) (*Worker, error) {
	if cfg.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cannot find this executable to start a stage worker: %w", err)
		}
		cfg.Exe = exe
	}
	w := &Worker{cfg: cfg}
	if err := w.start(); err != nil {
		return nil, err
	}
	return w, nil
}

// start launches the process; w.mu is held or w is new.
func (w *Worker) start() error {
	o := w.cfg.Options
	cmd := exec.Command(w.cfg.Exe)
	cmd.Env = append(os.Environ(), Env+"=1",
		"OGPU_STAGE_SLICE="+w.cfg.Slice,
		"OGPU_STAGE_THREADS="+strconv.Itoa(o.Threads),
		"OGPU_STAGE_BATCH="+strconv.Itoa(o.BatchSize),
		"OGPU_STAGE_CONTEXT="+strconv.Itoa(o.ContextSize))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	w.logs = &workerlog.Tail{Max: 64 << 10}
	cmd.Stderr = w.logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cannot start a stage worker (%s): %w", w.cfg.Exe, err)
	}
	w.cmd, w.in, w.inClose, w.out, w.dead = cmd, bufio.NewWriter(stdin), stdin, bufio.NewReaderSize(stdout, 1<<16), nil
	done := make(chan struct{})
	w.done = done
	go func() {
		err := cmd.Wait()
		w.waitErr = err
		close(done)
	}()
	// The first reply is the stage's Info, or why it did not load.
	st, tok, payload, err := w.readReply()
	if err != nil {
		return w.died(err)
	}
	if st != statusOK {
		w.kill()
		return fmt.Errorf("stage worker for %s: %s", w.cfg.Slice, payload)
	}
	_ = tok
	f := strings.Fields(string(payload))
	if len(f) != 6 {
		w.kill()
		return fmt.Errorf("stage worker for %s sent a malformed hello %q", w.cfg.Slice, payload)
	}
	n := make([]int, 5)
	for i := range n {
		if n[i], err = strconv.Atoi(f[i]); err != nil {
			w.kill()
			return fmt.Errorf("stage worker for %s sent a malformed hello %q", w.cfg.Slice, payload)
		}
	}
	w.info = Info{From: n[0], To: n[1], Of: n[2], NEmbd: n[3], NVocab: n[4], Class: f[5]}
	return nil
}

// Info describes the loaded stage.
func (w *Worker) Info() Info {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.info
}

// Restarts counts the worker processes started after the first.
func (w *Worker) Restarts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.restarts
}

// Pid is the current worker process id (for tests and logs).
func (w *Worker) Pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cmd.Process.Pid
}

// died marks the process unusable and returns an error that says how it
// ended, with its last log lines.
func (w *Worker) died(cause error) error {
	w.kill()
	<-w.done
	how := "exited"
	if w.waitErr != nil {
		how = w.waitErr.Error()
	}
	w.dead = fmt.Errorf("%w: worker for %s %s (%v); its last log lines: %s", ErrWorkerDied, w.cfg.Slice, how, cause, w.logs.String())
	return w.dead
}

func (w *Worker) kill() {
	if w.cmd != nil && w.cmd.Process != nil {
		w.cmd.Process.Kill()
	}
	if w.inClose != nil {
		w.inClose.Close()
	}
}

// Forward runs positions pos0.. through the stage (llm.Session.Forward).
// If the worker dies, it returns ErrWorkerDied; the session is lost and
// must be replayed after Reset.
func (w *Worker) Forward(pos0 int, tokens []int, rows []float32) (*llm.StageOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead != nil {
		return nil, w.dead
	}
	if len(tokens) > maxFloats || len(rows) > maxFloats {
		return nil, fmt.Errorf("%d tokens or %d floats exceed one request (%d)", len(tokens), len(rows), maxFloats)
	}
	var hdr [13]byte
	hdr[0] = opForward
	binary.LittleEndian.PutUint32(hdr[1:], uint32(pos0))
	var payload []byte
	if tokens != nil {
		binary.LittleEndian.PutUint32(hdr[5:], uint32(len(tokens)))
		binary.LittleEndian.PutUint32(hdr[9:], uint32(len(tokens)))
		payload = make([]byte, 4*len(tokens))
		for i, t := range tokens {
			binary.LittleEndian.PutUint32(payload[4*i:], uint32(int32(t)))
		}
	} else {
		binary.LittleEndian.PutUint32(hdr[5:], 0)
		binary.LittleEndian.PutUint32(hdr[9:], uint32(len(rows)))
		payload = make([]byte, 4*len(rows))
		for i, x := range rows {
			binary.LittleEndian.PutUint32(payload[4*i:], math.Float32bits(x))
		}
	}
	w.in.Write(hdr[:])
	w.in.Write(payload)
	if err := w.in.Flush(); err != nil {
		return nil, w.died(err)
	}
	st, tok, body, err := w.readReply()
	if err != nil {
		return nil, w.died(err)
	}
	if st != statusOK {
		return nil, errors.New(string(body))
	}
	out := &llm.StageOutput{Token: int(tok)}
	if !w.info.Last() {
		out.Rows = make([]float32, len(body)/4)
		for i := range out.Rows {
			out.Rows[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
		}
	}
	return out, nil
}

// Reset starts a new session at position 0; a dead worker is restarted.
func (w *Worker) Reset() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead != nil {
		w.restarts++
		return w.start()
	}
	w.in.Write([]byte{opReset, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	if err := w.in.Flush(); err != nil {
		return w.died(err)
	}
	st, _, body, err := w.readReply()
	if err != nil {
		return w.died(err)
	}
	if st != statusOK {
		return errors.New(string(body))
	}
	return nil
}

// Close stops the worker.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead == nil {
		w.inClose.Close() // the worker exits at EOF
		<-w.done
		w.dead = errors.New("stage worker closed")
	}
	return nil
}

// readReply reads one reply: status, token, payload.
func (w *Worker) readReply() (byte, int32, []byte, error) {
	var hdr [9]byte
	if _, err := io.ReadFull(w.out, hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[5:])
	if n > 4*maxFloats {
		return 0, 0, nil, fmt.Errorf("reply of %d bytes is too large", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(w.out, body); err != nil {
		return 0, 0, nil, err
	}
	return hdr[0], int32(binary.LittleEndian.Uint32(hdr[1:])), body, nil
}

// MaybeServe makes this process a stage worker when Env is set: it loads
// the stage, serves requests on stdin/stdout until EOF, and exits. Call it
// first in main (and in TestMain of packages that start workers).
func MaybeServe() {
	if os.Getenv(Env) != "1" {
		return
	}
	os.Exit(serve(os.Stdin, os.Stdout))
}

func serve(stdin io.Reader, stdout io.Writer) int {
	in := bufio.NewReaderSize(stdin, 1<<16)
	out := bufio.NewWriter(stdout)
	reply := func(st byte, tok int32, body []byte) bool {
		var hdr [9]byte
		hdr[0] = st
		binary.LittleEndian.PutUint32(hdr[1:], uint32(tok))
		binary.LittleEndian.PutUint32(hdr[5:], uint32(len(body)))
		out.Write(hdr[:])
		out.Write(body)
		return out.Flush() == nil
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(os.Getenv(k)); return n }
	o := llm.Options{Threads: atoi("OGPU_STAGE_THREADS"), BatchSize: atoi("OGPU_STAGE_BATCH"), ContextSize: atoi("OGPU_STAGE_CONTEXT")}
	st, err := llm.LoadStage(os.Getenv("OGPU_STAGE_SLICE"), o)
	if err != nil {
		reply(statusError, 0, []byte(err.Error()))
		return 1
	}
	defer st.Close()
	ss, err := st.NewSession()
	if err != nil {
		reply(statusError, 0, []byte(err.Error()))
		return 1
	}
	defer ss.Close()
	r := st.Range()
	if !reply(statusOK, 0, fmt.Appendf(nil, "%d %d %d %d %d %s", r.From, r.To, r.Of, st.NEmbd(), st.NumVocab(), st.Class(llm.Sampler{}))) {
		return 1
	}
	var hdr [13]byte
	for {
		if _, err := io.ReadFull(in, hdr[:]); err != nil {
			return 0 // the supervisor closed stdin
		}
		switch hdr[0] {
		case opReset:
			ss.Reset()
			if !reply(statusOK, 0, nil) {
				return 1
			}
			continue
		case opForward:
		default:
			reply(statusError, 0, fmt.Appendf(nil, "unknown op %d", hdr[0]))
			return 1
		}
		pos0 := int(binary.LittleEndian.Uint32(hdr[1:]))
		ntok, count := binary.LittleEndian.Uint32(hdr[5:]), binary.LittleEndian.Uint32(hdr[9:])
		if count > maxFloats {
			reply(statusError, 0, fmt.Appendf(nil, "request of %d values is too large", count))
			return 1
		}
		body := make([]byte, 4*count)
		if _, err := io.ReadFull(in, body); err != nil {
			return 1
		}
		var res *llm.StageOutput
		if ntok > 0 {
			toks := make([]int, count)
			for i := range toks {
				toks[i] = int(int32(binary.LittleEndian.Uint32(body[4*i:])))
			}
			res, err = ss.Forward(pos0, toks, nil)
		} else {
			rows := make([]float32, count)
			for i := range rows {
				rows[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
			}
			res, err = ss.Forward(pos0, nil, rows)
		}
		if err != nil {
			if !reply(statusError, 0, []byte(err.Error())) {
				return 1
			}
			continue
		}
		payload := make([]byte, 4*len(res.Rows))
		for i, x := range res.Rows {
			binary.LittleEndian.PutUint32(payload[4*i:], math.Float32bits(x))
		}
		if !reply(statusOK, int32(res.Token), payload) {
			return 1
		}
	}
}
