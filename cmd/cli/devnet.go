package cli

import (
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/devnet"
)

func newDevnetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devnet",
		Short: "Run a market round end to end on an in-process single-validator chain",
		Long: `Start a single-validator chain in a temporary home, fund demo accounts in
genesis and make transfers; then start three provider agents, a validator
agent and a client on loopback libp2p, and run two LLM jobs (r=2) on the
stories260K model with llama.cpp: one whose two winners agree and are paid,
and one where a provider started with --devnet-lie changes a token, the
validator's re-generation differs from it, and the liar is slashed. Every step
is printed, with balances and the supply check before and after. Nothing
outside the temporary home is touched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var o devnet.Options
			o.Keep, _ = cmd.Flags().GetBool("keep")
			o.Model, _ = cmd.Flags().GetString("model")
			o.Threads, _ = cmd.Flags().GetInt("threads")
			ctx, stop := waitCtx(cmd)
			defer stop()
			_, err := devnet.Run(ctx, cmd.OutOrStdout(), o)
			return err
		},
	}
	cmd.Flags().Bool("keep", false, "keep the temporary home afterwards and print its path")
	cmd.Flags().String("model", "", "GGUF model the providers serve (default: stories260K.gguf from $OGPU_MODELS or ../shared/models)")
	cmd.Flags().Int("threads", 1, "llama.cpp threads per context (every agent runs its own)")
	return cmd
}
