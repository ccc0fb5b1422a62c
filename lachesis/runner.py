"""Where the evaluation's tasks run: local worker processes that exit with their parent, a Dask cluster, or
in-process; one progress line per finished task on the process's own stderr, beside a tqdm bar.

:func:`run_tasks` also takes follow-up tasks from a finished one (a seed's replica starts as soon as its
first seed's cell has finished), on the same workers.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Sequence

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


def progress_line(text: str) -> None:
    """One line on the process's own stderr: the terminal running papermill shows it (a kernel's
    ``sys.stderr`` goes into the notebook instead); a tqdm bar on the same stream is redrawn below it."""
    from tqdm.auto import tqdm

    tqdm.write(text, file=sys.__stderr__ or sys.stderr)


def _timed(fn: Callable, args: tuple) -> tuple[Any, float]:
    t = time.perf_counter()
    return fn(*args), time.perf_counter() - t


Followup = Callable[[int, Any], Sequence[tuple[Callable, tuple, str]]]


def run_tasks(fn: Callable, args: Sequence[tuple], labels: Sequence[str], n_jobs: int | None = None,
              scheduler: str | Any | None = None, progress: bool = True, desc: str = "sweep",
              follow: Followup | None = None) -> list:
    """``[fn(*a) for a in args]`` on local processes, a Dask cluster, or in-process; a line per finished task.

    ``follow(k, result)`` may return more tasks, ``(fn, args, label)``, once task ``k`` has finished
    (a seed's replica after its first seed's cell); they run on the same workers and their results
    are appended to the returned list in the order they were returned."""
    from tqdm.auto import tqdm

    tasks: list[tuple[Callable, tuple, str]] = [(fn, a, lab) for a, lab in zip(args, labels)]
    out: list[Any] = [None] * len(tasks)
    t0 = time.perf_counter()
    bar = tqdm(total=len(tasks), disable=not progress, desc=desc)

    def put(k: int, res: tuple[Any, float]) -> list[int]:
        """Record task k's result; the indices of the tasks it adds."""
        out[k] = res[0]
        bar.update(1)
        if progress:
            progress_line(f"[{desc}] {bar.n}/{len(tasks)} {tasks[k][2]}: {res[1]:.1f} s "
                          f"(elapsed {time.perf_counter() - t0:.0f} s)")
        more = list(follow(k, res[0])) if follow is not None else []
        tasks.extend(more)
        out.extend([None] * len(more))
        if more:
            bar.total = len(tasks)
            bar.refresh()
        return list(range(len(tasks) - len(more), len(tasks)))

    try:
        if scheduler is not None:
            from dask.distributed import Client, as_completed as das_completed

            client = scheduler if hasattr(scheduler, "submit") else Client(scheduler)
            try:
                def submit(k: int):
                    f = client.submit(_timed, tasks[k][0], tasks[k][1], pure=False)
                    futs[f] = k
                    return f

                futs: dict[Any, int] = {}
                done = das_completed([submit(k) for k in range(len(tasks))])
                for f in done:
                    for k in put(futs[f], f.result()):
                        done.add(submit(k))
            finally:
                if client is not scheduler:
                    client.close()
        elif (n_jobs or os.cpu_count() or 1) <= 1 or (len(tasks) <= 1 and follow is None):
            todo = deque(range(len(tasks)))
            while todo:
                k = todo.popleft()
                todo.extend(put(k, _timed(tasks[k][0], tasks[k][1])))
        else:
            with worker_pool(n_jobs or os.cpu_count() or 1) as ex:
                pending = {ex.submit(_timed, f_, a): k for k, (f_, a, _) in enumerate(tasks)}
                while pending:
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for f in finished:
                        for k in put(pending.pop(f), f.result()):
                            pending[ex.submit(_timed, tasks[k][0], tasks[k][1])] = k
    finally:
        bar.close()
    return out
