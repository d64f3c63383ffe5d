package wallet

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// knownKey and knownAddr are a fixed test key pair.
const (
	knownKey  = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
	knownAddr = "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23"
)

// specPBKDF2Vector is the pbkdf2 test vector of the Web3 Secret Storage
// definition (password "testpassword", private key specVectorKey): a v3 file
// from a non-geth writer, without an "address" field.
const specPBKDF2Vector = `{
  "crypto": {
    "cipher": "aes-128-ctr",
    "cipherparams": {"iv": "6087dab2f9fdbbfaddc31a909735c1e6"},
    "ciphertext": "5318b4d5bcd28de64ee5559e671353e16f075ecae9f99c7a79a38af5f869aa46",
    "kdf": "pbkdf2",
    "kdfparams": {"c": 262144, "dklen": 32, "prf": "hmac-sha256", "salt": "ae3cd4e7013836a3df6bd7241b12db061dbe2c6785853cce422d148a624ce0bd"},
    "mac": "517ead924a9d0dc3124507e3393d175ce3ff7c1e96529c6c555ce9e51205e9b2"
  },
  "id": "3198bc9c-6672-5ab3-d995-4942343ae5b6",
  "version": 3
}`

const specVectorKey = "7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d"

// openStore opens a light-scrypt Store in a fresh temporary directory.
func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "keystore"), WithLightScrypt())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// addrOf returns the address of the hex private key h.
func addrOf(t *testing.T, h string) common.Address {
	t.Helper()
	k, err := crypto.HexToECDSA(h)
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(k.PublicKey)
}

// dirNames returns the sorted entry names of dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestOpen(t *testing.T) {
	t.Run("creates directory 0700 with standard scrypt", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "keystore")
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700 {
			t.Errorf("dir mode = %v, want 0700", fi.Mode().Perm())
		}
		if s.scryptN != keystore.StandardScryptN || s.scryptP != keystore.StandardScryptP {
			t.Errorf("default scrypt = (%d, %d), want standard (%d, %d)", s.scryptN, s.scryptP, keystore.StandardScryptN, keystore.StandardScryptP)
		}
		if s.Dir() != dir {
			t.Errorf("Dir() = %q, want %q", s.Dir(), dir)
		}
	})
	t.Run("light scrypt option", func(t *testing.T) {
		s := openStore(t)
		if s.scryptN != keystore.LightScryptN || s.scryptP != keystore.LightScryptP {
			t.Errorf("scrypt = (%d, %d), want light", s.scryptN, s.scryptP)
		}
	})
	t.Run("refuses a file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(f); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("Open(file) error = %v, want 'not a directory'", err)
		}
	})
	t.Run("refuses empty dir", func(t *testing.T) {
		if _, err := Open(""); err == nil {
			t.Error("Open(\"\") succeeded")
		}
	})
}

