package p2p

import (
	"fmt"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/ogpu-network/ogpu/runtime/blobstore"
)

// BenchmarkFetch fetches a 32 MiB blob in 1 MiB pieces over loopback from
// one or two holders (Parallel 4), connected over TCP (Noise, yamux) or
// QUIC. MB/s counts blob bytes; each iteration deletes the local copy
// first.
func BenchmarkFetch(b *testing.B) {
	const size = 32 << 20
	data := randBytes(size, 9)
	for _, transport := range []string{"tcp", "quic"} {
		for _, n := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/peers=%d", transport, n), func(b *testing.B) {
				c := newHost(b, blobstore.DefaultPieceSize)
				var peers []peer.ID
				var hash [32]byte
				for range n {
					h := newHost(b, blobstore.DefaultPieceSize)
					hash = put(b, h, data)
					var addrs []string
					for _, a := range h.Addrs() {
						if strings.Contains(a, "/"+transport) {
							addrs = append(addrs, a)
						}
					}
					if err := c.ConnectPeer(testCtx(b), h.ID(), addrs); err != nil {
						b.Fatal(err)
					}
					peers = append(peers, h.ID())
				}
				ctx := testCtx(b)
				b.SetBytes(size)
				for b.Loop() {
					b.StopTimer()
					if err := c.store.Delete(hash); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if _, err := c.Fetch(ctx, hash, FetchOptions{Peers: peers}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
