package wallet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// Terminal access, replaced in tests.
var (
	stdinFd          = func() int { return int(os.Stdin.Fd()) }
	isTerminal       = term.IsTerminal
	readTermPassword = term.ReadPassword
)

// ReadPassword resolves a password for the CLI from the first source that is
// set:
//
//  1. the file passwordFile, if passwordFile is not empty: its first line,
//     with the trailing "\n" or "\r\n" stripped (an empty first line gives an
//     empty password);
//  2. the environment variable envVar, if envVar is not empty and the
//     variable is set to a non-empty value;
//  3. a prompt on the terminal: prompt is written to promptOut (os.Stderr if
//     nil) and the password is read from stdin without echo. If confirm is
//     set, the password is asked for twice and both entries must match.
//
// If stdin is not a terminal and neither of the other sources is set, it
// returns an error saying to use --password-file or envVar.
func ReadPassword(passwordFile, envVar, prompt string, confirm bool, promptOut io.Writer) (string, error) {
	if passwordFile != "" {
		return readPasswordFile(passwordFile)
	}
	if envVar != "" {
		if v := os.Getenv(envVar); v != "" {
			return v, nil
		}
	}
	fd := stdinFd()
	if !isTerminal(fd) {
		if envVar == "" {
			return "", errors.New("no password given and stdin is not a terminal to prompt on; use --password-file")
		}
		return "", fmt.Errorf("no password given and stdin is not a terminal to prompt on; use --password-file or set the environment variable %s", envVar)
	}
	if promptOut == nil {
		promptOut = os.Stderr
	}
	pw, err := promptPassword(fd, prompt, promptOut)
	if err != nil {
		return "", err
	}
	if !confirm {
		return pw, nil
	}
	again, err := promptPassword(fd, "Repeat password: ", promptOut)
	if err != nil {
		return "", err
	}
	if pw != again {
		return "", errors.New("the passwords do not match; try again")
	}
	return pw, nil
}

// readPasswordFile returns the first line of the file at path without its
// line ending.
func readPasswordFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read password file: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 64<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password file %s: %w", path, err)
	}
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	return line, nil
}

// promptPassword writes prompt to out and reads a password from the terminal
// fd without echo.
func promptPassword(fd int, prompt string, out io.Writer) (string, error) {
	if _, err := io.WriteString(out, prompt); err != nil {
		return "", fmt.Errorf("write password prompt: %w", err)
	}
	b, err := readTermPassword(fd)
	// The typed newline is not echoed; end the prompt line ourselves.
	_, _ = io.WriteString(out, "\n")
	if err != nil {
		return "", fmt.Errorf("read password from terminal: %w", err)
	}
	pw := string(b)
	clear(b)
	return pw, nil
}
