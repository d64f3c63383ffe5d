package cli

import (
	"fmt"
	"net"
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
			s, err := console.New(c, console.Options{})
			if err != nil {
				return err
			}
			l, err := net.Listen("tcp", laddr)
			if err != nil {
				return fmt.Errorf("cannot listen on --laddr %s: %w (pick a free port, e.g. --laddr 127.0.0.1:0)", laddr, err)
			}
			if host, _, _ := net.SplitHostPort(laddr); host != "" {
				if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: the console listens on %s, not loopback: anyone who reaches it reads this node's data\n", l.Addr())
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "console: open %s\n", s.URL(l.Addr()))
			return s.Serve(ctx, l)
		},
	}
	cmd.Flags().String("laddr", "127.0.0.1:8080", "address the console listens on (loopback by default)")
	cmd.Flags().String("node", "http://127.0.0.1:26657", "RPC address of the node to read")
	return cmd
}