func TestAddListGetFindDelete(t *testing.T) {
	s := openStore(t)
	names := []string{"carol", "alice", "bob_2.x-y"}
	added := map[string]Key{}
	for _, n := range names {
		k, err := s.Add(n, "pw-"+n)
		if err != nil {
			t.Fatalf("Add(%q): %v", n, err)
		}
		if k.Name != n || k.Path != filepath.Join(s.Dir(), n+".json") || k.Address == (common.Address{}) {
			t.Fatalf("Add(%q) = %+v", n, k)
		}
		added[n] = k
	}

	t.Run("files are 0600 v3 scrypt keystore JSON", func(t *testing.T) {
		if got, want := strings.Join(dirNames(t, s.Dir()), ","), "alice.json,bob_2.x-y.json,carol.json"; got != want {
			t.Errorf("directory holds %s, want %s (no temporary files)", got, want)
		}
		for n, k := range added {
			fi, err := os.Stat(k.Path)
			if err != nil {
				t.Fatal(err)
			}
			if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s mode = %v, want 0600", n, fi.Mode().Perm())
			}
			data, _ := os.ReadFile(k.Path)
			var f struct {
				Address string `json:"address"`
				Version int    `json:"version"`
				Crypto  struct {
					KDF       string         `json:"kdf"`
					KDFParams map[string]any `json:"kdfparams"`
				} `json:"crypto"`
			}
			if err := json.Unmarshal(data, &f); err != nil {
				t.Fatal(err)
			}
			if common.HexToAddress(f.Address) != k.Address || f.Version != 3 || f.Crypto.KDF != "scrypt" || f.Crypto.KDFParams["n"] != float64(keystore.LightScryptN) {
				t.Errorf("%s file = %s", n, data)
			}
			dk, err := keystore.DecryptKey(data, "pw-"+n)
			if err != nil || dk.Address != k.Address {
				t.Errorf("geth DecryptKey(%s) = %v, %v; want address %s", n, dk, err, k.Address.Hex())
			}
		}
	})

	t.Run("list sorted", func(t *testing.T) {
		keys, err := s.List()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"alice", "bob_2.x-y", "carol"}
		if len(keys) != len(want) {
			t.Fatalf("List() = %+v, want %v", keys, want)
		}
		for i, k := range keys {
			if k != added[want[i]] {
				t.Errorf("List()[%d] = %+v, want %+v", i, k, added[want[i]])
			}
		}
	})

	t.Run("unlock gives the key of the address", func(t *testing.T) {
		priv, err := s.Unlock("alice", "pw-alice")
		if err != nil {
			t.Fatal(err)
		}
		if crypto.PubkeyToAddress(priv.PublicKey) != added["alice"].Address {
			t.Error("unlocked key does not match the address")
		}
		Zero(priv)
		if priv.D.Sign() != 0 {
			t.Error("Zero left the scalar non-zero")
		}
	})

	getTests := []struct {
		name    string
		call    func() (Key, error)
		want    string // key name, or "" for an error
		wantErr error
	}{
		{"get existing", func() (Key, error) { return s.Get("bob_2.x-y") }, "bob_2.x-y", nil},
		{"get missing", func() (Key, error) { return s.Get("dave") }, "", ErrNotFound},
		{"get other case", func() (Key, error) { return s.Get("Alice") }, "", ErrNotFound},
		{"get invalid name", func() (Key, error) { return s.Get("../alice") }, "", ErrInvalidName},
		{"find by name", func() (Key, error) { return s.Find("carol") }, "carol", nil},
		{"find by checksum address", func() (Key, error) { return s.Find(added["carol"].Address.Hex()) }, "carol", nil},
		{"find by lower-case address", func() (Key, error) { return s.Find(strings.ToLower(added["alice"].Address.Hex())) }, "alice", nil},
		{"find unknown address", func() (Key, error) { return s.Find("0x0000000000000000000000000000000000000001") }, "", ErrNotFound},
		{"find address without 0x", func() (Key, error) { return s.Find(strings.TrimPrefix(added["alice"].Address.Hex(), "0x")) }, "", ErrNotFound},
		{"find unknown name", func() (Key, error) { return s.Find("nobody") }, "", ErrNotFound},
		{"find garbage", func() (Key, error) { return s.Find("not a name") }, "", ErrNotFound},
	}
	for _, tt := range getTests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := tt.call()
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k != added[tt.want] {
				t.Errorf("got %+v, want %+v", k, added[tt.want])
			}
		})
	}

	t.Run("find prefers a name that looks like an address", func(t *testing.T) {
		addrName := added["carol"].Address.Hex()
		k, err := s.ImportPrivateKey(addrName, knownKey, "pw")
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Find(addrName)
		if err != nil || got != k {
			t.Errorf("Find(%s) = %+v, %v; want the key named so, %+v", addrName, got, err, k)
		}
		if err := s.Delete(addrName, "pw"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		if err := s.Delete("bob_2.x-y", "pw-bob_2.x-y"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get("bob_2.x-y"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get after Delete: %v, want ErrNotFound", err)
		}
		if _, err := os.Stat(added["bob_2.x-y"].Path); !os.IsNotExist(err) {
			t.Errorf("file still there after Delete: %v", err)
		}
		keys, err := s.List()
		if err != nil || len(keys) != 2 || keys[0].Name != "alice" || keys[1].Name != "carol" {
			t.Errorf("List after Delete = %+v, %v", keys, err)
		}
		if err := s.Delete("bob_2.x-y", "pw-bob_2.x-y"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second Delete: %v, want ErrNotFound", err)
		}
	})
}

func TestEmptyList(t *testing.T) {
	s := openStore(t)
	keys, err := s.List()
	if err != nil || keys == nil || len(keys) != 0 {
		t.Errorf("List() on empty store = %#v, %v; want empty non-nil slice", keys, err)
	}
}

func TestWrongPassword(t *testing.T) {
	s := openStore(t)
	k, err := s.Add("alice", "right")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func(pw string) error
	}{
		{"unlock", func(pw string) error {
			priv, err := s.Unlock("alice", pw)
			Zero(priv)
			return err
		}},
		{"export", func(pw string) error { _, err := s.Export("alice", pw); return err }},
		{"delete", func(pw string) error { return s.Delete("alice", pw) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, pw := range []string{"wrong", "", "Right", "right "} {
				if err := tt.call(pw); !errors.Is(err, ErrWrongPassword) {
					t.Errorf("%s with password %q: error = %v, want ErrWrongPassword", tt.name, pw, err)
				}
			}
			if _, err := os.Stat(k.Path); err != nil {
				t.Errorf("key file gone after a wrong password: %v", err)
			}
		})
	}
	t.Run("right password still works", func(t *testing.T) {
		data, err := s.Export("alice", "right")
		if err != nil {
			t.Fatal(err)
		}
		onDisk, _ := os.ReadFile(k.Path)
		if !bytes.Equal(data, onDisk) {
			t.Error("Export did not return the stored file bytes")
		}
	})
}

