"""A run report as one HTML page (``RunReport.save``): throughput per pool over time,
placement (chunk size against pool, predicted against actual time, the crossover) and
the read/transfer/compute split, with BokehJS inline so that the page opens on a
compute node or in CI without a network. The plots are shared with the dashboard page
(``gpuexec.dashboard``), which draws the same figures from live data.
"""

from __future__ import annotations

import html
from pathlib import Path

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
SPLIT = ("read", "transfer", "compute")


def throughput_series(ends: list[tuple[str, float, int]], bins: int = 30) -> dict:
    """``(pool, end seconds, events)`` of finished chunks -> per pool, events/s in
    ``bins`` equal windows of the run: ``{"t": [window ends], pool: [events/s]}``."""
    if not ends:
        return {"t": []}
    horizon = max(t for _, t, _ in ends) or 1.0
    width = horizon / bins
    out: dict[str, list[float]] = {"t": [width * (i + 1) for i in range(bins)]}
    for pool, t, events in ends:
        rates = out.setdefault(pool, [0.0] * bins)
        rates[min(bins - 1, int(t / width))] += events / width
    return out


def throughput_figure(series: dict, title: str = "events/s per pool"):
    from bokeh.plotting import figure

    fig = figure(title=title, height=260, sizing_mode="stretch_width",
                 x_axis_label="seconds", y_axis_label="events/s", tools="pan,wheel_zoom,reset,save")
    pools = [p for p in series if p != "t"]
    for i, pool in enumerate(sorted(pools)):
        fig.step(series["t"], series[pool], mode="before", legend_label=pool,
                 line_width=2, color=PALETTE[i % len(PALETTE)])
    if pools:
        fig.legend.location = "top_left"
    return fig


def placement_figures(decisions: list[dict], crossover: float | None):
    """Chunk size against its pool (the crossover as a line), and predicted against
    actual seconds of each chunk."""
    from bokeh.models import ColumnDataSource, Range1d, Span
    from bokeh.plotting import figure

    pools = sorted({d["pool"] for d in decisions}) or ["none"]
    size = figure(title="placement: chunk size by pool", y_range=pools, height=220,
                  sizing_mode="stretch_width", x_axis_label="events in chunk",
                  tools="pan,wheel_zoom,reset,save")
    timing = figure(title="placement: predicted vs actual seconds", height=260,
                    sizing_mode="stretch_width", x_axis_label="predicted s",
                    y_axis_label="actual s", tools="pan,wheel_zoom,reset,save")
    for i, pool in enumerate(pools):
        mine = [d for d in decisions if d["pool"] == pool]
        color = PALETTE[i % len(PALETTE)]
        size.scatter(x=[d["events"] for d in mine], y=[pool] * len(mine), size=7, alpha=0.6,
                     color=color)
        done = [d for d in mine if d.get("actual_seconds") is not None]
        src = ColumnDataSource({"p": [d["predicted_seconds"] for d in done],
                                "a": [d["actual_seconds"] for d in done]})
        timing.scatter("p", "a", source=src, size=7, alpha=0.6, color=color, legend_label=pool)
    right = max([d["events"] for d in decisions] + [crossover or 0, 1])
    size.x_range = Range1d(0, right * 1.05)
    timing.legend.location = "top_left"
    if crossover is not None:
        size.add_layout(Span(location=crossover, dimension="height", line_dash="dashed",
                             line_color="black"))
        size.title.text += f" (crossover {crossover:,.0f} events, dashed)"
    top = max([d["predicted_seconds"] for d in decisions]
              + [d["actual_seconds"] or 0 for d in decisions] + [1e-3])
    timing.line([0, top], [0, top], line_dash="dotted", color="gray")
    return size, timing


def split_figure(timing: dict[str, dict[str, float]]):
    """Seconds of reading, host-device transfer and compute per pool, stacked."""
    from bokeh.plotting import figure

    pools = sorted(timing) or ["none"]
    data = {"pool": pools, **{k: [timing.get(p, {}).get(k, 0.0) for p in pools] for k in SPLIT}}
    fig = figure(title="read / transfer / compute seconds per pool", y_range=pools, height=200,
                 sizing_mode="stretch_width", x_axis_label="seconds (summed over chunks)",
                 tools="save")
    fig.hbar_stack(list(SPLIT), y="pool", height=0.6, source=data,
                   color=[PALETTE[0], PALETTE[1], PALETTE[2]], legend_label=list(SPLIT))
    return fig


def _table(title: str, header: tuple[str, ...], rows: list[tuple]) -> str:
    if not rows:
        return f"<h3>{html.escape(title)}: none</h3>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return (f"<h3>{html.escape(title)} ({len(rows)})</h3><table border=1 cellpadding=3 "
            f"style='border-collapse:collapse'><tr>{head}</tr>{body}</table>")


def events_table(report) -> str:
    """The skips, re-runs, fallbacks and backup copies of ``report`` as HTML tables."""
    parts = [_table("skipped", ("stage", "file", "entries", "exception"),
                    [(s.stage, s.filename, "whole file" if s.entries is None else
                      f"[{s.entrystart}, {s.entrystop})", s.exception) for s in report.skipped]),
             _table("re-runs after a worker died", ("chunk", "worker", "what"),
                    [(r.label, r.worker, r.what) for r in report.reruns]),
             _table("fallbacks to a CPU pool", ("chunk", "from", "to", "reason"),
                    [(f.label, f.from_pool, f.to_pool, f.reason) for f in report.fallbacks]),
             _table("backup copies", ("chunk", "from", "to", "counted from"),
                    [(b.label, b.from_pool, b.to_pool, b.taken_from or "neither")
                     for c in report.calls for b in c.backups])]
    return "".join(parts)


def write_html(report, path: Path) -> Path:
    from bokeh.embed import file_html
    from bokeh.layouts import column
    from bokeh.models import Div
    from bokeh.resources import INLINE

    proc = report.processing
    runs = proc.runs if proc is not None else []
    ends = [(r.pool, r.end, r.units) for r in runs if r.end is not None]
    placement = (proc.placement if proc is not None else None) or {}
    summary = "<br>".join(html.escape(c.summary()) for c in report.calls) or "no call recorded"
    items = [Div(text=f"<h2>gpuexec run report</h2><p>{summary}</p>"),
             throughput_figure(throughput_series(ends)),
             split_figure(proc.timing() if proc is not None else {})]
    if placement.get("decisions"):
        items += list(placement_figures(placement["decisions"],
                                        placement.get("summary", {}).get("crossover")))
    items.append(Div(text=events_table(report), sizing_mode="stretch_width"))
    page = file_html(column(*items, sizing_mode="stretch_width"), resources=INLINE,
                     title="gpuexec run report")
    path.write_text(page)
    return path
