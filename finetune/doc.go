// Package finetune is the state machine of the fine-tune step-bisection
// game (issue 16; research/protocol-threats.md §3 lists the attacks it
// answers, T1–T16, and the rules it must have).
//
// Providers of a fine-tune job commit, beside their final model hash, the
// root of a Merkle tree over their per-step checkpoint hashes (tree.go).
// When the slots of one job stage end with different roots, the market
// opens games between the groups of slots sharing a root (game.go; more
// than two groups play a knockout bracket, bracket.go): in each game every
// round each group opens the c−1 evenly spaced interior checkpoints of
// the disputed interval (lo, hi) against its root, anyone may relay an
// opening, and the interval shrinks to the first sub-interval where the
// groups disagree, until hi = lo + 1. A group that does not open by the
// round's deadline loses. Then validators re-execute step hi from the
// agreed checkpoint h_lo and vote, sealed then opened (vote.go): the
// verdict convicts every claim that differs from their h*.
//
// It is deterministic like escrow and market: it reads and writes a
// store.KV and nothing else. The only money it moves is the voters'
// vote_slash_bps for a missed or contrary vote (through escrow, as
// session disputes do); the market, which owns jobs, stakes and provider
// slashes, opens games (Keeper.OpenGame) and acts on the decided ones
// that Keeper.EndBlock, Keeper.OpenVote and Keeper.Decide return.
package finetune