func TestDuplicateName(t *testing.T) {
	s := openStore(t)
	orig, err := s.Add("alice", "pw")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(orig.Path)
	other, err := keystore.EncryptKey(newKSKey(t, specVectorKey), "x", keystore.LightScryptN, keystore.LightScryptP)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() (Key, error)
	}{
		{"add same name", func() (Key, error) { return s.Add("alice", "pw2") }},
		{"add name differing in case", func() (Key, error) { return s.Add("ALICE", "pw2") }},
		{"import same name", func() (Key, error) { return s.Import("alice", other, "x", "") }},
		{"import private key same name", func() (Key, error) { return s.ImportPrivateKey("alice", knownKey, "pw2") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.call()
			if !errors.Is(err, ErrExists) || !strings.Contains(strings.ToLower(err.Error()), `"alice"`) {
				t.Errorf("error = %v, want ErrExists naming alice", err)
			}
			after, _ := os.ReadFile(orig.Path)
			if !bytes.Equal(before, after) {
				t.Error("existing key file was changed")
			}
			if got := dirNames(t, s.Dir()); len(got) != 1 {
				t.Errorf("directory holds %v, want only alice.json", got)
			}
		})
	}
}

// newKSKey returns a keystore.Key for the hex private key h.
func newKSKey(t *testing.T, h string) *keystore.Key {
	t.Helper()
	priv, err := crypto.HexToECDSA(h)
	if err != nil {
		t.Fatal(err)
	}
	return &keystore.Key{Address: crypto.PubkeyToAddress(priv.PublicKey), PrivateKey: priv}
}

