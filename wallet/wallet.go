// Package wallet is the named key store behind the ogpu wallet CLI.
//
// Keys are kept one per file as <dir>/<name>.json in the Web3 secret-storage
// format (keystore version 3, scrypt), the same format geth writes and
// MetaMask exports. A key file exported from geth or MetaMask can be imported,
// and a file exported from a Store can be imported into geth or MetaMask.
//
// The Store uses keystore.EncryptKey and keystore.DecryptKey directly; it does
// not start go-ethereum's KeyStore manager or its background directory watcher.
//
// A Store serialises its own writes, but it takes no lock across processes:
// two processes adding the same name at the same moment may overwrite each
// other's file.
package wallet

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"
)

// Errors returned by Store methods, wrapped with context; test them with
// errors.Is.
var (
	// ErrNotFound means no key with the given name (or address) is stored.
	ErrNotFound = errors.New("key not found")
	// ErrExists means a key with the given name or address is already stored.
	ErrExists = errors.New("key already exists")
	// ErrWrongPassword means the password does not decrypt the key.
	ErrWrongPassword = errors.New("wrong password")
	// ErrInvalidName means a key name breaks the rules checked by ValidName.
	ErrInvalidName = errors.New("invalid key name")
	// ErrCorrupt means a file in the key store directory is truncated or is
	// not keystore JSON; the error names the file.
	ErrCorrupt = errors.New("corrupt key file")
)

// fileExt is the extension of key files in the store directory.
const fileExt = ".json"

// maxKeyFileSize bounds how much of a key file is read; keystore JSON is
// well under 1 KiB.
const maxKeyFileSize = 1 << 20

// maxNameLen is the longest valid key name.
const maxNameLen = 64

// Key describes a stored key without its secret.
type Key struct {
	// Name is the key's name in the store, also the base of its file name.
	Name string `json:"name"`
	// Address is the Ethereum address of the key.
	Address common.Address `json:"address"`
	// Path is the key's keystore JSON file.
	Path string `json:"path"`
}

// Store is a directory of named keystore files. Create one with Open.
type Store struct {
	dir     string
	scryptN int
	scryptP int
	mu      sync.Mutex // serialises Add, Import, ImportPrivateKey and Delete
}

// Option configures a Store in Open.
type Option func(*Store)

// WithLightScrypt makes the Store encrypt new key files with go-ethereum's
// light scrypt parameters (keystore.LightScryptN, keystore.LightScryptP)
// instead of the standard ones. Light files are much faster to encrypt and
// decrypt and much cheaper to brute-force: it is meant for tests and tools,
// never for keys that hold value. Files written either way decrypt with
// either setting, since the parameters are stored in each file.
func WithLightScrypt() Option {
	return func(s *Store) {
		s.scryptN = keystore.LightScryptN
		s.scryptP = keystore.LightScryptP
	}
}

// Open returns the Store kept in dir (for example ~/.ogpu/keystore, with the
// ~ already expanded by the caller), creating dir with mode 0700 if it is
// missing. Without options, new key files use keystore.StandardScryptN and
// keystore.StandardScryptP.
func Open(dir string, opts ...Option) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open key store: no directory given")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create key store directory %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open key store directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("key store path %s is not a directory; move the file away or choose another directory", dir)
	}
	s := &Store{
		dir:     dir,
		scryptN: keystore.StandardScryptN,
		scryptP: keystore.StandardScryptP,
	}
	for _, opt := range opts {
		opt(s)
	}
	return s, nil
}

// Dir returns the directory holding the Store's key files.
func (s *Store) Dir() string { return s.dir }

// ValidName reports whether name may name a key: 1 to 64 characters from
// [A-Za-z0-9._-], not starting with '.' or '-'. The error wraps
// ErrInvalidName.
func ValidName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: the name is empty; use 1 to %d characters from A-Z a-z 0-9 . _ -", ErrInvalidName, maxNameLen)
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("%w: the name is %d characters long; use at most %d", ErrInvalidName, len(name), maxNameLen)
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("%w: %q starts with %q; start with a letter, digit or '_'", ErrInvalidName, name, name[0])
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q contains a character other than A-Z a-z 0-9 . _ -", ErrInvalidName, name)
		}
	}
	return nil
}

// Zero overwrites the private scalar of k so that the secret does not linger
// in memory. It is safe to call with nil. k must not be used afterwards.
func Zero(k *ecdsa.PrivateKey) {
	if k == nil || k.D == nil {
		return
	}
	clear(k.D.Bits())
	k.D.SetInt64(0)
}

