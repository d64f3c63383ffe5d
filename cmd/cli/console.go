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
			"It prints the URL to open, with a one-time token in its #fragment; actions need that token.",
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
