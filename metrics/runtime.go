package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Series of the runtime any agent process runs: blob transfers over
// libp2p (node/p2p's OnBlobBytes hook) and CKKS stage evaluation (the
// provider's OnStageEvaluated hook).
var (
	blobBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "blob_bytes_total",
		Help: "Bytes of blob pieces sent to peers (served) or fetched from them and verified (fetched); manifests and framing not counted."},
		[]string{"direction"})
	heStage = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "he_stage_seconds",
		Help:    "Time a provider took to evaluate one CKKS pipeline stage on ciphertexts (decode, evaluate, encode), by parameter preset.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"preset"})
)

func runtimeCollectors() []prometheus.Collector { return []prometheus.Collector{blobBytes, heStage} }

// ObserveBlobBytes counts n bytes of blob pieces served to a peer or
// fetched from one (p2p.Config.OnBlobBytes).
func ObserveBlobBytes(served bool, n int) {
	if n <= 0 {
		return
	}
	dir := "fetched"
	if served {
		dir = "served"
	}
	blobBytes.WithLabelValues(dir).Add(float64(n))
}

// ObserveHEStage records one CKKS stage evaluation of preset that took d
// (agent.ProviderConfig.OnStageEvaluated). Presets are the he package's
// fixed set: the evaluator refuses any other.
func ObserveHEStage(preset string, d time.Duration) {
	if d <= 0 {
		return
	}
	if len(preset) > 32 {
		preset = "other"
	}
	heStage.WithLabelValues(preset).Observe(d.Seconds())
}
