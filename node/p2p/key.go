package p2p

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/types"
)

// LoadOrCreateKey reads the secp256k1 node key stored as hex at path, or
// creates one (mode 0600) if the file does not exist. The key is the node's
// identity: its peer id and Ethereum address.
func LoadOrCreateKey(path string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		k, err := ethcrypto.HexToECDSA(strings.TrimSpace(string(b)))
		clear(b)
		if err != nil {
			return nil, fmt.Errorf("node key %s is corrupt (%v): restore it from a backup, or delete it to create a new identity (the peer id and address will change)", path, err)
		}
		return k, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("cannot read node key: %w", err)
	}
	k, err := ethcrypto.GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("cannot create node key: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".nodekey-*")
	if err != nil {
		return nil, fmt.Errorf("cannot create node key: %w", err)
	}
	defer os.Remove(f.Name())
	b = ethcrypto.FromECDSA(k)
	_, err = fmt.Fprintf(f, "%x\n", b)
	clear(b)
	if err == nil {
		err = f.Sync()
	}
	if e := f.Close(); err == nil {
		err = e
	}
	// A hard link, unlike a rename, fails if another process created the
	// key meanwhile; then that key wins.
	if err == nil {
		err = os.Link(f.Name(), path)
		if errors.Is(err, fs.ErrExist) {
			return LoadOrCreateKey(path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot create node key: %w", err)
	}
	return k, nil
}

// libp2pKey converts a go-ethereum key to a libp2p one (the same curve).
func libp2pKey(k *ecdsa.PrivateKey) (crypto.PrivKey, error) {
	if k == nil || k.Curve != ethcrypto.S256() {
		return nil, errors.New("node key must be a secp256k1 key")
	}
	b := ethcrypto.FromECDSA(k)
	defer clear(b)
	return crypto.UnmarshalSecp256k1PrivateKey(b)
}

// PeerIDOf returns the peer id of a secp256k1 public key.
func PeerIDOf(key *ecdsa.PublicKey) (peer.ID, error) {
	if key == nil || key.Curve != ethcrypto.S256() {
		return "", errors.New("peer id: not a secp256k1 public key")
	}
	pk, err := crypto.UnmarshalSecp256k1PublicKey(ethcrypto.CompressPubkey(key))
	if err != nil {
		return "", fmt.Errorf("peer id: %w", err)
	}
	return peer.IDFromPublicKey(pk)
}

// AddressOf returns the Ethereum address of the secp256k1 key that id
// embeds. Peer ids of secp256k1 keys are identity multihashes of the key, so
// no contact with the peer is needed. Other key types are an error.
func AddressOf(id peer.ID) (types.Address, error) {
	pk, err := id.ExtractPublicKey()
	if err != nil {
		return types.Address{}, fmt.Errorf("peer id %q does not embed a public key (%v): only secp256k1 peers have an address", id, err)
	}
	if pk.Type() != pb.KeyType_Secp256k1 {
		return types.Address{}, fmt.Errorf("peer id %s has a %s key: only secp256k1 peers have an address", id, pk.Type())
	}
	raw, err := pk.Raw()
	if err != nil {
		return types.Address{}, err
	}
	pub, err := ethcrypto.DecompressPubkey(raw)
	if err != nil {
		return types.Address{}, fmt.Errorf("peer id %s: %w", id, err)
	}
	return ethcrypto.PubkeyToAddress(*pub), nil
}