// Add creates a new random secp256k1 key named name, encrypted with password.
// It refuses an invalid name (ErrInvalidName) and a name already in use
// (ErrExists).
func (s *Store) Add(name, password string) (Key, error) {
	if err := ValidName(name); err != nil {
		return Key{}, err
	}
	priv, err := crypto.GenerateKey()
	if err != nil {
		return Key{}, fmt.Errorf("generate key: %w", err)
	}
	defer Zero(priv)
	return s.store(name, priv, password, "")
}

// Import stores the key in keyJSON (a keystore file as written by geth or
// exported by MetaMask) under name. It decrypts keyJSON with password
// (ErrWrongPassword if that fails) and re-encrypts the key with newPassword,
// or with password again if newPassword is empty. It refuses an invalid name,
// a name already in use and an address already stored under another name
// (ErrExists, naming that key).
func (s *Store) Import(name string, keyJSON []byte, password, newPassword string) (Key, error) {
	if err := ValidName(name); err != nil {
		return Key{}, err
	}
	// Check the name first: decrypting costs a second with standard scrypt.
	if err := s.checkNameFree(name); err != nil {
		return Key{}, err
	}
	if err := checkKeystoreJSON(keyJSON); err != nil {
		return Key{}, fmt.Errorf("import %q: the input is not a keystore JSON file: %w", name, err)
	}
	k, err := keystore.DecryptKey(keyJSON, password)
	if err != nil {
		if errors.Is(err, keystore.ErrDecrypt) {
			return Key{}, fmt.Errorf("import %q: %w: the password does not decrypt this key file; give the password it was exported with", name, ErrWrongPassword)
		}
		return Key{}, fmt.Errorf("import %q: cannot decrypt the key file: %w", name, err)
	}
	defer Zero(k.PrivateKey)
	if err := checkAddressField(keyJSON, k.Address); err != nil {
		return Key{}, fmt.Errorf("import %q: %w", name, err)
	}
	if newPassword == "" {
		newPassword = password
	}
	return s.store(name, k.PrivateKey, newPassword, k.Id.String())
}

// ImportPrivateKey stores the raw secp256k1 private key hexKey (64 hex digits,
// optionally prefixed with 0x) under name, encrypted with password. It
// refuses an invalid name, a name already in use and an address already
// stored under another name. Errors never include the key.
func (s *Store) ImportPrivateKey(name, hexKey, password string) (Key, error) {
	if err := ValidName(name); err != nil {
		return Key{}, err
	}
	h := strings.TrimSpace(hexKey)
	if len(h) >= 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X') {
		h = h[2:]
	}
	const badKey = "the private key must be 64 hex digits (32 bytes), optionally prefixed with 0x"
	if len(h) != 64 {
		return Key{}, fmt.Errorf("import %q: %s; got %d digits", name, badKey, len(h))
	}
	raw, err := hex.DecodeString(h)
	if err != nil {
		return Key{}, fmt.Errorf("import %q: %s; it contains a non-hex character", name, badKey)
	}
	priv, err := crypto.ToECDSA(raw)
	clear(raw)
	if err != nil {
		return Key{}, fmt.Errorf("import %q: not a valid secp256k1 private key: %w", name, err)
	}
	defer Zero(priv)
	return s.store(name, priv, password, "")
}

// Export checks password against the key named name and returns its keystore
// JSON: the bytes of the stored file, which geth and MetaMask can import.
func (s *Store) Export(name, password string) ([]byte, error) {
	data, key, err := s.readKey(name)
	if err != nil {
		return nil, err
	}
	priv, err := decrypt(data, key, password)
	if err != nil {
		return nil, err
	}
	Zero(priv)
	return data, nil
}

// List returns the stored keys sorted by name. Files in the directory that
// are not named <valid name>.json (temporary files, geth's UTC--... files)
// are ignored. A <name>.json file that is truncated or not keystore JSON
// makes List return an error wrapping ErrCorrupt that names the file; the
// returned slice then still holds every readable key.
func (s *Store) List() ([]Key, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("read key store directory %s: %w", s.dir, err)
	}
	keys := []Key{}
	var errs []error
	for _, e := range entries {
		name, ok := keyName(e)
		if !ok {
			continue
		}
		_, k, err := s.readKey(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Name < keys[j].Name })
	return keys, errors.Join(errs...)
}

// Get returns the key named name, or an error wrapping ErrNotFound. Names
// match exactly, also on case-insensitive file systems.
func (s *Store) Get(name string) (Key, error) {
	_, k, err := s.readKey(name)
	return k, err
}

