"""Progress of long work, one way for every front end.

``progress=True`` draws a tqdm bar (the CLI's), and a callable ``progress(done, total, desc)``
is called at the same points (the dashboard feeds ``st.progress`` with it). Replays
(:mod:`vxmem.workbench.replay.run`) and sweeps (:mod:`vxmem.workbench.sweep.run`) report through :class:`Reporter`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ProgressFn = Callable[[int, int, str], Any]
Progress = bool | None | ProgressFn


class Reporter:
    """Progress of one piece of long work: a tqdm bar, or calls of ``progress(done, total, desc)``.

    ``progress`` False shows nothing, True a bar, None lets tqdm decide (a bar on a
    terminal); a callable is called at most about a hundred times, and at the end.
    """

    def __init__(self, progress: Progress, total: int, desc: str, unit: str = "it"):
        self.fn: ProgressFn | None = progress if callable(progress) else None
        self.total, self.desc, self.done, self._told = int(total), desc, 0, 0
        self._step = max(1, -(-self.total // 100))  # about a hundred calls at most
        self.bar: Any = None
        if self.fn is None and progress is not False:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc=desc, unit=unit, leave=False,
                            disable=None if progress is None else not progress)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        if self.fn is not None and (self.done - self._told >= self._step or self.done >= self.total):
            self._told = self.done
            self.fn(self.done, self.total, self.desc)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
