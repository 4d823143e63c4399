"""A rich progress bar like coffea's, one line per pool (chunks done there) and one for
the merges. Counts come from Dask's scheduler-side progress stream, which follows the
final reduction and everything under it, so the client holds no chunk futures (and
workers can free chunk outputs as soon as they are merged)."""

from __future__ import annotations

from distributed.diagnostics.progressbar import MultiProgressBar

from gpuexec.scheduler import keys


class PoolProgress(MultiProgressBar):
    def __init__(self, final, client, desc: str, unit: str, interval: str = "100ms"):
        from coffea.util import rich_bar

        super().__init__([final], scheduler=client.scheduler.address, complete=True,
                         interval=interval)
        self._client = client
        self.desc = desc
        self.unit = unit
        self.bar = rich_bar()
        self.tasks: dict[str, int] = {}

    def _task_for(self, group: str):
        # key_split groups: "chunk-<pool>", "merge"
        if group not in self.tasks:
            kind, _, pool = group.partition("-")
            if kind == keys.CHUNK:
                self.tasks[group] = self.bar.add_task(f"{self.desc} ({pool})", total=0,
                                                      unit=self.unit)
            elif kind == keys.MERGE:
                self.tasks[group] = self.bar.add_task("Merging", total=0, unit="merges")
            else:
                return None
        return self.tasks[group]

    def _draw_bar(self, remaining, all, **kwargs):
        for group in sorted(all, key=lambda g: (not g.startswith(keys.CHUNK), g)):
            task = self._task_for(group)
            if task is not None:
                self.bar.update(task, total=all[group],
                                completed=all[group] - remaining.get(group, 0))
        self.bar.refresh()

    def run(self) -> None:
        """Draw until the final result is ready or failed (the caller then fetches it)."""
        self.bar.start()
        try:
            self._client.sync(self.listen)
        finally:
            self.bar.stop()


class WindowProgress:
    """The same bars for windowed submission, driven by the executor's loop: one line per
    pool (chunks done of chunks placed there so far) and one for the merges."""

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
