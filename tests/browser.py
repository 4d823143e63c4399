"""Headless Chromium through Selenium for the browser tests: Debian's ``chromium`` and
``chromium-driver`` (``.ci/install_browser.sh`` installs them in CI)."""

from __future__ import annotations

import contextlib
import shutil
import time

import pytest

# querySelectorAll through the open shadow roots bokeh renders its widgets in
DEEP_QUERY = """
const found = [];
const walk = (root) => {
  root.querySelectorAll(arguments[0]).forEach((e) => found.push(e));
  root.querySelectorAll('*').forEach((e) => { if (e.shadowRoot) walk(e.shadowRoot); });
};
walk(document);
return found;
"""

# the bokeh figures drawn on the page (0 until BokehJS has rendered them)
FIGURES_DRAWN = """
if (typeof Bokeh === 'undefined' || !Bokeh.index) return 0;
return [...Bokeh.index.all_views()].filter((v) => v.model.type === 'Figure'
                                             && v.el.isConnected).length;
"""


def _paths():
    return (shutil.which("chromium") or shutil.which("chromium-browser"),
            shutil.which("chromedriver"))


@contextlib.contextmanager
def chromium(offline: bool = False, size=(1280, 1500)):
    """A headless Chromium driven by Selenium; ``offline``: no network at all (DNS
    refused and the DevTools network switched off)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = _paths()
    if binary is None or driver_path is None:
        pytest.skip("needs chromium and chromedriver (.ci/install_browser.sh)")
    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={size[0]},{size[1]}"):
        options.add_argument(arg)
    if offline:
        options.add_argument("--host-resolver-rules=MAP * ~NOTFOUND")
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        if offline:
            driver.execute_cdp_cmd("Network.enable", {})
            driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
                "offline": True, "latency": 0, "downloadThroughput": 0, "uploadThroughput": 0})
        yield driver
    finally:
        driver.quit()


def wait_for(driver, script: str, ready, timeout: float = 30.0, *args):
    """Run ``script`` until ``ready(result)``; returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        result = driver.execute_script(script, *args)
        if ready(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.2)
