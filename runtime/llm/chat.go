package llm

/*
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

// From llama.h (llama.cpp as built by ollama v0.9.6); linked from the
// ollama llama package's C objects like the declarations in cgo.go.
struct llama_chat_message {
	const char * role;
	const char * content;
};
int32_t llama_chat_apply_template(const char * tmpl, const struct llama_chat_message * chat, size_t n_msg, bool add_ass, char * buf, int32_t length);
int32_t llama_chat_builtin_templates(const char ** output, size_t len);
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// ChatMeta is what an OpenAI-style front end needs to know of a model file
// besides its hash: a name to show, the context it was trained for, and
// the chat template it ships with.
type ChatMeta struct {
	// Name is general.name ("" if the file has none).
	Name         string
	Architecture string
	// ContextLength is <arch>.context_length, the training context (0 if
	// absent).
	ContextLength uint64
	// ChatTemplate is tokenizer.chat_template, a Jinja template ("" if the
	// file has none, as stories260K).
	ChatTemplate string
}

// ReadChatMeta reads the GGUF header of the model file at path (no
// llama.cpp, no weights).
func ReadChatMeta(path string) (*ChatMeta, error) {
	g, err := readGGUFFile(path)
	if err != nil {
		return nil, err
	}
	arch, err := g.str("general.architecture")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m := &ChatMeta{Architecture: arch, ContextLength: g.uintOr(arch+".context_length", 0)}
	m.Name, _ = g.str("general.name")
	m.ChatTemplate, _ = g.str("tokenizer.chat_template")
	return m, nil
}

// ChatMessage is one turn of a chat.
type ChatMessage struct {
	Role    string
	Content string
}

// ErrUnknownChatTemplate is returned by ApplyChatTemplate for a template
// llama.cpp does not recognise.
var ErrUnknownChatTemplate = errors.New("llama.cpp does not recognise this chat template")

// maxChatBytes bounds a rendered chat (llama.cpp returns an int32 length).
const maxChatBytes = 16 << 20

// ApplyChatTemplate renders msgs into a raw prompt with llama.cpp's
// llama_chat_apply_template, ending with the assistant's turn opened when
// addAssistant is set. It has no Jinja engine: tmpl is either one of
// ChatTemplates (a name such as "chatml" or "llama3") or a model's Jinja
// source, which llama.cpp recognises by its markers (<|im_start|>,
// <|start_header_id|>, [INST], ...) among about forty families; anything
// else is ErrUnknownChatTemplate. The beginning-of-sequence token is not
// added here: the tokenizer adds it.
func ApplyChatTemplate(tmpl string, msgs []ChatMessage, addAssistant bool) (string, error) {
	if tmpl == "" {
		return "", errors.New("no chat template given")
	}
	if len(msgs) == 0 {
		return "", errors.New("no messages to render")
	}
	total := len(tmpl)
	for i, m := range msgs {
		if strings.IndexByte(m.Role, 0) >= 0 || strings.IndexByte(m.Content, 0) >= 0 {
			return "", fmt.Errorf("message %d contains a NUL byte", i)
		}
		total += len(m.Role) + len(m.Content)
	}
	if strings.IndexByte(tmpl, 0) >= 0 {
		return "", errors.New("the chat template contains a NUL byte")
	}
	if total > maxChatBytes/2 {
		return "", fmt.Errorf("the chat is %d bytes, at most %d", total, maxChatBytes/2)
	}
	ctmpl := C.CString(tmpl)
	defer C.free(unsafe.Pointer(ctmpl))
	// The message array lives in C memory: cgo forbids passing Go memory
	// that holds Go pointers.
	cmsgs := (*C.struct_llama_chat_message)(C.malloc(C.size_t(len(msgs)) * C.size_t(unsafe.Sizeof(C.struct_llama_chat_message{}))))
	defer C.free(unsafe.Pointer(cmsgs))
	arr := unsafe.Slice(cmsgs, len(msgs))
	for i, m := range msgs {
		arr[i].role = C.CString(m.Role)
		arr[i].content = C.CString(m.Content)
	}
	defer func() {
		for i := range arr {
			C.free(unsafe.Pointer(arr[i].role))
			C.free(unsafe.Pointer(arr[i].content))
		}
	}()
	size := 2*total + 256
	for {
		buf := (*C.char)(C.malloc(C.size_t(size)))
		n := int(C.llama_chat_apply_template(ctmpl, cmsgs, C.size_t(len(msgs)), C.bool(addAssistant), buf, C.int32_t(size)))
		if n < 0 {
			C.free(unsafe.Pointer(buf))
			return "", ErrUnknownChatTemplate
		}
		if n <= size {
			out := C.GoStringN(buf, C.int(n))
			C.free(unsafe.Pointer(buf))
			return out, nil
		}
		C.free(unsafe.Pointer(buf))
		if n > maxChatBytes {
			return "", fmt.Errorf("the rendered chat is %d bytes, at most %d", n, maxChatBytes)
		}
		size = n
	}
}

// ChatTemplates lists the template names llama.cpp renders.
func ChatTemplates() []string {
	n := int(C.llama_chat_builtin_templates(nil, 0))
	if n <= 0 {
		return nil
	}
	names := make([]*C.char, n)
	n = int(C.llama_chat_builtin_templates(&names[0], C.size_t(n)))
	out := make([]string, 0, n)
	for _, p := range names[:n] {
		out = append(out, C.GoString(p))
	}
	return out
}
