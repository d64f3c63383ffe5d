package llm

/*
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// What a non-final stage needs from llama.cpp and ggml beyond the ollama
// wrappers: the eval callback (cb_eval) of struct llama_context_params, to
// copy out the residual "l_out-<last layer>" and end the graph there.

struct ggml_tensor;
typedef bool (*ogpu_eval_cb)(struct ggml_tensor * t, bool ask, void * user_data);

// Mirror of struct llama_context_params (llama.h, ollama v0.9.6); checked
// against llama.ContextParams by size and by the values NewContextParams
// writes (checkParamsMirror) before any use.
struct ogpu_cparams {
	uint32_t n_ctx, n_batch, n_ubatch, n_seq_max;
	int32_t  n_threads, n_threads_batch;
	int      rope_scaling_type, pooling_type, attention_type;
	float    rope_freq_base, rope_freq_scale, yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
	uint32_t yarn_orig_ctx;
	float    defrag_thold;
	ogpu_eval_cb cb_eval;
	void *   cb_eval_user_data;
	int      type_k, type_v;
	void *   abort_callback;
	void *   abort_callback_data;
	bool     embeddings, offload_kqv, flash_attn, no_perf, op_offload;
};

const char * ggml_get_name(const struct ggml_tensor * t);
size_t  ggml_nbytes(const struct ggml_tensor * t);
int64_t ggml_nelements(const struct ggml_tensor * t);
int64_t ggml_nrows(const struct ggml_tensor * t);
bool    ggml_is_contiguous(const struct ggml_tensor * t);
void    ggml_backend_tensor_get(const struct ggml_tensor * t, void * data, size_t offset, size_t size);

// The capture lives in C memory: no Go pointers in C, no callbacks into Go.
struct ogpu_capture {
	char    name[64];
	float * buf;
	size_t  cap, len; // floats
	int64_t width;    // floats per row of the last capture
	int     calls, err;
};

static bool ogpu_capture_cb(struct ggml_tensor * t, bool ask, void * ud) {
	struct ogpu_capture * c = ud;
	if (ask) {
		return strcmp(ggml_get_name(t), c->name) == 0;
	}
	size_t nb = ggml_nbytes(t);
	int64_t ne = ggml_nelements(t), nr = ggml_nrows(t);
	if (nr <= 0) {
		c->err = 3; // no rows: the graph pruned them
		return true;
	}
	if ((size_t) ne * sizeof(float) != nb || !ggml_is_contiguous(t)) {
		c->err = 1; // not contiguous f32
		return true;
	}
	if (c->len + (size_t) ne > c->cap) {
		size_t cap = c->cap ? c->cap : 1024;
		while (cap < c->len + (size_t) ne) cap *= 2;
		float * b = realloc(c->buf, cap * sizeof(float));
		if (!b) { c->err = 2; return true; }
		c->buf = b;
		c->cap = cap;
	}
	ggml_backend_tensor_get(t, c->buf + c->len, 0, nb);
	c->len += (size_t) ne;
	c->width = ne / nr;
	c->calls++;
	return false; // the rest of the graph (output norm, head) is not needed
}

static struct ogpu_capture * ogpu_capture_new(const char * name) {
	struct ogpu_capture * c = calloc(1, sizeof *c);
	if (c) strncpy(c->name, name, sizeof c->name - 1);
	return c;
}

static void ogpu_capture_free(struct ogpu_capture * c) {
	if (c) { free(c->buf); free(c); }
}

static void ogpu_capture_reset(struct ogpu_capture * c) { c->len = 0; c->calls = 0; c->err = 0; c->width = 0; }

static void ogpu_set_capture(struct ogpu_cparams * p, struct ogpu_capture * c) {
	p->cb_eval = ogpu_capture_cb;
	p->cb_eval_user_data = c;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ollama/ollama/llama"
)

// capture copies one named tensor out of every graph evaluation.
type capture struct{ c *C.struct_ogpu_capture }

func newCapture(name string) (*capture, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	c := C.ogpu_capture_new(cs)
	if c == nil {
		return nil, errors.New("cannot allocate the residual capture")
	}
	return &capture{c: c}, nil
}

func (c *capture) free() {
	C.ogpu_capture_free(c.c)
	c.c = nil
}

func (c *capture) reset() { C.ogpu_capture_reset(c.c) }

// rows returns a copy of what was captured since the last reset, checking
// that it is rows×width floats.
func (c *capture) rows(rows, width int) ([]float32, error) {
	switch {
	case c.c.err == 1:
		return nil, fmt.Errorf("llama.cpp's %s is not a contiguous f32 tensor", C.GoString(&c.c.name[0]))
	case c.c.err == 3:
		return nil, fmt.Errorf("llama.cpp's %s has no rows: every row of a non-final stage must be an output", C.GoString(&c.c.name[0]))
	case c.c.err != 0:
		return nil, errors.New("out of memory capturing the residual")
	case c.c.calls == 0:
		return nil, fmt.Errorf("llama.cpp evaluated no tensor named %s; runtime/llm is pinned to ollama v0.9.6", C.GoString(&c.c.name[0]))
	case int(c.c.width) != width || int(c.c.len) != rows*width:
		return nil, fmt.Errorf("captured %d floats of width %d, want %d rows of %d", c.c.len, c.c.width, rows, width)
	}
	return append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(c.c.buf)), int(c.c.len))...), nil
}

// setCapture makes cp call c's callback; cp must have passed
// checkParamsMirror.
func setCapture(cp *llama.ContextParams, c *capture) {
	C.ogpu_set_capture((*C.struct_ogpu_cparams)(unsafe.Pointer(cp)), c.c)
}

// checkParamsMirror verifies that struct ogpu_cparams is the layout of
// llama.ContextParams: the same size, and the values NewContextParams wrote
// into cp (made with nCtx, nBatch, one sequence and threads) read back
// through it, on both sides of cb_eval.
func checkParamsMirror(cp *llama.ContextParams, nCtx, nBatch, threads int) error {
	t := reflect.TypeFor[llama.ContextParams]()
	if t.NumField() != 1 || t.Size() != C.sizeof_struct_ogpu_cparams {
		return fmt.Errorf("llama.ContextParams is %d bytes in %d fields, the mirror %d bytes; runtime/llm is pinned to ollama v0.9.6", t.Size(), t.NumField(), C.sizeof_struct_ogpu_cparams)
	}
	p := (*C.struct_ogpu_cparams)(unsafe.Pointer(cp))
	ok := p.n_ctx == C.uint32_t(nCtx) && p.n_batch == C.uint32_t(nBatch) && p.n_ubatch == 512 &&
		p.n_seq_max == 1 && p.n_threads == C.int32_t(threads) && p.n_threads_batch == C.int32_t(threads) &&
		p.defrag_thold == -1 && p.yarn_ext_factor == -1 && p.yarn_attn_factor == 1 &&
		p.yarn_beta_fast == 32 && p.yarn_beta_slow == 1 &&
		p.cb_eval == nil && p.cb_eval_user_data == nil && p.abort_callback == nil && p.abort_callback_data == nil &&
		p.type_k == 1 && p.type_v == 1 && // GGML_TYPE_F16
		bool(p.embeddings) && bool(p.offload_kqv) && !bool(p.flash_attn) && bool(p.no_perf) && bool(p.op_offload)
	if !ok {
		return errors.New("llama.ContextParams does not read back through the mirror struct ogpu_cparams; runtime/llm is pinned to ollama v0.9.6")
	}
	return nil
}
