"""Landing at each tier's write bandwidth, by hand (lachesis.node.kv_landing)."""


import numpy as np
import pytest

from lachesis import config as C
from lachesis.node import kv_landing

MAV, QWEN = C.LLAMA4_MAVERICK, C.QWEN3_235B
DEP = C.Deployment()
M17, DAISY = C.memory_config("1/7"), C.memory_config("8/8*")

def test_kv_landing_time_at_tier_write_bandwidth() -> None:
    # 1000 tokens x 196,608 B = 196.608 MB; HBF 7 x 16 GB/s; HBM 1 x 1.6 TB/s
    assert kv_landing.kv_landing_time(1000, "hbf", M17, MAV) == pytest.approx(196.608e6 / 112e9)
    assert kv_landing.kv_landing_time(1000, "hbm", M17, MAV) == pytest.approx(196.608e6 / 1.6e12)
    arr = kv_landing.kv_landing_time(np.array([0, 2000]), "hbf", M17, MAV)
    assert arr[0] == 0 and arr[1] == pytest.approx(2 * 196.608e6 / 112e9)
    with pytest.raises(ValueError, match="unknown tier"):
        kv_landing.kv_landing_time(1, "ssd", M17, MAV)  # type: ignore[arg-type]


# --- lifetime ----------------------------------------------------------------------------------
