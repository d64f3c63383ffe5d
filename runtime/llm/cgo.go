package llm

/*
#include <stdint.h>
#include <stddef.h>

// Declarations of llama.cpp and ggml functions that the ollama llama package
// does not wrap. The symbols are linked from that package's C objects; the
// structs stay opaque and enums are passed as int.
struct llama_context;
struct llama_model;
float * llama_get_logits_ith(struct llama_context * ctx, int32_t i);
const struct llama_model * llama_get_model(const struct llama_context * ctx);
uint32_t llama_n_ctx(const struct llama_context * ctx);
void llama_free(struct llama_context * ctx);
size_t ggml_backend_dev_count(void);
void * ggml_backend_dev_get(size_t index);
int ggml_backend_dev_type(void * device);
void * ggml_backend_dev_backend_reg(void * device);
const char * ggml_backend_reg_name(void * reg);
void * ggml_backend_reg_get_proc_address(void * reg, const char * name);

// struct ggml_backend_feature; a list of them ends with a NULL name.
struct ogpu_feature { const char * name; const char * value; };
typedef struct ogpu_feature * (*ogpu_get_features)(void * reg);
static struct ogpu_feature * ogpu_features(void * reg) {
	ogpu_get_features f = (ogpu_get_features)ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features");
	return f ? f(reg) : NULL;
}

typedef void (*ogpu_log_callback)(int level, const char * text, void * user_data);
void llama_log_set(ogpu_log_callback cb, void * user_data);
extern void ogpuLlamaLog(int level, char * text, void * user_data);
static void ogpu_set_log(void) { llama_log_set((ogpu_log_callback)ogpuLlamaLog, NULL); }
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/ollama/ollama/llama"
)

// ggml device types (GGML_BACKEND_DEVICE_TYPE_*).
const (
	ggmlDeviceCPU = 0
	ggmlDeviceGPU = 1
)

// setLogCallback routes llama.cpp's and ggml's log through ogpuLlamaLog.
func setLogCallback() { C.ogpu_set_log() }

// contextPtr returns the llama_context behind c.
//
// Pinned to github.com/ollama/ollama v0.9.6, where llama.Context is
//
//	type Context struct {
//		c          *C.struct_llama_context
//		numThreads int
//	}
//
// The layout is checked by reflection before the first use (checkContextLayout),
// and again against llama_get_model when a context is created (checkContext).
func contextPtr(c *llama.Context) *C.struct_llama_context {
	return *(**C.struct_llama_context)(unsafe.Pointer(c))
}

// modelPtr returns the llama_model behind m; llama.Model is
// struct{ c *C.struct_llama_model } in v0.9.6.
func modelPtr(m *llama.Model) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(m))
}

// checkContextLayout reports whether llama.Context and llama.Model still
// start with the C pointer that contextPtr and modelPtr read.
func checkContextLayout() error {
	for _, t := range []reflect.Type{reflect.TypeFor[llama.Context](), reflect.TypeFor[llama.Model]()} {
		if t.NumField() == 0 {
			return fmt.Errorf("llama.%s has no fields; runtime/llm is pinned to ollama v0.9.6", t.Name())
		}
		f := t.Field(0)
		if f.Name != "c" || f.Offset != 0 || f.Type.Kind() != reflect.Pointer {
			return fmt.Errorf("llama.%s no longer starts with the C pointer c (found %s %s); runtime/llm is pinned to ollama v0.9.6", t.Name(), f.Name, f.Type)
		}
	}
	return nil
}

// checkContext verifies that the pointer read out of lctx is the llama
// context of model m.
func checkContext(lctx *llama.Context, m *llama.Model) error {
	if err := checkContextLayout(); err != nil {
		return err
	}
	p := contextPtr(lctx)
	if p == nil || unsafe.Pointer(C.llama_get_model(p)) != modelPtr(m) {
		return errors.New("the llama context pointer does not belong to the model; runtime/llm is pinned to ollama v0.9.6")
	}
	return nil
}

// contextSize is llama_n_ctx: the context size llama.cpp allocated.
func contextSize(lctx *llama.Context) int { return int(C.llama_n_ctx(contextPtr(lctx))) }

// freeContext frees the llama context behind lctx.
func freeContext(lctx *llama.Context) { C.llama_free(contextPtr(lctx)) }

// logitsAt returns the logits computed for batch entry i of the last decode,
// valid until the next decode.
func logitsAt(lctx *llama.Context, i, nVocab int) ([]float32, error) {
	p := C.llama_get_logits_ith(contextPtr(lctx), C.int32_t(i))
	if p == nil {
		return nil, fmt.Errorf("llama.cpp returned no logits for batch entry %d", i)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), nVocab), nil
}

// gpuBackend returns the lower-case name of the first GPU backend that ggml
// registered ("cuda"), or "" when there is none.
func gpuBackend() string {
	for i := range C.ggml_backend_dev_count() {
		d := C.ggml_backend_dev_get(i)
		if C.ggml_backend_dev_type(d) == ggmlDeviceGPU {
			return strings.ToLower(C.GoString(C.ggml_backend_reg_name(C.ggml_backend_dev_backend_reg(d))))
		}
	}
	return ""
}

// cpuFeatures lists the instruction-set features the ggml CPU backend was
// compiled with, lower case and sorted ("avx2", "fma"), leaving out
// "llamafile" which every build has. They are compile-time choices (the
// stock cgo build of ollama v0.9.6 on amd64 has none) and change the
// floating-point results, so they belong in the determinism class.
func cpuFeatures() []string {
	var out []string
	for name, value := range ggmlCPUFeatures() {
		if name != "llamafile" && name != "sve_cnt" && value != "0" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ggmlCPUFeatures is what the ggml CPU backend reports as its features,
// names lower-cased.
func ggmlCPUFeatures() map[string]string {
	out := map[string]string{}
	for i := range C.ggml_backend_dev_count() {
		d := C.ggml_backend_dev_get(i)
		if C.ggml_backend_dev_type(d) != ggmlDeviceCPU {
			continue
		}
		f := C.ogpu_features(C.ggml_backend_dev_backend_reg(d))
		for ; f != nil && f.name != nil; f = (*C.struct_ogpu_feature)(unsafe.Add(unsafe.Pointer(f), unsafe.Sizeof(*f))) {
			out[strings.ToLower(C.GoString(f.name))] = C.GoString(f.value)
		}
		break
	}
	return out
}