// Find returns the key named nameOrAddress or, if no key has that name and
// nameOrAddress is a 0x-prefixed hex address, the stored key with that
// address (in any letter case). It returns an error wrapping ErrNotFound if
// neither matches.
func (s *Store) Find(nameOrAddress string) (Key, error) {
	if ValidName(nameOrAddress) == nil {
		k, err := s.Get(nameOrAddress)
		if err == nil || !errors.Is(err, ErrNotFound) {
			return k, err
		}
	}
	if !isHexAddress(nameOrAddress) {
		return Key{}, fmt.Errorf("%w: no key named %q in %s", ErrNotFound, nameOrAddress, s.dir)
	}
	addr := common.HexToAddress(nameOrAddress)
	keys, listErr := s.List()
	for _, k := range keys {
		if k.Address == addr {
			return k, nil
		}
	}
	if listErr != nil {
		return Key{}, fmt.Errorf("%w: no readable key has address %s in %s, and some key files could not be read: %w", ErrNotFound, addr.Hex(), s.dir, listErr)
	}
	return Key{}, fmt.Errorf("%w: no key has address %s in %s", ErrNotFound, addr.Hex(), s.dir)
}

// Delete removes the key named name after checking that password decrypts
// it (ErrWrongPassword otherwise).
func (s *Store) Delete(name, password string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, key, err := s.readKey(name)
	if err != nil {
		return err
	}
	priv, err := decrypt(data, key, password)
	if err != nil {
		return err
	}
	Zero(priv)
	if err := os.Remove(key.Path); err != nil {
		return fmt.Errorf("delete key %q: %w", name, err)
	}
	syncDir(s.dir)
	return nil
}

// Unlock decrypts the key named name with password and returns its private
// key. The caller must call Zero on it when done.
func (s *Store) Unlock(name, password string) (*ecdsa.PrivateKey, error) {
	data, key, err := s.readKey(name)
	if err != nil {
		return nil, err
	}
	return decrypt(data, key, password)
}

// store encrypts priv with password and writes it as <name>.json after
// checking that the name and the address are free. id is the keystore UUID
// to keep; a new random one is made if it is empty.
func (s *Store) store(name string, priv *ecdsa.PrivateKey, password, id string) (Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkNameFree(name); err != nil {
		return Key{}, err
	}
	addr := crypto.PubkeyToAddress(priv.PublicKey)
	if other, ok := s.findAddress(addr); ok {
		return Key{}, fmt.Errorf("%w: address %s is already stored as %q; use that name or delete it first", ErrExists, addr.Hex(), other.Name)
	}
	uid, err := uuid.Parse(id)
	if err != nil {
		if uid, err = uuid.NewRandom(); err != nil {
			return Key{}, fmt.Errorf("generate key id: %w", err)
		}
	}
	ksKey := &keystore.Key{Id: uid, Address: addr, PrivateKey: priv}
	data, err := keystore.EncryptKey(ksKey, password, s.scryptN, s.scryptP)
	if err != nil {
		return Key{}, fmt.Errorf("encrypt key %q: %w", name, err)
	}
	path := s.path(name)
	if err := writeFileAtomic(s.dir, path, data); err != nil {
		return Key{}, fmt.Errorf("write key %q: %w", name, err)
	}
	return Key{Name: name, Address: addr, Path: path}, nil
}

// checkNameFree returns ErrInvalidName or ErrExists if name cannot be used
// for a new key. Names that differ only in letter case count as the same,
// so that a store behaves alike on case-sensitive and case-insensitive file
// systems.
func (s *Store) checkNameFree(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("read key store directory %s: %w", s.dir, err)
	}
	for _, e := range entries {
		n := strings.TrimSuffix(e.Name(), fileExt)
		if n == e.Name() || !strings.EqualFold(n, name) {
			continue
		}
		if n == name {
			return fmt.Errorf("%w: a key named %q is already stored in %s; choose another name or delete it first", ErrExists, name, s.dir)
		}
		return fmt.Errorf("%w: a key named %q is already stored in %s and names differing only in case are not allowed; choose another name", ErrExists, n, s.dir)
	}
	return nil
}

// findAddress returns the readable stored key with address addr, if any.
// Unreadable files are skipped so that a corrupt file does not block
// re-importing its key under another name.
func (s *Store) findAddress(addr common.Address) (Key, bool) {
	keys, _ := s.List()
	for _, k := range keys {
		if k.Address == addr {
			return k, true
		}
	}
	return Key{}, false
}

// path returns the file of the key named name.
func (s *Store) path(name string) string {
	return filepath.Join(s.dir, name+fileExt)
}

// readKey reads and parses the file of the key named name without
// decrypting it.
func (s *Store) readKey(name string) ([]byte, Key, error) {
	if err := ValidName(name); err != nil {
		return nil, Key{}, err
	}
	path := s.path(name)
	if !s.exactEntry(name + fileExt) {
		return nil, Key{}, fmt.Errorf("%w: no key named %q in %s", ErrNotFound, name, s.dir)
	}
	data, err := readFileLimited(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, Key{}, fmt.Errorf("%w: no key named %q in %s", ErrNotFound, name, s.dir)
		}
		return nil, Key{}, fmt.Errorf("read key file %s: %w", path, err)
	}
	addr, err := parseKeyFile(data)
	if err != nil {
		return nil, Key{}, fmt.Errorf("%w %s: %w; remove the file or re-import the key", ErrCorrupt, path, err)
	}
	return data, Key{Name: name, Address: addr, Path: path}, nil
}

