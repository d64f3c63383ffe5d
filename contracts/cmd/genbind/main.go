// Command genbind writes contracts/bindings.go, the abigen v2 Go bindings of
// every contract in contracts/artifacts/*.json (written by build.js), using
// go-ethereum's abigen as a library: no abigen binary, and the same output as
// `abigen --v2`. Run it from the repository root or from contracts/
// (go generate ./contracts/ does the latter). -artifacts and -out read and
// write elsewhere (scripts/contracts-check.sh compares without writing).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi/abigen"
)

type artifact struct {
	ContractName string          `json:"contractName"`
	ABI          json.RawMessage `json:"abi"`
	Bytecode     string          `json:"bytecode"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "genbind:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := "contracts"
	if _, err := os.Stat(filepath.Join(dir, "artifacts")); err != nil {
		dir = "."
	}
	artDir := flag.String("artifacts", filepath.Join(dir, "artifacts"), "folder of build.js's <Contract>.json artifacts")
	out := flag.String("out", filepath.Join(dir, "bindings.go"), "Go file to write")
	flag.Parse()
	files, err := filepath.Glob(filepath.Join(*artDir, "*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no *.json in %s: run it from the repository root or contracts/, after node build.js", *artDir)
	}
	sort.Strings(files)
	var types, abis, bins []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var a artifact
		if err := json.Unmarshal(raw, &a); err != nil {
			return fmt.Errorf("%s: %v", f, err)
		}
		if a.ContractName == "" || len(a.ABI) == 0 {
			return fmt.Errorf("%s: no contractName or abi: rebuild it with node build.js", f)
		}
		if !strings.HasPrefix(a.Bytecode, "0x") || len(a.Bytecode) <= 2 {
			return fmt.Errorf("%s: no bytecode (abstract contract or interface?): only deployable contracts belong in src/", f)
		}
		types = append(types, a.ContractName)
		abis = append(abis, string(a.ABI))
		bins = append(bins, strings.TrimPrefix(a.Bytecode, "0x"))
	}
	src, err := abigen.BindV2(types, abis, bins, "contracts", nil, nil)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, []byte(src), 0o644); err != nil {
		return err
	}
	fmt.Printf("genbind: %s (%s)\n", *out, strings.Join(types, ", "))
	return nil
}
