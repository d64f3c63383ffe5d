// Package cli builds the ogpud (node) and ogpu (wallet) commands. Each
// command is made by a constructor, writes to cmd.OutOrStdout(), and keeps no
// package globals, so tests run them in-process against a real node.
package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// output prints v as JSON when --output json is set, else through text.
func output(cmd *cobra.Command, v any, text func(w io.Writer)) error {
	format, _ := cmd.Flags().GetString("output")
	switch format {
	case "json":
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "", "text":
		text(cmd.OutOrStdout())
		return nil
	default:
		return fmt.Errorf("unknown --output %q: use text or json", format)
	}
}

// bindViper makes every flag of cmd readable through v, overridable by an
// OGPU_* environment variable (dots and dashes become underscores) and by
// the config file, in the order flag > environment > file > default.
func bindViper(cmd *cobra.Command, v *viper.Viper, configFile string) error {
	v.SetEnvPrefix("OGPU")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()
	if configFile != "" {
		if _, err := os.Stat(configFile); err == nil {
			v.SetConfigFile(configFile)
			if err := v.ReadInConfig(); err != nil {
				return fmt.Errorf("cannot read config %s: %w", configFile, err)
			}
		}
	}
	var bindErr error
	bind := func(f *pflag.Flag) {
		if err := v.BindPFlag(f.Name, f); err != nil && bindErr == nil {
			bindErr = err
		}
	}
	cmd.Flags().VisitAll(bind)
	cmd.InheritedFlags().VisitAll(bind)
	return bindErr
}

// expandHome turns a leading ~ into the user's home directory.
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}
