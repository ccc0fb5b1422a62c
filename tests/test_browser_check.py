"""scripts/browser_check.py ends everything it started (JupyterLab, chromedriver, their children and a kernel in
a session of its own) and removes the folders it made (chromium's profile) on every way out: an error, a timeout,
Ctrl-C and SIGTERM."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_paths import REPO

#: A stand-in for JupyterLab or chromedriver that never answers and ignores SIGTERM: it starts a child in its
#: own group and a grandchild in a session of its own (as a Jupyter kernel is), prints the three pids, hangs.
HANG = r"""
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
sleep = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"]
kid = subprocess.Popen(sleep)
kernel = subprocess.Popen(sleep, start_new_session=True)
print(os.getpid(), kid.pid, kernel.pid, flush=True)
time.sleep(600)
"""


def _browser_check():
    import importlib.util

    spec = importlib.util.spec_from_file_location("browser_check", REPO / "scripts" / "browser_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie is gone, only not yet reaped


def _gone(pids: list[int], within: float = 20.0) -> bool:
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(map(_alive, pids)):
            return True
        time.sleep(0.1)
    return False


def test_the_browser_check_ends_what_it_started_on_an_error_and_a_timeout(tmp_path) -> None:
    import subprocess
    import sys

    bc = _browser_check()
    pids: list[int] = []
    with pytest.raises(RuntimeError):
        with bc.Started(grace=1) as started:
            p = started.start([sys.executable, "-c", HANG], stdout=subprocess.PIPE, text=True)
            pids = [int(x) for x in p.stdout.readline().split()]
            profile = started.folder("lachesis-chromium-")
            (profile / "Default").mkdir()
            (profile / "Default" / "Cookies").write_bytes(b"\0" * 1024)
            raise RuntimeError("a step of the check failed")
    assert len(pids) == 3 and _gone(pids), [pid for pid in pids if _alive(pid)]
    assert not profile.exists()  # chromium's profile goes with it
    with pytest.raises(SystemExit, match="did not answer within 1 s"):  # JupyterLab that never answers
        with bc.Started(grace=1) as started:
            bc.start_lab(started, bc.free_port(), "t", tmp_path / "lab.log", cmd=[sys.executable, "-c", HANG],
                         timeout_s=1)
    pids = [int(x) for x in (tmp_path / "lab.log").read_text().split()]
    assert len(pids) == 3 and _gone(pids), [pid for pid in pids if _alive(pid)]


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_the_browser_check_ends_what_it_started_on_ctrl_c_and_sigterm(tmp_path, sig) -> None:
    import signal
    import subprocess
    import sys

    script = tmp_path / "check.py"
    script.write_text(
        "import importlib.util, subprocess, sys, time\n"
        f"spec = importlib.util.spec_from_file_location('bc', {str(REPO / 'scripts' / 'browser_check.py')!r})\n"
        "bc = importlib.util.module_from_spec(spec); spec.loader.exec_module(bc)\n"
        "try:\n"
        "    with bc.Started(grace=1) as started:\n"
        f"        p = started.start([sys.executable, '-c', {HANG!r}], stdout=subprocess.PIPE, text=True)\n"
        "        profile = started.folder('lachesis-chromium-'); (profile / 'Local State').write_text('{}')\n"
        "        print(p.stdout.readline().strip(), profile, flush=True)\n"
        "        time.sleep(600)\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n")
    check = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    *first, profile = check.stdout.readline().split()
    pids = [int(x) for x in first]
    assert len(pids) == 3 and all(map(_alive, pids)) and Path(profile).is_dir()
    check.send_signal(getattr(signal, sig))
    assert check.wait(timeout=30) == (130 if sig == "SIGINT" else 128 + signal.SIGTERM)
    assert _gone(pids), [pid for pid in pids if _alive(pid)]
    assert not Path(profile).exists()
