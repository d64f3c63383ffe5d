package p2p

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"

	ethcrypto "github.com/ethereum/go-ethereum/crypto"

	"github.com/ogpu-network/ogpu/types"
)

func frame(payload []byte) []byte {
	var b bytes.Buffer
	writeFrame(&b, payload)
	return b.Bytes()
}

func FuzzReadRequest(f *testing.F) {
	f.Add(frame(request{kind: kindPiece, hash: types.Hash{1}, index: 7}.encode()))
	f.Add(frame(request{kind: kindManifest, hash: types.Hash{2}}.encode()))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 1, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := readRequest(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrProtocol) && err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if got := frame(q.encode()); !bytes.Equal(got, b[:len(got)]) {
			t.Fatalf("re-encoded request %x differs from input %x", got, b)
		}
	})
}

func FuzzReadResponse(f *testing.F) {
	var ok, refused bytes.Buffer
	writeResponse(&ok, statusOK, "", []byte("piece bytes"))
	writeResponse(&refused, statusForbidden, "no", nil)
	f.Add(ok.Bytes())
	f.Add(refused.Bytes())
	f.Add([]byte{0, 0, 0, 3, 0, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, err := readResponse(bytes.NewReader(b), 64)
		if err == nil && len(payload) > 64 {
			t.Fatalf("payload of %d bytes exceeds the limit", len(payload))
		}
	})
}

func FuzzDecodeAdvert(f *testing.F) {
	k, _ := ethcrypto.HexToECDSA("0101010101010101010101010101010101010101010101010101010101010101")
	id, _ := PeerIDOf(&k.PublicKey)
	good, _ := json.Marshal(Advert{
		PeerID: id.String(),
		Addrs:  []string{"/ip4/127.0.0.1/tcp/1"}, Models: []types.Hash{{1}}, Time: 1,
	})
	f.Add(good)
	f.Add([]byte(`{"peer_id":"x","time":1}`))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAdvert(b)
		if err != nil {
			return
		}
		again, _ := json.Marshal(a)
		if len(again) > MaxAdvertBytes {
			return // escaping grew it past the limit: refused on publish
		}
		back, err := DecodeAdvert(again)
		if err != nil || !reflect.DeepEqual(back, a) {
			t.Fatalf("advert does not round-trip: %v", err)
		}
	})
}
