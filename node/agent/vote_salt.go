package agent

import (
	"crypto/ecdsa"
	"encoding/binary"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/types"
)

// voteSalt is the salt of the validator's sealed vote on one question
// (kind and the fields naming it, which must tell one vote from every
// other: a later dispute of the same stage includes its deadline) answered
// with answer: keccak256 of a domain, the operator's private key and the
// vote. An opened salt is public: were it reused for another vote with the
// same answer, anyone could test that answer against the other seal. It is derived rather
// than drawn so that a validator that sealed a vote and then crashed
// re-derives the same salt after its restart and can still open the vote
// (a sealed vote never opened is slashed like a missing one); nothing
// needs to be written to disk first. Nobody without the key can compute
// it, so a seal still hides its answer until it is opened; an opened salt
// tells nothing about the key or about any other vote's salt.
func voteSalt(key *ecdsa.PrivateKey, kind string, answer []byte, fields ...uint64) types.Hash {
	var d [32]byte
	key.D.FillBytes(d[:])
	buf := make([]byte, 0, 64+len(kind)+8*len(fields)+len(answer))
	buf = append(buf, "ogpu/vote-salt/v1/"...)
	buf = append(buf, kind...)
	buf = append(buf, 0)
	buf = append(buf, d[:]...)
	for _, f := range fields {
		buf = binary.BigEndian.AppendUint64(buf, f)
	}
	buf = append(buf, answer...)
	return types.Hash(ethcrypto.Keccak256Hash(buf))
}
