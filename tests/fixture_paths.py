"""Where the committed test fixtures live, named once (a module of its own: two ``conftest`` modules —
tests/ and notebooks/ — share one import name, so test modules cannot import from either)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
FIXTURES = TESTS / "fixtures"
TRACE_FIXTURES = FIXTURES / "traces"
#: a small public source every writing command reads
TAU2_SOURCE = TRACE_FIXTURES / "tau2-qwen3.5-justinchiu"