func TestDuplicateAddress(t *testing.T) {
	s := openStore(t)
	if _, err := s.ImportPrivateKey("first", knownKey, "pw"); err != nil {
		t.Fatal(err)
	}
	keyJSON, err := keystore.EncryptKey(newKSKey(t, knownKey), "jsonpw", keystore.LightScryptN, keystore.LightScryptP)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() (Key, error)
	}{
		{"import JSON", func() (Key, error) { return s.Import("second", keyJSON, "jsonpw", "") }},
		{"import private key", func() (Key, error) { return s.ImportPrivateKey("second", "0x"+knownKey, "pw") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.call()
			if !errors.Is(err, ErrExists) {
				t.Fatalf("error = %v, want ErrExists", err)
			}
			if !strings.Contains(err.Error(), `"first"`) || !strings.Contains(err.Error(), knownAddr) {
				t.Errorf("error %q does not name the key %q holding %s", err, "first", knownAddr)
			}
			if _, err := s.Get("second"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(second) = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name  string
		input string
		ok    bool
	}{
		{"simple", "alice", true},
		{"all allowed characters", "aZ09._-", true},
		{"starts with digit", "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23", true},
		{"starts with underscore", "_x", true},
		{"one character", "a", true},
		{"64 characters", strings.Repeat("a", 64), true},
		{"empty", "", false},
		{"65 characters", strings.Repeat("a", 65), false},
		{"leading dot", ".hidden", false},
		{"leading dash", "-flag", false},
		{"dot dot", "..", false},
		{"slash", "a/b", false},
		{"backslash", `a\b`, false},
		{"space", "a b", false},
		{"non-ASCII", "ålice", false},
		{"NUL", "a\x00", false},
		{"colon", "c:x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidName(tt.input)
			if tt.ok != (err == nil) {
				t.Fatalf("ValidName(%q) = %v, want ok=%v", tt.input, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidName) {
				t.Errorf("error %v does not wrap ErrInvalidName", err)
			}
		})
	}

	s := openStore(t)
	for _, tt := range tests {
		if tt.ok {
			continue
		}
		t.Run("store refuses "+tt.name, func(t *testing.T) {
			if _, err := s.Add(tt.input, "pw"); !errors.Is(err, ErrInvalidName) {
				t.Errorf("Add(%q) error = %v, want ErrInvalidName", tt.input, err)
			}
			if _, err := s.ImportPrivateKey(tt.input, knownKey, "pw"); !errors.Is(err, ErrInvalidName) {
				t.Errorf("ImportPrivateKey(%q) error = %v, want ErrInvalidName", tt.input, err)
			}
			if got := dirNames(t, s.Dir()); len(got) != 0 {
				t.Errorf("directory holds %v after refused names", got)
			}
		})
	}
}

func TestImportGethKey(t *testing.T) {
	// What geth writes: a KeyStore account file.
	gethDir := t.TempDir()
	ks := keystore.NewKeyStore(gethDir, keystore.LightScryptN, keystore.LightScryptP)
	acct, err := ks.NewAccount("gethpw")
	if err != nil {
		t.Fatal(err)
	}
	gethJSON, err := os.ReadFile(acct.URL.Path)
	if err != nil {
		t.Fatal(err)
	}

	s := openStore(t)
	t.Run("wrong password", func(t *testing.T) {
		if _, err := s.Import("g", gethJSON, "nope", "new"); !errors.Is(err, ErrWrongPassword) {
			t.Errorf("error = %v, want ErrWrongPassword", err)
		}
		if _, err := s.Get("g"); !errors.Is(err, ErrNotFound) {
			t.Errorf("key stored despite wrong password: %v", err)
		}
	})

	k, err := s.Import("g", gethJSON, "gethpw", "newpw")
	if err != nil {
		t.Fatal(err)
	}
	if k.Address != acct.Address || k.Name != "g" {
		t.Fatalf("Import = %+v, want address %s", k, acct.Address.Hex())
	}

	t.Run("re-encrypted with the new password", func(t *testing.T) {
		priv, err := s.Unlock("g", "newpw")
		if err != nil {
			t.Fatal(err)
		}
		defer Zero(priv)
		if crypto.PubkeyToAddress(priv.PublicKey) != acct.Address {
			t.Error("unlocked key has another address")
		}
		if _, err := s.Unlock("g", "gethpw"); !errors.Is(err, ErrWrongPassword) {
			t.Errorf("old password: %v, want ErrWrongPassword", err)
		}
	})

	t.Run("export decrypts with geth and imports into a geth keystore", func(t *testing.T) {
		exported, err := s.Export("g", "newpw")
		if err != nil {
			t.Fatal(err)
		}
		dk, err := keystore.DecryptKey(exported, "newpw")
		if err != nil {
			t.Fatal(err)
		}
		if dk.Address != acct.Address {
			t.Errorf("DecryptKey(export) address = %s, want %s", dk.Address.Hex(), acct.Address.Hex())
		}
		ks2 := keystore.NewKeyStore(t.TempDir(), keystore.LightScryptN, keystore.LightScryptP)
		a2, err := ks2.Import(exported, "newpw", "newpw")
		if err != nil {
			t.Fatalf("geth KeyStore.Import(export): %v", err)
		}
		if a2.Address != acct.Address {
			t.Errorf("geth imported address %s, want %s", a2.Address.Hex(), acct.Address.Hex())
		}
	})

	t.Run("empty new password keeps the password", func(t *testing.T) {
		s2 := openStore(t)
		if _, err := s2.Import("g", gethJSON, "gethpw", ""); err != nil {
			t.Fatal(err)
		}
		priv, err := s2.Unlock("g", "gethpw")
		if err != nil {
			t.Fatalf("Unlock with the original password: %v", err)
		}
		Zero(priv)
	})
}

func TestImportOtherWriters(t *testing.T) {
	want := addrOf(t, specVectorKey)
	tests := []struct {
		name string
		json string
	}{
		{"spec pbkdf2 vector without address", specPBKDF2Vector},
		{"capitalised Crypto key", strings.Replace(specPBKDF2Vector, `"crypto"`, `"Crypto"`, 1)},
		{"address with 0x", strings.Replace(specPBKDF2Vector, `"id"`, `"address": "`+want.Hex()+`", "id"`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t)
			k, err := s.Import("ext", []byte(tt.json), "testpassword", "")
			if err != nil {
				t.Fatal(err)
			}
			if k.Address != want {
				t.Errorf("address = %s, want %s", k.Address.Hex(), want.Hex())
			}
			// Stored in the standard form with an address field.
			got, err := s.Get("ext")
			if err != nil || got != k {
				t.Errorf("Get = %+v, %v; want %+v", got, err, k)
			}
		})
	}
}

func TestImportBadJSON(t *testing.T) {
	wrongAddr := strings.Replace(specPBKDF2Vector, `"id"`, `"address": "0000000000000000000000000000000000000001", "id"`, 1)
	tests := []struct {
		name    string
		json    string
		wantMsg string
	}{
		{"empty", "", "not a keystore JSON"},
		{"not JSON", "hello", "not a keystore JSON"},
		{"truncated", specPBKDF2Vector[:100], "not a keystore JSON"},
		{"no crypto", `{"address":"2c7536e3605d9c16a7a3d7b1898e529396a65c23","version":3}`, `no "crypto"`},
		{"address does not match key", wrongAddr, "holds the key of"},
		{"unsupported cipher", strings.Replace(specPBKDF2Vector, "aes-128-ctr", "aes-256-gcm", 1), "cipher not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t)
			_, err := s.Import("x", []byte(tt.json), "testpassword", "")
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error = %v, want one containing %q", err, tt.wantMsg)
			}
			if errors.Is(err, ErrWrongPassword) {
				t.Errorf("error %v claims a wrong password", err)
			}
			if got := dirNames(t, s.Dir()); len(got) != 0 {
				t.Errorf("directory holds %v after a failed import", got)
			}
		})
	}
}

