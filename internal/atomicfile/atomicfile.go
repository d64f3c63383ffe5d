// Package atomicfile writes files so that a crash leaves either the old
// content or the new, never a torn mix: the ledgers and lane records that
// decide what a party is owed are written this way.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data: a temporary file in the same folder,
// synced, renamed over path, and the folder synced. The folder is created
// (0700) if missing.
func Write(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // gone after the rename; cleans up a failure
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
