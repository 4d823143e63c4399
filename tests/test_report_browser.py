"""A saved run report's HTML page renders in headless Chromium with the network off."""

from __future__ import annotations

from browser import DEEP_QUERY, FIGURES_DRAWN, chromium, wait_for
from test_report import _full_report


def test_saved_html_report_renders_offline(tmp_path):
    report = _full_report()
    _, html_path = report.save(tmp_path / "run")
    with chromium(offline=True) as driver:
        driver.get(html_path.as_uri())
        drawn = wait_for(driver, FIGURES_DRAWN, lambda n: n >= 4)
        cells = [e.text for e in driver.execute_script(DEEP_QUERY, "td")]
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert drawn == 4  # throughput, split, placement size and timing
    assert errors == []
    assert "bad.root" in cells and "DY:a.root[100:200]" in cells
