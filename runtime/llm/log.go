package llm

// #include <stdlib.h>
import "C"

import (
	"io"
	"strings"
	"sync"
	"unsafe"
)

// ggml log levels (GGML_LOG_LEVEL_*).
const (
	logError = 4
	logCont  = 5
)

// llamaLog collects llama.cpp's log. Nothing is printed unless SetLogOutput
// names a writer; error lines are kept so that a failed load can say why.
var llamaLog struct {
	mu      sync.Mutex
	out     io.Writer
	last    int // level of the previous message, for GGML_LOG_LEVEL_CONT
	errText strings.Builder
}

// SetLogOutput sends llama.cpp's log (all levels) to w; nil, the default,
// discards it.
func SetLogOutput(w io.Writer) {
	llamaLog.mu.Lock()
	llamaLog.out = w
	llamaLog.mu.Unlock()
}

// takeLogErrors returns and clears the error lines logged since the last call.
func takeLogErrors() string {
	llamaLog.mu.Lock()
	defer llamaLog.mu.Unlock()
	s := strings.TrimSpace(llamaLog.errText.String())
	llamaLog.errText.Reset()
	return s
}

//export ogpuLlamaLog
func ogpuLlamaLog(level C.int, text *C.char, _ unsafe.Pointer) {
	s := C.GoString(text)
	llamaLog.mu.Lock()
	defer llamaLog.mu.Unlock()
	if level != logCont {
		llamaLog.last = int(level)
	}
	if llamaLog.last == logError && llamaLog.errText.Len() < 4096 {
		llamaLog.errText.WriteString(s)
	}
	if llamaLog.out != nil {
		io.WriteString(llamaLog.out, s)
	}
}
