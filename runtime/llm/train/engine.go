package train

/*
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// llama.cpp and ggml symbols declared without their headers, as runtime/llm
// does: linked from github.com/ollama/ollama/llama's objects, structs
// mirrored from ollama v0.9.6 and checked (checkMirrors) before use.

struct llama_model;
struct llama_context;
struct ggml_tensor;
struct ggml_opt_dataset;
struct ggml_opt_result;

// struct llama_context_params (120 bytes).
struct tr_cparams {
	uint32_t n_ctx, n_batch, n_ubatch, n_seq_max;
	int32_t  n_threads, n_threads_batch;
	int      rope_scaling_type, pooling_type, attention_type;
	float    rope_freq_base, rope_freq_scale, yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
	uint32_t yarn_orig_ctx;
	float    defrag_thold;
	void *   cb_eval;
	void *   cb_eval_user_data;
	int      type_k, type_v;
	void *   abort_callback;
	void *   abort_callback_data;
	bool     embeddings, offload_kqv, flash_attn, no_perf, op_offload;
};

// struct llama_batch.
struct tr_batch {
	int32_t    n_tokens;
	int32_t *  token;
	float *    embd;
	int32_t *  pos;
	int32_t *  n_seq_id;
	int32_t ** seq_id;
	int8_t *   logits;
};

// struct ggml_opt_optimizer_params (AdamW only in v0.9.6).
struct tr_optp { float alpha, beta1, beta2, eps, wd; };

typedef bool (*tr_filter_fn)(const struct ggml_tensor * t, void * ud);
typedef struct tr_optp (*tr_getopt_fn)(void * ud);

// struct llama_opt_params (40 bytes).
struct tr_oparams {
	uint32_t     n_ctx_train;
	tr_filter_fn param_filter;
	void *       param_filter_ud;
	tr_getopt_fn get_opt_pars;
	void *       get_opt_pars_ud;
};

// The head of struct ggml_tensor.
struct tr_thead {
	int     type;
	void *  buffer;
	int64_t ne[4];
	size_t  nb[4];
};

struct tr_cparams llama_context_default_params(void);
struct llama_context * llama_init_from_model(struct llama_model * model, struct tr_cparams params);
void     llama_free(struct llama_context * ctx);
uint32_t llama_n_ctx(const struct llama_context * ctx);
uint32_t llama_n_batch(const struct llama_context * ctx);
uint32_t llama_n_ubatch(const struct llama_context * ctx);
struct tr_batch llama_batch_get_one(int32_t * tokens, int32_t n_tokens);
int32_t  llama_decode(struct llama_context * ctx, struct tr_batch batch);
void     llama_opt_init(struct llama_context * ctx, struct llama_model * model, struct tr_oparams p);
void     llama_opt_epoch(struct llama_context * ctx, struct ggml_opt_dataset * ds, struct ggml_opt_result * rtrain,
                         struct ggml_opt_result * reval, int64_t idata_split, void * cb_train, void * cb_eval);

struct ggml_opt_dataset * ggml_opt_dataset_init(int type_data, int type_label, int64_t ne_datapoint, int64_t ne_label, int64_t ndata, int64_t ndata_shard);
void     ggml_opt_dataset_free(struct ggml_opt_dataset * ds);
struct ggml_tensor * ggml_opt_dataset_data(struct ggml_opt_dataset * ds);
struct ggml_tensor * ggml_opt_dataset_labels(struct ggml_opt_dataset * ds);
struct ggml_opt_result * ggml_opt_result_init(void);
void     ggml_opt_result_free(struct ggml_opt_result * r);
void     ggml_opt_result_loss(struct ggml_opt_result * r, double * loss, double * unc);
void     ggml_opt_result_ndata(struct ggml_opt_result * r, int64_t * ndata);

const char * ggml_get_name(const struct ggml_tensor * t);
size_t   ggml_nbytes(const struct ggml_tensor * t);
int64_t  ggml_nelements(const struct ggml_tensor * t);
int64_t  ggml_nrows(const struct ggml_tensor * t);
bool     ggml_is_contiguous(const struct ggml_tensor * t);
void     ggml_backend_tensor_get(const struct ggml_tensor * t, void * data, size_t offset, size_t size);
void     ggml_backend_tensor_set(struct ggml_tensor * t, const void * data, size_t offset, size_t size);

#define TR_GGML_TYPE_I32 26
#define TR_MAX 8

// Training state in C memory (no Go pointers in C, no Go callbacks):
// the names to train, the tensors the filter saw, the optimizer parameters.
struct tr_state {
	int  nwant;
	char want[TR_MAX][64];
	int  n;
	struct ggml_tensor * got[TR_MAX];
	struct tr_optp opt;
	struct tr_cparams cp;
	struct llama_context * ctx;
	struct ggml_opt_dataset * ds;
};

static bool tr_filter(const struct ggml_tensor * t, void * ud) {
	struct tr_state * s = ud;
	const char * name = ggml_get_name(t);
	for (int i = 0; i < s->nwant; i++) {
		if (strcmp(name, s->want[i]) == 0) {
			for (int j = 0; j < s->n; j++) {
				if (s->got[j] == t) return true;
			}
			if (s->n < TR_MAX) s->got[s->n++] = (struct ggml_tensor *) t;
			return true;
		}
	}
	return false;
}

static struct tr_optp tr_get_opt(void * ud) { return ((struct tr_state *) ud)->opt; }

static struct tr_state * tr_new(void) { return calloc(1, sizeof(struct tr_state)); }

static void tr_want(struct tr_state * s, const char * name) {
	if (s->nwant < TR_MAX) {
		strncpy(s->want[s->nwant], name, 63);
		s->nwant++;
	}
}

// tr_begin creates a fresh context on model m, decodes the first token
// (so that training runs with cp's threads; the KV cache is cleared before
// training), fills a dataset of ndata datapoints of n_ctx tokens
// (datapoint i is tokens[i*(n_ctx+1) .. i*(n_ctx+1)+n_ctx], inputs then
// labels shifted by one) and runs
// llama_opt_init, which calls the filter on every F32 tensor. Returns 0, or
// -1 no context, -2 wrong n_ctx, -3 decode failed, -4 no dataset.
static int tr_begin(struct tr_state * s, struct llama_model * m, const int32_t * tokens, int64_t ndata) {
	uint32_t n_ctx = s->cp.n_ctx;
	s->ctx = llama_init_from_model(m, s->cp);
	if (!s->ctx) return -1;
	if (llama_n_ctx(s->ctx) != n_ctx || llama_n_batch(s->ctx) != n_ctx || llama_n_ubatch(s->ctx) != n_ctx) return -2;
	int32_t t = tokens[0];
	if (llama_decode(s->ctx, llama_batch_get_one(&t, 1)) != 0) return -3;
	s->ds = ggml_opt_dataset_init(TR_GGML_TYPE_I32, TR_GGML_TYPE_I32, n_ctx, n_ctx, ndata, 1);
	if (!s->ds) return -4;
	for (int64_t i = 0; i < ndata; i++) {
		const int32_t * dp = tokens + i * (int64_t)(n_ctx + 1);
		ggml_backend_tensor_set(ggml_opt_dataset_data(s->ds), dp, i * n_ctx * 4, n_ctx * 4);
		ggml_backend_tensor_set(ggml_opt_dataset_labels(s->ds), dp + 1, i * n_ctx * 4, n_ctx * 4);
	}
	s->n = 0;
	struct tr_oparams op = { n_ctx, tr_filter, s, tr_get_opt, s };
	llama_opt_init(s->ctx, m, op);
	return 0;
}

// tr_run runs one llama_opt_epoch over the dataset: the first split
// datapoints train (one optimizer step each), the rest are evaluated.
// It returns the mean loss of the trained part if split > 0, else of the
// evaluated part.
static double tr_run(struct tr_state * s, int64_t split) {
	struct ggml_opt_result * rt = ggml_opt_result_init();
	struct ggml_opt_result * re = ggml_opt_result_init();
	llama_opt_epoch(s->ctx, s->ds, rt, re, split, NULL, NULL);
	double loss = 0, unc = 0;
	ggml_opt_result_loss(split > 0 ? rt : re, &loss, &unc);
	ggml_opt_result_free(rt);
	ggml_opt_result_free(re);
	return loss;
}

static void tr_end(struct tr_state * s) {
	if (s->ds) ggml_opt_dataset_free(s->ds);
	if (s->ctx) llama_free(s->ctx);
	s->ds = NULL;
	s->ctx = NULL;
}

static struct ggml_tensor * tr_got(struct tr_state * s, int i) { return s->got[i]; }
static struct tr_thead * tr_head(struct ggml_tensor * t) { return (struct tr_thead *) t; }
static void tr_abort(void) { abort(); }
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"unsafe"

	"github.com/ollama/ollama/llama"

	"github.com/ogpu-network/ogpu/runtime/llm"
)

// cTokens are tokens in C's type, datapoint after datapoint (n_ctx+1 each).
type cTokens = []C.int32_t

// engine is a model loaded for training (in the worker process only).
type engine struct {
	p      Params
	lm     *llama.Model
	m      *C.struct_llama_model
	st     *C.struct_tr_state
	names  []string // trained tensors, by name
	shapes []llm.TensorInfo
	nVocab int
}

// modelPtr returns the llama_model behind lm; llama.Model is
// struct{ c *C.struct_llama_model } in ollama v0.9.6 (checked by
// checkMirrors).
func modelPtr(lm *llama.Model) *C.struct_llama_model {
	return *(**C.struct_llama_model)(unsafe.Pointer(lm))
}

// checkMirrors verifies the struct mirrors against this build: the sizes
// measured for v0.9.6, llama.Model's layout, and llama_context_params'
// default values read back through the mirror.
func checkMirrors() error {
	const pin = "runtime/llm/train is pinned to ollama v0.9.6"
	t := reflect.TypeFor[llama.Model]()
	if t.NumField() == 0 || t.Field(0).Name != "c" || t.Field(0).Offset != 0 || t.Field(0).Type.Kind() != reflect.Pointer {
		return errors.New("llama.Model no longer starts with the C pointer c; " + pin)
	}
	if s := reflect.TypeFor[llama.ContextParams]().Size(); s != C.sizeof_struct_tr_cparams || C.sizeof_struct_tr_cparams != 120 {
		return fmt.Errorf("llama_context_params is %d bytes, the mirror %d; %s", s, C.sizeof_struct_tr_cparams, pin)
	}
	if C.sizeof_struct_tr_oparams != 40 || C.sizeof_struct_tr_optp != 20 || C.sizeof_struct_tr_batch != 56 {
		return errors.New("the llama_opt_params, ggml_opt_optimizer_params or llama_batch mirror has the wrong size; " + pin)
	}
	d := C.llama_context_default_params()
	ok := d.n_ctx == 512 && d.n_batch == 2048 && d.n_ubatch == 512 && d.n_seq_max == 1 &&
		d.n_threads == 4 && d.n_threads_batch == 4 && d.yarn_ext_factor == -1 && d.yarn_attn_factor == 1 &&
		d.yarn_beta_fast == 32 && d.yarn_beta_slow == 1 && d.defrag_thold == -1 &&
		d.cb_eval == nil && d.cb_eval_user_data == nil && d.abort_callback == nil && d.abort_callback_data == nil &&
		d.type_k == 1 && d.type_v == 1 && !bool(d.embeddings) && bool(d.offload_kqv) && !bool(d.flash_attn) &&
		bool(d.no_perf) && bool(d.op_offload)
	if !ok {
		return errors.New("llama_context_default_params does not read back through the mirror; " + pin)
	}
	var tok [2]C.int32_t
	b := C.llama_batch_get_one(&tok[0], 2)
	if b.n_tokens != 2 || b.token != &tok[0] || b.embd != nil || b.pos != nil || b.n_seq_id != nil || b.seq_id != nil || b.logits != nil {
		return errors.New("llama_batch_get_one does not read back through the mirror; " + pin)
	}
	return nil
}

// open loads p.Model for training: without mmap (the optimizer writes the
// weights), CPU only.
func open(p Params) (*engine, error) {
	names, err := TrainedTensors(p.Trainable)
	if err != nil {
		return nil, err
	}
	ts, err := llm.ListTensors(p.Model)
	if err != nil {
		return nil, fmt.Errorf("cannot read the base model: %w", err)
	}
	if err := checkTensors(ts, names); err != nil {
		return nil, err
	}
	if err := llm.InitBackend(); err != nil {
		return nil, err
	}
	if err := checkMirrors(); err != nil {
		return nil, err
	}
	lm, err := llama.LoadModelFromFile(p.Model, llama.ModelParams{UseMmap: false})
	if err != nil {
		return nil, fmt.Errorf("cannot load the base model %s: %w", p.Model, err)
	}
	e := &engine{p: p, lm: lm, m: modelPtr(lm), names: names, nVocab: lm.NumVocab(), st: C.tr_new()}
	if e.st == nil {
		e.close()
		return nil, errors.New("out of memory")
	}
	for _, n := range names {
		i := slices.IndexFunc(ts, func(t llm.TensorInfo) bool { return t.Name == n })
		e.shapes = append(e.shapes, ts[i])
		cs := C.CString(n)
		C.tr_want(e.st, cs)
		C.free(unsafe.Pointer(cs))
	}
	cp := C.llama_context_default_params()
	n := C.uint32_t(p.NCtx)
	cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n, n, n, 1
	cp.n_threads, cp.n_threads_batch = C.int32_t(p.Threads), C.int32_t(p.Threads)
	cp.type_k, cp.type_v = 0, 0 // GGML_TYPE_F32: OUT_PROD has no F16 backward
	cp.flash_attn, cp.embeddings = false, false
	// CPU only: no KV cache or host-weight operation on a GPU backend (GPU
	// training classes stay off until validators reproduce them).
	cp.offload_kqv, cp.op_offload = false, false
	e.st.cp = cp
	e.st.opt = C.struct_tr_optp{alpha: C.float(p.LR()), beta1: adamBeta1, beta2: adamBeta2, eps: adamEps, wd: 0}
	return e, nil
}

func (e *engine) close() {
	if e.st != nil {
		C.tr_end(e.st)
		C.free(unsafe.Pointer(e.st))
		e.st = nil
	}
	if e.lm != nil {
		llama.FreeModel(e.lm)
		e.lm = nil
	}
}

// tokenize turns the dataset into tokens and checks them against the
// vocabulary before any reaches C as a label.
func (e *engine) tokenize() ([]int32, error) {
	toks, err := e.lm.Tokenize(string(e.p.Data), true, false)
	if err != nil {
		return nil, fmt.Errorf("cannot tokenize the dataset: %w", err)
	}
	out := make([]int32, len(toks))
	for i, t := range toks {
		if t < 0 || t >= e.nVocab {
			return nil, badInput("token %d at %d is outside the vocabulary of %d", t, i, e.nVocab)
		}
		out[i] = int32(t)
	}
	return out, nil
}

// datapoints copies datapoints idx (each n_ctx+1 tokens from i·stride).
func (e *engine) datapoints(toks []int32, idx []int) []C.int32_t {
	n1 := e.p.NCtx + 1
	out := make([]C.int32_t, 0, len(idx)*n1)
	for _, i := range idx {
		for _, t := range toks[i*e.p.Stride : i*e.p.Stride+n1] {
			out = append(out, C.int32_t(t))
		}
	}
	return out
}

// begin opens a fresh context over dps (n datapoints) and checks that the
// filter selected exactly the trained tensors.
func (e *engine) begin(dps []C.int32_t, n int) error {
	switch rc := C.tr_begin(e.st, e.m, &dps[0], C.int64_t(n)); rc {
	case 0:
	case -1:
		return errors.New("llama.cpp could not create a training context")
	case -2:
		return fmt.Errorf("llama.cpp made a context of n_ctx %d, n_batch %d, n_ubatch %d; training needs all three %d", C.llama_n_ctx(e.st.ctx), C.llama_n_batch(e.st.ctx), C.llama_n_ubatch(e.st.ctx), e.p.NCtx)
	case -3:
		return errors.New("llama.cpp failed the warm-up decode of the training context")
	default:
		return errors.New("llama.cpp could not allocate the training dataset")
	}
	if int(e.st.n) != len(e.names) {
		return fmt.Errorf("llama_opt_init offered %d of the %d tensors to train", e.st.n, len(e.names))
	}
	return nil
}

func (e *engine) end() { C.tr_end(e.st) }

// tensors copies the trained tensors out of the model, in name order,
// checking each against the base model's shape.
func (e *engine) tensors() ([]Tensor, error) {
	out := make([]Tensor, 0, len(e.names))
	for _, info := range e.shapes {
		var t *C.struct_ggml_tensor
		for i := range int(e.st.n) {
			g := C.tr_got(e.st, C.int(i))
			if C.GoString(C.ggml_get_name(g)) == info.Name {
				t = g
			}
		}
		if t == nil {
			return nil, fmt.Errorf("llama.cpp did not offer tensor %s for training", info.Name)
		}
		h := C.tr_head(t)
		nb := uint64(C.ggml_nbytes(t))
		ne := []uint64{uint64(h.ne[0]), uint64(h.ne[1]), uint64(h.ne[2]), uint64(h.ne[3])}
		want := []uint64{1, 1, 1, 1}
		copy(want, info.Dims)
		if h._type != 0 || !slices.Equal(ne, want) || nb != info.Size || uint64(C.ggml_nelements(t))*4 != nb || !bool(C.ggml_is_contiguous(t)) {
			return nil, fmt.Errorf("llama.cpp's %s (type %d, shape %v, %d bytes) does not match the model file's (F32 %v, %d bytes); runtime/llm/train is pinned to ollama v0.9.6", info.Name, h._type, ne, nb, info.Dims, info.Size)
		}
		data := make([]byte, nb)
		C.ggml_backend_tensor_get(t, unsafe.Pointer(&data[0]), 0, C.size_t(nb))
		out = append(out, Tensor{Name: info.Name, Type: 0, Dims: slices.Clone(info.Dims), Data: data})
	}
	return out, nil
}

// set writes ts (a checkpoint's trained tensors) into the model.
func (e *engine) set(ts []Tensor) error {
	cur, err := e.tensors()
	if err != nil {
		return err
	}
	for _, c := range cur {
		i := slices.IndexFunc(ts, func(t Tensor) bool { return t.Name == c.Name })
		if i < 0 {
			return fmt.Errorf("the checkpoint has no tensor %s", c.Name)
		}
		t := ts[i]
		if t.Type != c.Type || !slices.Equal(t.Dims, c.Dims) || len(t.Data) != len(c.Data) {
			return fmt.Errorf("the checkpoint's %s (type %d, shape %v) does not match the base model's (type %d, shape %v)", t.Name, t.Type, t.Dims, c.Type, c.Dims)
		}
		for j := range int(e.st.n) {
			g := C.tr_got(e.st, C.int(j))
			if C.GoString(C.ggml_get_name(g)) == t.Name {
				C.ggml_backend_tensor_set(g, unsafe.Pointer(&t.Data[0]), 0, C.size_t(len(t.Data)))
			}
		}
	}
	return nil
}

// hash is the checkpoint hash of the model's trained tensors now.
func (e *engine) hash() (Hash, error) {
	ts, err := e.tensors()
	if err != nil {
		return Hash{}, err
	}
	return HashTensors(ts)
}

// checkTokens converts the n_ctx+1 tokens of one datapoint, checking each
// against the vocabulary before it reaches C (a label >= n_vocab is a
// GGML_ASSERT).
func (e *engine) checkTokens(toks []int32) ([]C.int32_t, error) {
	if len(toks) != e.p.NCtx+1 {
		return nil, badInput("a datapoint is n_ctx+1 = %d tokens, got %d", e.p.NCtx+1, len(toks))
	}
	out := make([]C.int32_t, len(toks))
	for i, t := range toks {
		if t < 0 || int(t) >= e.nVocab {
			return nil, badInput("token %d at %d of the datapoint is outside the vocabulary of %d", t, i, e.nVocab)
		}
		out[i] = C.int32_t(t)
	}
	return out, nil
}

// step trains one datapoint (n_ctx+1 tokens) in a fresh context and
// returns its loss (before the update).
func (e *engine) step(dp []C.int32_t) (float64, error) {
	if err := e.begin(dp, 1); err != nil {
		e.end()
		return 0, err
	}
	loss := float64(C.tr_run(e.st, 1))
	e.end()
	return loss, nil
}

// eval is the mean loss over datapoints dps (n of them), weights unchanged.
func (e *engine) eval(dps []C.int32_t, n int) (float64, error) {
	if err := e.begin(dps, n); err != nil {
		e.end()
		return 0, err
	}
	loss := float64(C.tr_run(e.st, 0))
	e.end()
	return loss, nil
}

// capture runs llama_opt_init once on a throwaway context over datapoint
// dp so that the filter finds the trained tensors before the first step.
func (e *engine) capture(dp cTokens) error {
	err := e.begin(dp, 1)
	e.end()
	return err
}

// crash ends the process the way a failed GGML_ASSERT does (test hook).
func crash() { C.tr_abort() }
