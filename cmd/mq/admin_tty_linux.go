package main

import (
	"os"
	"syscall"
	"unsafe"
)

// isTerminal reports whether r is an interactive terminal (TCGETS
// succeeds: /dev/null, pipes and files fail it).
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
