package main

// mq admin's exit codes, confirmations and connection hints.
//
// Exit codes (docs/guide/admin.md): 0 the command did what it says; 1 it
// failed (unknown topic or group, refused by the broker, unreachable
// cluster); 2 usage (unknown command or subcommand, unknown flag, missing
// required flag, bad value, a Quiver-named destructive command without
// --yes, --confirm without a terminal).
//
// Nothing asks unless --confirm is given (mqadmin never asks): mqadmin's
// names run at once, Quiver's destructive commands want --yes.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// usageError is a command line the command cannot run: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }
func (e usageError) ExitCode() int { return 2 }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitCodeOf is the process exit code of a command's error.
func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

// usageChecks makes every command under root report argument and flag
// problems as usageErrors: cobra's own checks (flag parsing, Args,
// required flags) return plain errors otherwise. A command group given an
// unknown subcommand (mq admin topic lst) is a usage error too, where
// cobra would print the group's help and exit 0. Destructive commands
// (those with --yes) get --confirm.
func usageChecks(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.RunE == nil && c.Run == nil && c.HasSubCommands() {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(c *cobra.Command, args []string) error {
				if len(args) == 0 {
					return c.Help()
				}
				return unknownCommand(c, args[0])
			}
		} else if c.RunE != nil {
			if args := c.Args; args != nil {
				c.Args = func(c *cobra.Command, a []string) error {
					if err := args(c, a); err != nil {
						return usageError{err}
					}
					return nil
				}
			}
			if c.Flags().Lookup("yes") != nil && c.Flags().Lookup("confirm") == nil {
				c.Flags().Bool("confirm", false, "ask before acting (needs a terminal; nothing asks without it)")
			}
			pre := c.PreRunE
			c.PreRunE = func(c *cobra.Command, a []string) error {
				if err := c.ValidateRequiredFlags(); err != nil {
					return usageError{err}
				}
				if err := c.ValidateFlagGroups(); err != nil {
					return usageError{err}
				}
				if pre != nil {
					return pre(c, a)
				}
				return nil
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// unknownCommand is the usage error for a subcommand name that c does not
// have, with cobra's suggestions.
func unknownCommand(c *cobra.Command, name string) error {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default
	}
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	} else {
		msg += "; see " + c.CommandPath() + " --help"
	}
	return usageError{errors.New(msg)}
}

// confirm decides whether a destructive command goes ahead. Nothing asks
// unless --confirm is given: then a terminal is asked (y/yes goes on) and
// anything else is a usage error. Without --confirm, mqadmin's names go
// ahead as mqadmin does; Quiver's names go ahead with --yes and are a
// usage error naming --yes otherwise. Tests hand an answer through SetIn.
func confirm(c *cobra.Command, yes bool, what string) error {
	ask := false
	if f := c.Flags().Lookup("confirm"); f != nil {
		ask = f.Value.String() == "true"
	}
	if !ask {
		if yes || isMqadminNamed(c) {
			return nil
		}
		return usagef("%s: add --yes (or --confirm to be asked on a terminal)", what)
	}
	in := c.InOrStdin()
	if in == os.Stdin && !isTerminal(os.Stdin) {
		return usagef("%s: --confirm needs a terminal to ask; drop it to run unattended", what)
	}
	fmt.Fprintf(c.ErrOrStderr(), "%s? [y/N] ", what)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("confirmation: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errors.New(what + ": not confirmed")
}

// isMqadminNamed tells a command of mqadmin's names (mq admin deleteTopic)
// from Quiver's (mq admin topic delete).
func isMqadminNamed(c *cobra.Command) bool {
	for ; c != nil; c = c.Parent() {
		if c.GroupID == "mqadmin" {
			return true
		}
	}
	return false
}

// connHint adds to an error from dialling the cluster which address was
// tried and how to name another name server.
func connHint(err error, namesrv string) error {
	if err == nil {
		return nil
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return err
	}
	addr := namesrv
	if op.Addr != nil {
		addr = op.Addr.String()
	}
	cause := op.Err
	for {
		u := errors.Unwrap(cause)
		if u == nil {
			break
		}
		cause = u
	}
	if addr == namesrv || strings.HasSuffix(namesrv, addr) {
		return fmt.Errorf("cannot reach the name server at %s (%v); name another with --namesrv host:port or QUIVER_NAMESRV: %w", addr, cause, errWrapped{err})
	}
	return fmt.Errorf("cannot reach broker %s (%v), registered with the name server %s: %w", addr, cause, namesrv, errWrapped{err})
}

// errWrapped keeps an error matchable without repeating its long text.
type errWrapped struct{ err error }

func (e errWrapped) Error() string { return "dial failed" }
func (e errWrapped) Unwrap() error { return e.err }
