package worker

import "syscall"

// setDeathSignal asks the kernel to SIGKILL a task's direct child when the
// worker dies without cleaning up (kill -9, OOM killer, crash). Otherwise a
// crashed worker leaves its task processes running while the queue hands
// the retry run to another worker, and both copies write to shared state.
//
// Linux delivers the signal when the *thread* that forked the child exits,
// not the process. The Go runtime does not retire threads except those a
// goroutine locked with runtime.LockOSThread and never unlocked, which
// runProcess does not do, so for the worker this is "when the worker dies".
//
// Only the direct child is covered: processes it started in turn
// (backgrounded grandchildren) are re-parented and may survive a worker
// crash; a normal run end or cancellation kills the whole process group.
func setDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
