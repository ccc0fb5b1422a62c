"""The explorer in a real browser: JupyterLab on this repository, driven by Debian's headless chromium.

Starts JupyterLab (the package's kernel, figures inline), opens a copy of ``notebooks/explorer.ipynb`` (the
source stays without outputs), runs every cell, waits for the dropdowns and an inline figure, changes the
``memory`` dropdown, waits for the redrawn figure, and saves screenshots under ``--out`` (``build/browser``).
Exit 0 when the widget and both figures were there, 1 otherwise (the reason on the last line).  JupyterLab,
chromedriver and chromium each run in a session of their own and are ended with everything they started on
every way out: success, an error, a timeout, Ctrl-C, SIGTERM (:class:`Started`).

Needs chromium and chromedriver from the system (``apt-get install chromium chromium-driver``: nothing is
downloaded at run time) and selenium (the ``[browser]`` extra).  ``make browser-check`` runs it.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def which(*names: str) -> str:
    for n in names:
        if p := shutil.which(n):
            return p
    raise SystemExit(f"browser check: none of {', '.join(names)} found (apt-get install chromium chromium-driver)")


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc (parent pid -> pids)."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    return kids


def _descendants(pid: int) -> list[int]:
    """``pid``'s children, their children, and so on (a JupyterLab kernel starts a session of its own, so
    its server's process group does not hold it)."""
    kids, out, todo = _children(), [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _signal_groups(pids: list[int], sig: int) -> None:
    """``sig`` to the process group each of ``pids`` leads (one that is gone already is skipped)."""
    for pid in pids:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class Started:
    """Every process the check starts, each in a process group (a session) of its own, and every temporary
    folder it makes.  Leaving the block, by any path (success, an error, Ctrl-C, SIGTERM or SIGHUP, a timeout),
    ends each process with every process it started: SIGTERM to the groups and the descendants found, then
    SIGKILL to what is left after ``grace``; then removes the folders (chromium's profile, 10 MB a run)."""

    def __init__(self, grace: float = 10.0) -> None:
        self.procs: list[subprocess.Popen] = []
        self.folders: list[Path] = []
        self.grace = grace
        self._old: dict[int, object] = {}

    def __enter__(self) -> "Started":
        def stop(sig: int, _frame: object) -> None:  # SIGTERM/SIGHUP unwind like Ctrl-C: the block's exit runs
            raise SystemExit(128 + sig)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old[sig] = signal.signal(sig, stop)
        # Ctrl-C raises KeyboardInterrupt even when started from a shell's background job (which ignores SIGINT)
        self._old[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
        return self

    def start(self, cmd: list[str], **kw: object) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, start_new_session=True, **kw)  # type: ignore[call-overload]
        self.procs.append(proc)
        return proc

    def folder(self, prefix: str) -> Path:
        """A new temporary folder, removed when the block is left (after every process has ended)."""
        path = Path(tempfile.mkdtemp(prefix=prefix))
        self.folders.append(path)
        return path

    def stop(self) -> None:
        """End every started process, its group and its descendants; wait for them."""
        pids = [p.pid for p in self.procs if p.poll() is None]
        family = [d for pid in pids for d in _descendants(pid)]
        _signal_groups(pids, signal.SIGTERM)
        _signal(family, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        for p in self.procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        _signal_groups(pids, signal.SIGKILL)
        _signal(family, signal.SIGKILL)
        for p in self.procs:
            p.wait()

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            for path in self.folders:
                shutil.rmtree(path, ignore_errors=True)
            for sig, old in self._old.items():
                signal.signal(sig, old)  # type: ignore[arg-type]


def wait_for(url: str, proc: subprocess.Popen, what: str, timeout_s: float, log: Path) -> None:
    """Until ``url`` answers 200; a SystemExit naming ``what`` if ``proc`` exits or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"browser check: {what} exited ({log})")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"browser check: {what} did not answer within {timeout_s:g} s ({log})")


def lab_command(port: int, token: str) -> list[str]:
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={REPO}",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # a CI container runs as root
        cmd.append("--allow-root")
    return cmd


def start_lab(started: Started, port: int, token: str, log: Path, cmd: list[str] | None = None,
              timeout_s: float = 60.0) -> subprocess.Popen:
    """JupyterLab (or ``cmd``) started under ``started``, once it answers on ``port``."""
    env = {**os.environ, "MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "JUPYTER_CONFIG_DIR": str(log.parent / "jupyter-config")}  # no user settings, no workspace state
    with log.open("w") as out:
        proc = started.start(cmd or lab_command(port, token), env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    wait_for(f"http://127.0.0.1:{port}/api/status?token={token}", proc, "JupyterLab", timeout_s, log)
    return proc


def start_driver(started: Started, log: Path, timeout_s: float = 60.0) -> str:
    """chromedriver started under ``started`` (so chromium and its children are in its session); its URL."""
    port = free_port()
    with log.open("w") as out:
        proc = started.start([which("chromedriver"), f"--port={port}"], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_for(url + "/status", proc, "chromedriver", timeout_s, log)
    return url


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/browser", help="screenshots and logs (relative to the repository)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for the notebook to finish")
    ap.add_argument("--memory", default="8/8*", help="the memory configuration to switch the dropdown to")
    a = ap.parse_args(argv)
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium never fetches a browser or driver
    os.environ.setdefault("SE_AVOID_STATS", "true")
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    out = (REPO / a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # a copy of the source notebook, so JupyterLab's autosave never writes outputs into notebooks/
    work = out / "notebook"
    work.mkdir(exist_ok=True)
    shutil.copy(REPO / "notebooks" / "explorer.ipynb", work / "explorer.ipynb")
    rel = (work / "explorer.ipynb").relative_to(REPO).as_posix()

    with Started() as started:  # JupyterLab, chromedriver and chromium end on every way out of this block
        return _check(a, started, out, rel, webdriver, By, EC, Select, WebDriverWait)


def _check(a: argparse.Namespace, started: Started, out: Path, rel: str, webdriver, By, EC, Select,
           WebDriverWait) -> int:
    port, token = free_port(), secrets.token_hex(16)
    start_lab(started, port, token, out / "jupyterlab.log")
    opts = webdriver.ChromeOptions()
    opts.binary_location = which("chromium", "chromium-browser")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1100",
                f"--user-data-dir={started.folder('lachesis-chromium-')}"):
        opts.add_argument(arg)
    driver = webdriver.Remote(command_executor=start_driver(started, out / "chromedriver.log"), options=opts)
    shots: list[Path] = []

    def shot(name: str) -> None:
        p = out / f"{len(shots) + 1:02d}_{name}.png"
        driver.save_screenshot(str(p))
        shots.append(p)
        print(f"browser check: screenshot {p.relative_to(REPO)}", flush=True)

    try:
        driver.get(f"http://127.0.0.1:{port}/lab/tree/{rel}?token={token}&reset")
        wait = WebDriverWait(driver, 120)
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, ".jp-Notebook .jp-Cell")))
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, ".jp-Notebook-ExecutionIndicator, "
                                                                    ".jp-Toolbar-kernelStatus")))
        time.sleep(3)  # the kernel connects
        shot("opened")
        # Run > Run All Cells
        wait.until(EC.element_to_be_clickable((By.XPATH, "//li[contains(@class,'lm-MenuBar-item')]"
                                                         "[.//div[normalize-space()='Run']]"))).click()
        wait.until(EC.element_to_be_clickable((By.XPATH, "//li[contains(@class,'lm-Menu-item')]"
                                                         "[.//div[normalize-space()='Run All Cells']]"))).click()
        long = WebDriverWait(driver, a.timeout)
        long.until(EC.presence_of_element_located((By.CSS_SELECTOR,
                                                   ".jupyter-widgets select, .widget-dropdown select")))
        long.until(EC.presence_of_element_located((By.CSS_SELECTOR, ".jp-OutputArea-output img")))
        # every cell finished: no "[*]" prompt left
        long.until(lambda d: not [e for e in d.find_elements(By.CSS_SELECTOR, ".jp-InputPrompt")
                                  if "[*]" in e.text])
        imgs = driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output img")
        imgs_before = len(imgs)
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", imgs[0])
        time.sleep(1)
        shot("first_figure")
        widget = driver.find_element(By.CSS_SELECTOR, ".jupyter-widgets.widget-vbox, .widget-vbox")
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", widget)
        time.sleep(1)
        shot("ran")
        dropdowns = driver.find_elements(By.CSS_SELECTOR, ".widget-dropdown")
        memory = next((d for d in dropdowns if d.find_element(By.TAG_NAME, "label").text.strip() == "memory"), None)
        if memory is None:
            raise AssertionError("no 'memory' dropdown in the explorer's widget")
        sel = Select(memory.find_element(By.TAG_NAME, "select"))
        if a.memory not in [o.text for o in sel.options]:
            raise AssertionError(f"the memory dropdown offers no {a.memory!r}")
        sel.select_by_visible_text(a.memory)
        # the widget's own output area redraws: a new inline figure below the dropdowns
        long.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".widget-output img, .jupyter-widgets-output-area img"))
        time.sleep(1)
        drawn = driver.find_elements(By.CSS_SELECTOR, ".widget-output img, .jupyter-widgets-output-area img")
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", drawn[0])
        time.sleep(1)
        shot("dropdown_changed")
        heads = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".widget-output h3, "
                                                                       ".jupyter-widgets-output-area h3")]
        if not any(a.memory in h for h in heads):
            raise AssertionError(f"the redrawn selection does not name {a.memory!r}: {heads}")
        print(f"browser check: OK — widget with {len(dropdowns)} dropdowns, {imgs_before} inline figure(s) after "
              f"running, the selection redrawn for memory {a.memory} ({len(drawn)} figure(s) in the widget)")
        return 0
    except Exception as e:  # noqa: BLE001 — the reason on one line, a screenshot of the state
        try:
            shot("failed")
        except Exception:  # noqa: BLE001
            pass
        print(f"browser check: FAILED — {e.__class__.__name__}: {' '.join(str(e).split())[:300]}", flush=True)
        return 1
    finally:
        try:
            driver.quit()
        except Exception:  # noqa: BLE001 — the driver is ended with its session by Started anyway
            pass


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # everything started is already stopped (Started)
        print("browser check: interrupted", file=sys.stderr)
        sys.exit(130)
