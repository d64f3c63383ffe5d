package cli

import (
	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/devnet"
)

func newDevnetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devnet",
		Short: "Run the market rounds end to end on an in-process single-validator chain",
		Long: `Start a single-validator chain in a temporary home, fund demo accounts in
genesis and make transfers; then start a validator agent, provider agents and
a client on loopback libp2p and run the market rounds, every step printed with
the chain's events, the balances and the supply check (everything adds up to
the cap) before and after each. The devnet audits every agreed task
(audit_rate_bps 10000) so that you can watch it; a network audits 1 in 20:

  1. an LLM job (r=2) on the stories260K model with llama.cpp whose two
     winners agree, are audited by the validator agent and paid, beside a
     canary the validator agent posts that looks like the client's job;
  2. the same job with a provider restarted with --devnet-lie: it changes a
     token, the validator's re-generation differs from it, and it is
     slashed and tombstoned while the client gets the verified text;
  3. a cartel holding both slots of a job lies the same way: the random
     audit re-executes it and both are slashed;
  4. a lone bidder's result is audited before it is paid (fewer than r
     providers: audited, not agreed);
  5. an encrypted 3-stage CKKS pipeline job whose providers never see the
     data; the client decrypts it and compares it with the plaintext model;
  6. a split inference job: the model cut into 2 layer slices, each served
     by 2 providers (2 replica chains), one stage-0 provider lying; the text
     equals the whole model's, the chain disputes the stage whose outputs
     differ on the same input, the validator agent re-executes it, the liar
     is slashed, the next stage is held until that verdict and audited on
     the honest chain. Split inference is not confidential;
  7. a trip through the Ethereum bridge on a simulated Ethereum;
  8. a job posted through the web console's form;
  9. the OpenAI-compatible gateway over a session lease, whose lying
     provider is caught and slashed;
  10. a fine-tune job: two providers train the model's LM head on a text the
     client wrote, agree, and the client generates with the model (the
     text's phrase appears); then a provider perturbs one training step,
     the step-bisection game locates it, the validator re-executes that one
     step and the liar is slashed.

Nothing outside the temporary home is touched.`,
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
