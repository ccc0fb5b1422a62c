"""Where the evaluation's tasks run: local worker processes that exit with their parent, a Dask cluster, or
in-process; one progress line per finished task (:mod:`lachesis.logs`), beside a tqdm bar.

:func:`run_tasks` also takes follow-up tasks from a finished one (a seed's replica starts as soon as its
first seed's cell has finished), on the same workers.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Callable, Sequence

from lachesis import logs

if TYPE_CHECKING:
    from dask.distributed import Client, Future


def _exit_with_parent(parent_pid: int, interval_s: float = 0.5) -> None:
    """Pool-worker initializer: a daemon thread ends the worker once its parent has died (it is reparented)."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval_s)
        os._exit(1)

    threading.Thread(target=watch, name="lachesis-parent-watch", daemon=True).start()


def worker_pool(n_jobs: int) -> ProcessPoolExecutor:
    """Local worker processes that exit when the process that started them dies."""
    return ProcessPoolExecutor(max_workers=n_jobs, initializer=_exit_with_parent, initargs=(os.getpid(),))


#: the workers the process's task lists share: (the process that made them, their number, the pool)
_SHARED: tuple[int, int, ProcessPoolExecutor] | None = None


def shared_pool(n_jobs: int) -> ProcessPoolExecutor:
    """:func:`worker_pool`, made once per process and number of workers and reused by every :func:`run_tasks`
    call: a worker keeps the replay plans it built (:mod:`lachesis.evaluation.plancache`) for the next task list
    instead of building them again.  Shut down when the process exits, or by :func:`close_shared_pool`."""
    global _SHARED
    if _SHARED is not None and _SHARED[:2] == (os.getpid(), n_jobs):
        return _SHARED[2]
    close_shared_pool()
    _SHARED = (os.getpid(), n_jobs, worker_pool(n_jobs))
    return _SHARED[2]


def close_shared_pool() -> None:
    """Shut the shared workers down (their running tasks cancelled): after an interruption, and at exit."""
    global _SHARED
    if _SHARED is not None and _SHARED[0] == os.getpid():
        _SHARED[2].shutdown(wait=True, cancel_futures=True)
    _SHARED = None


atexit.register(close_shared_pool)


def progress_line(text: str) -> None:
    """One line per event, through the ``lachesis`` logger (:func:`lachesis.logs.line`): on stderr in a terminal,
    in ``build/logs/<notebook>.log`` under ``lachesis reproduce``, never on a notebook's page."""
    logs.line(text)


def _timed(fn: Callable, args: tuple) -> tuple[Any, float]:
    """``fn(*args)`` and the seconds it took."""
    t = time.perf_counter()
    return fn(*args), time.perf_counter() - t


#: one task: ``(fn, args, label)``
Task = tuple[Callable, tuple, str]
#: what a finished task may add: ``follow(k, result)`` -> more tasks
Followup = Callable[[int, Any], Sequence[Task]]


class _Tasks:
    """The tasks of one :func:`run_tasks` call, their results in order, and the progress bar."""

    def __init__(self, tasks: list[Task], progress: bool, desc: str, follow: Followup | None) -> None:
        from tqdm.auto import tqdm

        self.tasks, self.progress, self.desc, self.follow = tasks, progress, desc, follow
        self.out: list[Any] = [None] * len(tasks)
        self.t0 = time.perf_counter()
        self.done = 0
        self.bar = tqdm(total=len(tasks), disable=not progress or not logs.bars(), desc=desc)

    def put(self, k: int, res: tuple[Any, float]) -> list[int]:
        """Record task k's result; the indices of the tasks it adds."""
        self.out[k] = res[0]
        self.bar.update(1)
        self.done += 1  # the bar counts nothing when it is not drawn
        if self.progress:
            progress_line(f"[{self.desc}] {self.done}/{len(self.tasks)} {self.tasks[k][2]}: {res[1]:.1f} s "
                          f"(elapsed {time.perf_counter() - self.t0:.0f} s)")
        more = list(self.follow(k, res[0])) if self.follow is not None else []
        self.tasks.extend(more)
        self.out.extend([None] * len(more))
        if more:
            self.bar.total = len(self.tasks)
            self.bar.refresh()
        return list(range(len(self.tasks) - len(more), len(self.tasks)))


def _on_dask(ts: _Tasks, scheduler: str | Client) -> None:
    """Every task (and those they add) on a Dask cluster: a scheduler address or a client."""
    from dask.distributed import Client
    from dask.distributed import as_completed as das_completed

    client = Client(scheduler) if isinstance(scheduler, str) or not hasattr(scheduler, "submit") else scheduler
    futs: dict[Future, int] = {}

    def submit(k: int):
        f = client.submit(_timed, ts.tasks[k][0], ts.tasks[k][1], pure=False)
        futs[f] = k
        return f

    try:
        done = das_completed([submit(k) for k in range(len(ts.tasks))])
        for f in done:
            for k in ts.put(futs[f], f.result()):
                done.add(submit(k))
    finally:
        if client is not scheduler:
            client.close()


def _in_process(ts: _Tasks) -> None:
    """Every task (and those they add) in this process, in order."""
    todo = deque(range(len(ts.tasks)))
    while todo:
        k = todo.popleft()
        todo.extend(ts.put(k, _timed(ts.tasks[k][0], ts.tasks[k][1])))


def _on_pool(ts: _Tasks, n_workers: int) -> None:
    """Every task (and those they add) on the process's shared local workers (:func:`shared_pool`); an
    interruption or a failed task shuts them down, so nothing the list started keeps running."""
    ex = shared_pool(n_workers)
    try:
        pending = {ex.submit(_timed, f_, a): k for k, (f_, a, _) in enumerate(ts.tasks)}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                for k in ts.put(pending.pop(f), f.result()):
                    pending[ex.submit(_timed, ts.tasks[k][0], ts.tasks[k][1])] = k
    except BaseException:
        close_shared_pool()
        raise


def run_tasks(fn: Callable, args: Sequence[tuple], labels: Sequence[str], n_jobs: int | None = None,
              scheduler: str | Client | None = None, progress: bool = True, desc: str = "sweep",
              follow: Followup | None = None) -> list:
    """``[fn(*a) for a in args]`` on local processes, a Dask cluster, or in-process; a line per finished task.

    ``follow(k, result)`` may return more tasks, ``(fn, args, label)``, once task ``k`` has finished
    (a seed's replica after its first seed's cell); they run on the same workers and their results
    are appended to the returned list in the order they were returned."""
    ts = _Tasks([(fn, a, lab) for a, lab in zip(args, labels)], progress, desc, follow)
    try:
        if scheduler is not None:
            _on_dask(ts, scheduler)
        elif (n_jobs or os.cpu_count() or 1) <= 1 or (len(ts.tasks) <= 1 and follow is None):
            _in_process(ts)
        else:
            _on_pool(ts, n_jobs or os.cpu_count() or 1)
    finally:
        ts.bar.close()
    return ts.out
