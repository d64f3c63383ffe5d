package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// keyPrefix starts every generated key, so that a leaked one is
// recognisable (secret scanners, logs).
const keyPrefix = "ogpu-gw-"

// minKeyLen bounds a key read from a file: a short one is guessable.
const minKeyLen = 24

// LoadOrCreateKey returns the API key in path, creating the file (mode
// 0600, in a 0700 folder if it makes one) with a new random key if it does
// not exist. A key file that others can read is refused: the key spends
// the wallet's money.
func LoadOrCreateKey(path string) (key string, created bool, _ error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return createKey(path)
	case err != nil:
		return "", false, err
	case !st.Mode().IsRegular():
		return "", false, fmt.Errorf("API key file %s is not a regular file", path)
	case st.Mode().Perm()&0o077 != 0:
		return "", false, fmt.Errorf("API key file %s has mode %#o: others can read the key that spends this wallet's money; run chmod 600 %s", path, st.Mode().Perm(), path)
	}
	bz, err := os.ReadFile(path)
	if err != nil {
		return "", false, err
	}
	key = strings.TrimSpace(string(bz))
	if len(key) < minKeyLen || strings.ContainsAny(key, " \t\r\n") {
		return "", false, fmt.Errorf("API key file %s: want one line of at least %d characters without spaces (delete the file to have a new key made)", path, minKeyLen)
	}
	return key, false, nil
}

func createKey(path string) (string, bool, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", false, err
	}
	key := keyPrefix + hex.EncodeToString(b[:])
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("cannot create the API key file: %w", err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return "", false, err
	}
	if err := f.Close(); err != nil {
		return "", false, err
	}
	return key, true, nil
}
