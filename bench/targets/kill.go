package targets

import (
	"os/exec"
	"syscall"
)

// killGroup kills what is left of cmd's process group (see childAttr).
func killGroup(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
