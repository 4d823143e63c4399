"""A rich progress bar like coffea's for the executor's windowed submission: one line
per pool (chunks done of chunks placed there so far) and one for the merges, driven by
the executor's loop (the client holds only the chunks in flight)."""

from __future__ import annotations


class WindowProgress:
    """One bar per pool and one for the merges; ``placed``/``done``/``merges`` add to
    their counts."""

    def __init__(self, desc: str, unit: str):
        from coffea.util import rich_bar

        self.desc, self.unit = desc, unit
        self.bar = rich_bar()
        self.tasks: dict[str, int] = {}
        self.counts: dict[str, list[int]] = {}

    def __enter__(self) -> "WindowProgress":
        self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.stop()

    def _update(self, name: str, label: str, unit: str, total: int = 0, done: int = 0) -> None:
        if name not in self.tasks:
            self.tasks[name] = self.bar.add_task(label, total=0, unit=unit)
            self.counts[name] = [0, 0]
        counts = self.counts[name]
        counts[0] += total
        counts[1] += done
        self.bar.update(self.tasks[name], total=counts[0], completed=counts[1])
        self.bar.refresh()

    def placed(self, pool: str, n: int = 1) -> None:
        self._update(pool, f"{self.desc} ({pool})", self.unit, total=n)

    def done(self, pool: str, n: int = 1) -> None:
        self._update(pool, f"{self.desc} ({pool})", self.unit, done=n)

    def merges(self, submitted: int = 0, done: int = 0) -> None:
        self._update("", "Merging", "merges", total=submitted, done=done)