func TestImportPrivateKey(t *testing.T) {
	tests := []struct {
		name    string
		hexKey  string
		wantErr bool
	}{
		{"bare", knownKey, false},
		{"0x prefix", "0x" + knownKey, false},
		{"0X prefix and upper case", "0X" + strings.ToUpper(knownKey), false},
		{"surrounding whitespace", " 0x" + knownKey + "\n", false},
		{"empty", "", true},
		{"too short", knownKey[:62], true},
		{"too long", knownKey + "00", true},
		{"non-hex", "zz" + knownKey[2:], true},
		{"zero", strings.Repeat("0", 64), true},
		{"curve order N", "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t)
			k, err := s.ImportPrivateKey("k", tt.hexKey, "pw")
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ImportPrivateKey(%q) succeeded: %+v", tt.hexKey, k)
				}
				if len(tt.hexKey) >= 16 && strings.Contains(err.Error(), strings.TrimSpace(tt.hexKey)[4:16]) {
					t.Errorf("error %q reveals the key", err)
				}
				if got := dirNames(t, s.Dir()); len(got) != 0 {
					t.Errorf("directory holds %v after a failed import", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.Address.Hex() != knownAddr {
				t.Errorf("address = %s, want %s", k.Address.Hex(), knownAddr)
			}
			priv, err := s.Unlock("k", "pw")
			if err != nil {
				t.Fatal(err)
			}
			defer Zero(priv)
			if got := common.Bytes2Hex(crypto.FromECDSA(priv)); got != knownKey {
				t.Errorf("unlocked key = %s, want %s", got, knownKey)
			}
		})
	}
}

