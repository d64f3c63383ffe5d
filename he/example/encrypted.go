package example

import (
	"fmt"
	"math"

	"github.com/ogpu-network/ogpu/he"
)

// EncryptedAccuracy runs the first n examples of d through m on
// ciphertexts, the way a pipeline job does: it generates a fresh client key
// for the model's preset and width, hands the evaluator the evaluation
// keys as the bytes a provider receives, encrypts each example, evaluates
// every stage with the ciphertext passed between stages in its wire
// format, and decrypts. It returns the accuracy of the decrypted
// predictions (argmax) against the labels, the largest absolute difference
// between a decrypted output and he.Model.Forward's, and how many of the n
// predictions equal the plaintext ones.
func EncryptedAccuracy(m *he.Model, d Dataset, n int) (acc float64, maxAbsErr float64, agree int, err error) {
	if n < 1 || n > d.Len() {
		return 0, 0, 0, fmt.Errorf("example: cannot run %d encrypted examples of a set of %d: use 1 to %d", n, d.Len(), d.Len())
	}
	if err := m.Validate(); err != nil {
		return 0, 0, 0, err
	}
	sk, ek, err := he.GenerateKeys(m.Preset, m.LogSlots)
	if err != nil {
		return 0, 0, 0, err
	}
	blob, err := ek.Marshal()
	if err != nil {
		return 0, 0, 0, err
	}
	if ek, err = he.UnmarshalEvalKeys(blob); err != nil {
		return 0, 0, 0, err
	}
	ev, err := he.NewEvaluator(m, ek)
	if err != nil {
		return 0, 0, 0, err
	}
	right := 0
	for i := range n {
		want, err := m.Forward(d.X[i])
		if err != nil {
			return 0, 0, 0, fmt.Errorf("example: example %d: %w", i, err)
		}
		got, err := runEncrypted(sk, ev, d.X[i], m.Outputs())
		if err != nil {
			return 0, 0, 0, fmt.Errorf("example: example %d: %w", i, err)
		}
		for k := range want {
			maxAbsErr = max(maxAbsErr, math.Abs(got[k]-want[k]))
		}
		p := Argmax(got)
		if p == Argmax(want) {
			agree++
		}
		if p == d.Y[i] {
			right++
		}
	}
	return float64(right) / float64(n), maxAbsErr, agree, nil
}

// runEncrypted encrypts x, evaluates every stage, each taking the previous
// one's output as encoded bytes, and decrypts the first outputs values.
func runEncrypted(sk *he.SecretKey, ev *he.Evaluator, x []float64, outputs int) ([]float64, error) {
	ct, err := sk.Encrypt(x)
	if err != nil {
		return nil, err
	}
	for s := range ev.Stages() {
		bz, err := ct.Marshal()
		if err != nil {
			return nil, err
		}
		if ct, err = he.UnmarshalCiphertext(bz); err != nil {
			return nil, err
		}
		if ct, err = ev.EvalStage(s, ct); err != nil {
			return nil, err
		}
	}
	return sk.Decrypt(ct, outputs)
}
