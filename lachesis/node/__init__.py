"""Node: the decode node of §5.1–§5.2 — the decode-step price, landing, flash lifetime, the replay plan, the
lockstep decode engine, each rank's memory, the simulator (Python reference and native core) and the load it admits."""