func TestCorruptFile(t *testing.T) {
	s := openStore(t)
	good, err := s.Add("good", "pw")
	if err != nil {
		t.Fatal(err)
	}
	valid, _ := os.ReadFile(good.Path)
	noAddr := strings.Replace(string(valid), `"address":"`+strings.ToLower(good.Address.Hex()[2:])+`",`, "", 1)
	if noAddr == string(valid) {
		t.Fatal("test setup: address field not removed")
	}
	tests := []struct {
		name    string
		content string
	}{
		{"truncated", string(valid[:len(valid)/2])},
		{"empty", ""},
		{"not JSON", "not a key\n"},
		{"JSON without crypto", `{"address":"2c7536e3605d9c16a7a3d7b1898e529396a65c23","version":3}`},
		{"no address", noAddr},
		{"bad address", strings.Replace(string(valid), strings.ToLower(good.Address.Hex()[2:]), "xyz", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(s.Dir(), "bad.json")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(path)
			checkErr := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "remove the file or re-import") {
					t.Errorf("%s error = %v, want ErrCorrupt naming %s and the remedy", op, err, path)
				}
			}
			_, err := s.Get("bad")
			checkErr("Get", err)
			_, err = s.Unlock("bad", "pw")
			checkErr("Unlock", err)
			_, err = s.Export("bad", "pw")
			checkErr("Export", err)
			keys, err := s.List()
			checkErr("List", err)
			if len(keys) != 1 || keys[0] != good {
				t.Errorf("List kept %+v, want the readable key %+v", keys, good)
			}
			// The good key can still be found by address and new keys added.
			if k, err := s.Find(good.Address.Hex()); err != nil || k != good {
				t.Errorf("Find(good address) = %+v, %v", k, err)
			}
		})
	}
	t.Run("address field does not match the key", func(t *testing.T) {
		other := addrOf(t, knownKey)
		forged := strings.Replace(string(valid), strings.ToLower(good.Address.Hex()[2:]), strings.ToLower(other.Hex()[2:]), 1)
		path := filepath.Join(s.Dir(), "forged.json")
		if err := os.WriteFile(path, []byte(forged), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		priv, err := s.Unlock("forged", "pw")
		if priv != nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Errorf("Unlock(forged) = %v, %v; want ErrCorrupt naming %s", priv, err, path)
		}
	})
	t.Run("other files are ignored", func(t *testing.T) {
		for _, f := range []string{".tmp-x.json-123", "UTC--2016-03-22T12-57-55.920751759Z--7ef5a6135f1fd6a02593eedc869c6d41d934aef8", "README", ".hidden.json", "bad name.json"} {
			if err := os.WriteFile(filepath.Join(s.Dir(), f), []byte("junk"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Mkdir(filepath.Join(s.Dir(), "sub.json"), 0o700); err != nil {
			t.Fatal(err)
		}
		keys, err := s.List()
		if err != nil || len(keys) != 1 || keys[0] != good {
			t.Errorf("List() = %+v, %v; want only %+v", keys, err, good)
		}
	})
}

func TestZero(t *testing.T) {
	priv, err := crypto.HexToECDSA(knownKey)
	if err != nil {
		t.Fatal(err)
	}
	words := priv.D.Bits()
	Zero(priv)
	if priv.D.Sign() != 0 {
		t.Error("D not zero")
	}
	for i, w := range words[:cap(words)] {
		if w != 0 {
			t.Errorf("word %d of the old scalar storage = %#x, want 0", i, w)
		}
	}
	Zero(nil)
	Zero(&ecdsa.PrivateKey{})
}

func TestReadPassword(t *testing.T) {
	dir := t.TempDir()
	writeFile := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const env = "OGPU_WALLET_TEST_PASSWORD"
	tests := []struct {
		name    string
		file    string
		envVal  string // value of env, "" leaves it empty
		envVar  string
		want    string
		wantErr string
	}{
		{"file LF", writeFile("lf", "secret\nsecond line\n"), "", env, "secret", ""},
		{"file CRLF", writeFile("crlf", "secret\r\nsecond\r\n"), "", env, "secret", ""},
		{"file without newline", writeFile("bare", "sec ret "), "", env, "sec ret ", ""},
		{"empty file", writeFile("empty", ""), "", env, "", ""},
		{"file wins over env", writeFile("wins", "fromfile\n"), "fromenv", env, "fromfile", ""},
		{"missing file", filepath.Join(dir, "missing"), "fromenv", env, "", "missing"},
		{"env", "", "from env\n", env, "from env\n", ""},
		{"no source, not a terminal", "", "", env, "", "--password-file or set the environment variable " + env},
		{"no env var name, not a terminal", "", "", "", "", "use --password-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(env, tt.envVal)
			fakeTerminal(t, false, nil)
			got, err := ReadPassword(tt.file, tt.envVar, "Password: ", false, &bytes.Buffer{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("password = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadPasswordTerminal(t *testing.T) {
	tests := []struct {
		name       string
		confirm    bool
		typed      []string
		want       string
		wantErr    string
		wantPrompt string
	}{
		{"single", false, []string{"pw"}, "pw", "", "Password: \n"},
		{"confirmed", true, []string{"pw", "pw"}, "pw", "", "Password: \nRepeat password: \n"},
		{"mismatch", true, []string{"pw", "px"}, "", "do not match", "Password: \nRepeat password: \n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OGPU_WALLET_TEST_PASSWORD", "")
			fakeTerminal(t, true, tt.typed)
			var out bytes.Buffer
			got, err := ReadPassword("", "OGPU_WALLET_TEST_PASSWORD", "Password: ", tt.confirm, &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
			} else if err != nil || got != tt.want {
				t.Fatalf("ReadPassword = %q, %v; want %q", got, err, tt.want)
			}
			if out.String() != tt.wantPrompt {
				t.Errorf("prompt output = %q, want %q", out.String(), tt.wantPrompt)
			}
		})
	}
}

// fakeTerminal replaces the terminal hooks for one test: stdin is a terminal
// if term is set, and reads return typed in turn.
func fakeTerminal(t *testing.T, term bool, typed []string) {
	t.Helper()
	oldFd, oldIs, oldRead := stdinFd, isTerminal, readTermPassword
	t.Cleanup(func() { stdinFd, isTerminal, readTermPassword = oldFd, oldIs, oldRead })
	stdinFd = func() int { return 99 }
	isTerminal = func(fd int) bool { return term && fd == 99 }
	readTermPassword = func(fd int) ([]byte, error) {
		if len(typed) == 0 {
			t.Fatal("unexpected password read")
		}
		s := typed[0]
		typed = typed[1:]
		return []byte(s), nil
	}
}
