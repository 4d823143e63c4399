"""The bokeh document of ``/gpuexec`` (``gpuexec.dashboard`` registers it): a table of
workers, events/s per pool, placement, kernel seconds per family and device, and the
run's incidents, refreshed every 500 ms from ``GPUExecPlugin`` in this process.

The tables are HTML whose elements carry ids and ``data-`` attributes, so that a browser
test reads the numbers from the DOM (tests/test_dashboard_browser.py).
"""

from __future__ import annotations

import html

from gpuexec.dashboard import plugin_of
from gpuexec.scheduler.report_html import PALETTE

REFRESH_MS = 500


def workers_html(snapshot: dict | None) -> str:
    if snapshot is None:
        return ("<p id='gpuexec-missing'>The gpuexec plugin is not registered on this "
                "scheduler (load it with --preload gpuexec.dashboard).</p>")
    rows = "".join(
        f"<tr class='gpuexec-worker' data-worker='{html.escape(r['worker'])}' "
        f"data-name='{html.escape(str(r['name']))}' "
        f"data-pool='{html.escape(str(r['pool']))}' data-chunks='{r['chunks']}' "
        f"data-events='{r['events']}'><td>{html.escape(r['worker'])}</td>"
        f"<td class='device'>{html.escape(str(r['device']))}</td>"
        f"<td>{html.escape(str(r['pool']))}</td><td class='chunks'>{r['chunks']}</td>"
        f"<td class='events'>{r['events']:,}</td><td>{r['seconds']:.2f}</td>"
        f"<td>{'' if r['alive'] else 'gone'}</td></tr>"
        for r in snapshot["workers"])
    c = snapshot["counts"]
    counts = (f"<p id='gpuexec-counts' data-calls='{c['calls']}' data-skipped='{c['skipped']}' "
              f"data-reruns='{c['reruns']}' data-fallbacks='{c['fallbacks']}' "
              f"data-backups='{c['backups']}'>calls {c['calls']} ({c['failed_calls']} failed); "
              f"skipped {c['skipped']}, re-runs {c['reruns']}, fallbacks {c['fallbacks']}, "
              f"backup copies {c['backups']}</p>")
    return ("<table id='gpuexec-workers' border=1 cellpadding=3 style='border-collapse:"
            "collapse'><tr><th>worker</th><th>device</th><th>pool</th><th>chunks</th>"
            f"<th>events</th><th>task s</th><th></th></tr>{rows}</table>{counts}")


def incidents_html(snapshot: dict | None) -> str:
    if not snapshot or not snapshot["incidents"]:
        return "<p>no skips, re-runs, fallbacks or backup copies</p>"
    rows = "".join(f"<tr><td>{html.escape(i['what'])}</td><td>{html.escape(i['detail'])}</td>"
                   "</tr>" for i in snapshot["incidents"][-50:])
    return f"<table id='gpuexec-incidents' border=1 cellpadding=3>{rows}</table>"


def gpuexec_doc(scheduler, extra, doc):
    from bokeh.layouts import column, row
    from bokeh.models import ColumnDataSource, Div, FactorRange, Span
    from bokeh.plotting import figure

    doc.title = "Dask: gpuexec"
    workers = Div(text=workers_html(None), sizing_mode="stretch_width")
    incidents = Div(text="", sizing_mode="stretch_width")
    rate_src = ColumnDataSource({"xs": [], "ys": [], "pool": [], "color": []})
    rate = figure(title="events/s per pool", height=250, sizing_mode="stretch_width",
                  x_axis_label="seconds since the scheduler started", y_axis_label="events/s",
                  name="gpuexec-throughput")
    rate.multi_line("xs", "ys", color="color", legend_field="pool", source=rate_src,
                    line_width=2)
    place_src = ColumnDataSource({"events": [], "actual": [], "predicted": [], "pool": [],
                                  "color": []})
    size = figure(title="placement: chunk size and actual seconds per pool", height=250,
                  sizing_mode="stretch_width", x_axis_label="events in chunk",
                  y_axis_label="actual s", name="gpuexec-placement")
    size.scatter("events", "actual", color="color", legend_field="pool", source=place_src,
                 size=7, alpha=0.6)
    cross = Span(location=0, dimension="height", line_dash="dashed", visible=False)
    size.add_layout(cross)
    timing = figure(title="placement: predicted vs actual seconds", height=250,
                    sizing_mode="stretch_width", x_axis_label="predicted s",
                    y_axis_label="actual s")
    timing.scatter("predicted", "actual", color="color", source=place_src, size=7, alpha=0.6)
    kern_src = ColumnDataSource({"key": [], "seconds": []})
    kernels = figure(title="seconds in the kernel engine per family and device", height=250,
                     sizing_mode="stretch_width", y_range=FactorRange(), x_axis_label="seconds")
    kernels.hbar(y="key", right="seconds", height=0.7, source=kern_src)

    def update():
        plugin = plugin_of(scheduler)
        snap = None if plugin is None else plugin.snapshot()
        workers.text = workers_html(snap)
        incidents.text = incidents_html(snap)
        if snap is None:
            return
        series = snap["throughput"]
        pools = sorted(p for p in series if p != "t")
        rate_src.data = {"xs": [series["t"]] * len(pools), "ys": [series[p] for p in pools],
                         "pool": pools, "color": [PALETTE[i % 7] for i in range(len(pools))]}
        decided = [d for d in snap["placement"]["decisions"] if d.get("actual_seconds")]
        colors = {p: PALETTE[i % 7] for i, p in enumerate(sorted({d["pool"] for d in decided}))}
        place_src.data = {"events": [d["events"] for d in decided],
                          "actual": [d["actual_seconds"] for d in decided],
                          "predicted": [d["predicted_seconds"] for d in decided],
                          "pool": [d["pool"] for d in decided],
                          "color": [colors[d["pool"]] for d in decided]}
        crossover = snap["placement"]["crossover"]
        cross.visible = crossover is not None
        cross.location = crossover or 0
        keys = sorted(snap["kernel_seconds"])
        kernels.y_range.factors = keys
        kern_src.data = {"key": keys, "seconds": [snap["kernel_seconds"][k] for k in keys]}

    update()
    doc.add_periodic_callback(update, REFRESH_MS)
    doc.add_root(column(Div(text="<h2>gpuexec</h2>"), workers, rate, row(size, timing,
                        sizing_mode="stretch_width"), kernels, incidents,
                        sizing_mode="stretch_width"))
