package main

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"syscall"

	"github.com/quivermq/quiver/core/kernel"
)

// explainStart turns a start-up failure into what a person can act on:
// one line per problem that names the key or the fix, without fx's
// dependency chain (kept, as a last line, under log.level=debug).
func explainStart(err error, plan *kernel.Plan) error {
	if err == nil {
		return nil
	}
	short := shortStartError(err, plan)
	if plan != nil && plan.Log.Level == "debug" && short != err { //nolint:errorlint // identity: was the error shortened at all
		return fmt.Errorf("%w\n(debug) %v", short, err)
	}
	return short
}

func shortStartError(err error, plan *kernel.Plan) error {
	var pe *kernel.PlanError
	var le *kernel.DirLockedError
	var me *kernel.EngineMismatchError
	var oe *net.OpError
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.As(err, &le):
		return le
	case errors.As(err, &me):
		return me
	case errors.Is(err, syscall.EADDRINUSE) && errors.As(err, &oe) && oe.Addr != nil:
		addr := oe.Addr.String()
		if key := plan.AddrKey(addr); key != "" {
			return fmt.Errorf("%s %s is in use (set %s or stop the other process)", key, addr, key)
		}
		return fmt.Errorf("address %s is in use (stop the other process, or listen elsewhere)", addr)
	}
	return rootCause(err)
}

// rootCause strips the errors fx and dig wrap around a constructor's or
// hook's own error ("could not build arguments for function ...").
func rootCause(err error) error {
	for {
		t := reflect.TypeOf(err)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if pkg := t.PkgPath(); !strings.HasPrefix(pkg, "go.uber.org/dig") && !strings.HasPrefix(pkg, "go.uber.org/fx") {
			return err
		}
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
