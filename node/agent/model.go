package agent

import (
	"fmt"
	"os"
	"path/filepath"
)

// FindModel locates the demo model: $OGPU_MODELS/stories260K.gguf, else
// ../shared/models/stories260K.gguf from the working directory or any of
// its parents.
func FindModel() (string, error) {
	const name = "stories260K.gguf"
	if dir := os.Getenv("OGPU_MODELS"); dir != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("OGPU_MODELS=%s: %w", dir, err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "..", "shared", "models", name)
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found in ../shared/models of this directory or a parent: set OGPU_MODELS to its folder or pass --model", name)
		}
		dir = parent
	}
}
