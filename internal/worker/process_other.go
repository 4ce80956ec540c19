//go:build !linux

package worker

import "syscall"

// setDeathSignal is a no-op where the kernel offers no parent-death signal;
// task processes of a crashed worker then survive it (see the Linux
// variant).
func setDeathSignal(*syscall.SysProcAttr) {}
