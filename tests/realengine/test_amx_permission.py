"""Every Python process of the engine's venv holds Linux's AMX tile permission (why: in
hack/vllm-amx-permission.py; without it a short first completion killed the worker with SIGILL
on this machine's AMX CPU)."""

from __future__ import annotations

import subprocess

import pytest
from realengine import engine

# arch_prctl: ARCH_GET_XCOMP_SUPP (what the CPU and kernel support), ARCH_GET_XCOMP_PERM (what
# this process may use); bit 18 is XFEATURE_XTILEDATA, the AMX tiles.
MASKS = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for code in (0x1021, 0x1022):
    mask = ctypes.c_ulong(0)
    print(libc.syscall(158, code, ctypes.byref(mask)), mask.value)
"""
TILES = 1 << 18


def test_the_engines_python_may_use_amx_tiles_where_the_cpu_has_them(
    engine_installed: None,
) -> None:
    done = subprocess.run(
        [str(engine.PYTHON), "-c", MASKS],
        env=engine.clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    (supp_rc, supported), (perm_rc, permitted) = (
        tuple(int(v) for v in line.split()) for line in done.stdout.splitlines()
    )
    if supp_rc != 0 or not supported & TILES:
        pytest.skip("this CPU (or kernel) has no AMX tiles: nothing to ask for")
    assert perm_rc == 0
    assert permitted & TILES, "the engine's processes would die of SIGILL on an AMX kernel"