// exactEntry reports whether the store directory has an entry named exactly
// file (case-sensitively, whatever the file system).
func (s *Store) exactEntry(file string) bool {
	// Fast path: on a case-sensitive file system a missing file is missing.
	if _, err := os.Lstat(filepath.Join(s.dir, file)); err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return true // let the read report the problem
	}
	for _, e := range entries {
		if e.Name() == file {
			return true
		}
	}
	return false
}

// keyName returns the key name of directory entry e if it is a key file.
func keyName(e fs.DirEntry) (string, bool) {
	if e.IsDir() {
		return "", false
	}
	name, ok := strings.CutSuffix(e.Name(), fileExt)
	if !ok || ValidName(name) != nil {
		return "", false
	}
	return name, true
}

// decrypt decrypts the stored keystore JSON data of key with password and
// checks that it holds key's address.
func decrypt(data []byte, key Key, password string) (*ecdsa.PrivateKey, error) {
	k, err := keystore.DecryptKey(data, password)
	if err != nil {
		if errors.Is(err, keystore.ErrDecrypt) {
			return nil, fmt.Errorf("key %q: %w; give the password the key was saved with", key.Name, ErrWrongPassword)
		}
		return nil, fmt.Errorf("%w %s: cannot decrypt: %w; remove the file or re-import the key", ErrCorrupt, key.Path, err)
	}
	if k.Address != key.Address {
		Zero(k.PrivateKey)
		return nil, fmt.Errorf("%w %s: the file says address %s but holds the key of %s; remove the file or re-import the key", ErrCorrupt, key.Path, key.Address.Hex(), k.Address.Hex())
	}
	return k.PrivateKey, nil
}

// keyFileJSON is the part of a keystore file read without decrypting it.
// encoding/json matches keys case-insensitively, so older "Crypto" files
// parse too.
type keyFileJSON struct {
	Address string          `json:"address"`
	Crypto  json.RawMessage `json:"crypto"`
}

// checkKeystoreJSON checks that data looks like a keystore file, so that a
// wrong input gives a clearer error than the one from decryption.
func checkKeystoreJSON(data []byte) error {
	var f keyFileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if len(f.Crypto) == 0 || bytes.Equal(f.Crypto, []byte("null")) {
		return errors.New(`no "crypto" section`)
	}
	return nil
}

// checkAddressField checks that the "address" field of keystore JSON data,
// if present, is addr.
func checkAddressField(data []byte, addr common.Address) error {
	var f keyFileJSON
	if err := json.Unmarshal(data, &f); err != nil || f.Address == "" {
		return nil
	}
	a, err := parseAddress(f.Address)
	if err != nil {
		return fmt.Errorf("the key file has an invalid address field: %w", err)
	}
	if a != addr {
		return fmt.Errorf("the key file says address %s but holds the key of %s; the file is damaged or forged", a.Hex(), addr.Hex())
	}
	return nil
}

// parseKeyFile checks that data is a keystore file with an address and
// returns the address.
func parseKeyFile(data []byte) (common.Address, error) {
	var f keyFileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return common.Address{}, fmt.Errorf("not keystore JSON: %w", err)
	}
	if len(f.Crypto) == 0 || bytes.Equal(f.Crypto, []byte("null")) {
		return common.Address{}, errors.New(`not keystore JSON: no "crypto" section`)
	}
	if f.Address == "" {
		return common.Address{}, errors.New(`no "address" field`)
	}
	return parseAddress(f.Address)
}

// parseAddress parses a 40-digit hex address with or without 0x.
func parseAddress(s string) (common.Address, error) {
	h := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != common.AddressLength {
		return common.Address{}, fmt.Errorf("address %q is not 40 hex digits", s)
	}
	return common.BytesToAddress(b), nil
}

// isHexAddress reports whether s is a 0x-prefixed 40-digit hex address.
func isHexAddress(s string) bool {
	return len(s) == 2+2*common.AddressLength && (strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X")) && common.IsHexAddress(s)
}

// readFileLimited reads path, refusing files over maxKeyFileSize.
func readFileLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeyFileSize {
		return nil, fmt.Errorf("file is larger than %d bytes, too large for a key file", maxKeyFileSize)
	}
	return data, nil
}

// writeFileAtomic writes data to path with mode 0600 through a temporary
// file in dir and a rename, so that path never holds a partial file.
func writeFileAtomic(dir, path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir flushes directory metadata (a new or removed entry) to disk where
// the platform supports it; failures are ignored.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	d.Close()
}
