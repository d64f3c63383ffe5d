package llm

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeHeaderGGUF writes a GGUF v3 file of string and uint32 key-values and
// no tensors.
func writeHeaderGGUF(t *testing.T, strs map[string]string, u32 map[string]uint32) string {
	t.Helper()
	b := []byte("GGUF")
	b = binary.LittleEndian.AppendUint32(b, 3)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(strs)+len(u32)))
	keys := make([]string, 0, len(strs))
	for k := range strs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = append(b, rawString(k)...)
		b = binary.LittleEndian.AppendUint32(b, ggufString)
		b = append(b, rawString(strs[k])...)
	}
	keys = keys[:0]
	for k := range u32 {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = append(b, rawString(k)...)
		b = binary.LittleEndian.AppendUint32(b, ggufUint32)
		b = binary.LittleEndian.AppendUint32(b, u32[k])
	}
	for len(b)%ggufDefaultAlign != 0 {
		b = append(b, 0)
	}
	p := filepath.Join(t.TempDir(), "header.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReadChatMeta: the shared model has a name and a context but no chat
// template; a file with one returns it as written.
func TestReadChatMeta(t *testing.T) {
	m, err := ReadChatMeta(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.Architecture != "llama" || m.ContextLength == 0 || m.ChatTemplate != "" {
		t.Fatalf("stories260K: %+v; want llama, a context length, no template", m)
	}
	tmpl := "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
	p := writeHeaderGGUF(t, map[string]string{"general.architecture": "qwen2", "general.name": "Tiny Chat", "tokenizer.chat_template": tmpl},
		map[string]uint32{"qwen2.context_length": 32768})
	m, err = ReadChatMeta(p)
	if err != nil {
		t.Fatal(err)
	}
	want := ChatMeta{Name: "Tiny Chat", Architecture: "qwen2", ContextLength: 32768, ChatTemplate: tmpl}
	if *m != want {
		t.Fatalf("got %+v, want %+v", *m, want)
	}
	if _, err := ReadChatMeta(filepath.Join(t.TempDir(), "missing.gguf")); err == nil {
		t.Fatal("a missing file was read")
	}
}

// TestApplyChatTemplate renders a chat with templates named and recognised
// from a model's Jinja source, exactly as llama.cpp's llama-server does
// without --jinja, and refuses what llama.cpp does not know.
func TestApplyChatTemplate(t *testing.T) {
	chat := []ChatMessage{{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Name a colour."}}
	chatml := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"
	llama3 := "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nName a colour.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	qwenJinja := "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	llama3Jinja := "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{{ content }}{% endfor %}"
	for _, tc := range []struct {
		name, tmpl, want string
	}{
		{"chatml by name", "chatml", chatml},
		{"chatml from Jinja", qwenJinja, chatml},
		{"llama3 by name", "llama3", llama3},
		{"llama3 from Jinja", llama3Jinja, llama3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ApplyChatTemplate(tc.tmpl, chat, true)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	if got, err := ApplyChatTemplate("chatml", chat[:2], false); err != nil || got != "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" {
		t.Fatalf("without the assistant turn: %q, %v", got, err)
	}
	if _, err := ApplyChatTemplate("{{ messages | my_own_format }}", chat, true); !errors.Is(err, ErrUnknownChatTemplate) {
		t.Fatalf("an unknown template: %v, want ErrUnknownChatTemplate", err)
	}
	if _, err := ApplyChatTemplate("chatml", []ChatMessage{{"user", "a\x00b"}}, true); err == nil {
		t.Fatal("a NUL byte in a message was rendered")
	}
	if _, err := ApplyChatTemplate("chatml", nil, true); err == nil {
		t.Fatal("an empty chat was rendered")
	}
	if names := ChatTemplates(); !slices.Contains(names, "chatml") || !slices.Contains(names, "llama3") || len(names) < 20 {
		t.Fatalf("ChatTemplates: %v", names)
	}
}
