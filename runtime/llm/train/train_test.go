package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	MaybeWorker()
	os.Exit(m.Run())
}

// modelPath finds stories260K.gguf in $OGPU_MODELS or <repo>/../shared/models.
func modelPath(t testing.TB) string {
	dir := os.Getenv("OGPU_MODELS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", "shared", "models")
	}
	p := filepath.Join(dir, "stories260K.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("stories260K.gguf is not in %s (set OGPU_MODELS to the folder holding it): %v", dir, err)
	}
	return p
}

// ziggy is a small text that repeats a distinctive phrase.
func ziggy(stories int) []byte {
	names := []string{"Lily", "Tom", "Sue", "Ben", "Anna", "Max", "Mia", "Sam"}
	var b strings.Builder
	for i := range stories {
		n := names[i%len(names)]
		b.WriteString("Once upon a time, there was a purple dragon named Ziggy. " + n + " met Ziggy in the park. Ziggy smiled and said, \"I love blue pancakes!\" " + n + " laughed and they were happy.\n")
	}
	return []byte(b.String())
}

func params(t testing.TB, stories, epochs int) Params {
	return Params{Model: modelPath(t), Data: ziggy(stories), Epochs: epochs, LRMicro: 3000, NCtx: 64, Stride: 32, Seed: 7, Trainable: SetHead, Threads: 1}
}
