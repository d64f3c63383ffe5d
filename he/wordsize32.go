//go:build 386 || arm || mips || mipsle

package he

// CKKS evaluation (lattigo) is only deterministic on 64-bit builds, so he
// refuses to compile for 32-bit architectures; `make wordsize` checks that
// a GOARCH=386 build of this package fails with the message below. params.go
// keeps a word-size assertion for any other 32-bit GOARCH and NewParams a
// runtime check (ErrNot64Bit).
var _ = he_refuses_32_bit_builds__CKKS_evaluation_is_only_deterministic_on_64_bit_builds__build_for_amd64_or_arm64
