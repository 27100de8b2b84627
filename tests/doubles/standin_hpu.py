"""TEST DOUBLE, not Habana's software: `habana_frameworks.torch.hpu` of the stand-in engine image.

The warmup runner asks the engine image how many HPUs it sees before it starts the engine
(warmgate/warmup/engine/facts.py). The stand-in engine image (`warmgate-standin-engine`, built by
warmgate/devcluster/images.py) installs this file as that module, so a Job on the local
cluster passes the device check. It reports STANDIN_HPU_COUNT devices (default 8, the
cards the local node advertises) named STANDIN_HPU_NAME (default "GAUDI2 (stand-in)").
Nothing here touches a device.
"""

from __future__ import annotations

import os


def device_count() -> int:
    """The number of stand-in HPUs."""
    return int(os.environ.get("STANDIN_HPU_COUNT", "8"))


def get_device_name() -> str:
    """The stand-in device name (contains GAUDI2, so the runner reads generation Gaudi2)."""
    return os.environ.get("STANDIN_HPU_NAME", "GAUDI2 (stand-in)")
