package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ogpu-network/ogpu/console"
	"github.com/ogpu-network/ogpu/node"
)

// newConsoleCmd is `ogpud console`: the web console (explorer and job
// pages) on a node's RPC, on loopback by default.
func newConsoleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console (explorer, job timelines, live updates) for a node",
		Long: "Serves the web console on --laddr (loopback by default), reading the node at --node.\n" +
			"It prints the URL to open, with a one-time token in its #fragment; actions need that token.\n" +
			"It holds no key: to post jobs from the page, run `ogpu console --from NAME` instead.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			laddr, _ := cmd.Flags().GetString("laddr")
			nodeAddr, _ := cmd.Flags().GetString("node")
			c, err := node.Dial(nodeAddr)
			if err != nil {
				return err
			}
			if _, err := c.RPC.Status(cmd.Context()); err != nil {
				return c.Unreachable(err)
			}
			s, l, err := console.Open(c, console.Options{}, laddr, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return s.Serve(ctx, l)
		},
	}
	cmd.Flags().String("laddr", "127.0.0.1:8080", "address the console listens on (loopback by default)")
	cmd.Flags().String("node", "http://127.0.0.1:26657", "RPC address of the node to read")
	return cmd
}

// newClientConsoleCmd is `ogpu console`: the console of a client account
// whose key this process unlocks, so that its page can post and follow
// jobs and close sessions.
func newClientConsoleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve your web console: post and follow jobs, sessions and budget, signed here with --from's key",
		Long: "Serves the web console on --laddr (loopback by default) with --from's key unlocked in this process:\n" +
			"its page (/client) posts LLM jobs for the --model models, follows them live to settlement, cancels\n" +
			"them and closes sessions. The browser never sees the key; it prints the URL to open, with a one-time\n" +
			"token in its #fragment that every action needs. Without --model it offers the model most providers serve.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := waitCtx(cmd)
			defer stop()
			cl, closeHost, err := clientSession(cmd, ctx)
			if err != nil {
				return err
			}
			defer closeHost()
			specs, _ := cmd.Flags().GetStringArray("model")
			models, err := console.ClientModels(ctx, cl.Chain, specs)
			if err != nil {
				return err
			}
			laddr, _ := cmd.Flags().GetString("laddr")
			s, l, err := console.Open(cl.Chain, console.Options{Client: console.ClientOf(ctx, cl, models, cl.Logger)}, laddr, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "console: posting as %s; your page is /client\n", cl.Address().Hex())
			return s.Serve(ctx, l)
		},
	}
	f := cmd.Flags()
	f.String("laddr", "127.0.0.1:8080", "address the console listens on (loopback by default)")
	f.String("from", "", "name or address of the key that signs the page's actions (required)")
	f.StringArray("model", nil, "model the page posts jobs for: NAME=FILE.gguf, NAME=sha256:HEX or FILE.gguf (repeatable)")
	addP2PFlags(cmd, []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"})
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// addConsoleFlag adds --console, the address of a process's own console
// ("" = none).
func addConsoleFlag(cmd *cobra.Command, what string) {
	cmd.Flags().String("console", "", "serve the web console ("+what+") on this address, e.g. 127.0.0.1:8080 (loopback unless you mean otherwise; off by default); it prints the URL to open, with its token")
}

// startConsole serves the console of --console, if set, until ctx ends,
// with the process's parts in o; a listen error stops the command, a later
// one is printed.
func startConsole(ctx context.Context, cmd *cobra.Command, c *node.Client, o console.Options) error {
	laddr, _ := cmd.Flags().GetString("console")
	if laddr == "" {
		return nil
	}
	s, l, err := console.Open(c, o, laddr, cmd.OutOrStdout(), cmd.ErrOrStderr())
	if err != nil {
		return fmt.Errorf("--console: %w", err)
	}
	go func() {
		if err := s.Serve(ctx, l); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "console stopped: %v\n", err)
		}
	}()
	return nil
}
