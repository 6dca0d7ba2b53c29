"""A real browser for the tests of the HTML review page: headless Chromium driven by Selenium,
and axe-core for the accessibility check.

Chromium and its driver are Debian's packages (`chromium`, `chromium-driver`); when they are
missing and this is root with apt-get (CI), they are installed once. axe-core comes from the npm
registry (`npm pack axe-core@AXE_VERSION`, sha256-pinned) into ~/.cache/npu-migrate-browser. A
test that cannot have them is skipped and says why (pytest -rs). Screenshots go to
.test-artifacts/ at the top of the checkout (see CONTRIBUTING: "Looking at the review page").
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Iterator, List

import pytest

ROOT = Path(__file__).resolve().parent.parent
AXE_VERSION = "4.10.2"
AXE_SHA256 = "9ea2d2d6917da998122bdacfd3b473e31ead53f4b87146c716a12edf89158100"  # the npm tarball


def cache_dir() -> Path:
    path = Path(os.environ.get("NPU_MIGRATE_BROWSER_CACHE") or Path.home() / ".cache" / "npu-migrate-browser")
    path.mkdir(parents=True, exist_ok=True)
    return path


def screenshot_path(name: str) -> Path:
    folder = ROOT / ".test-artifacts"
    folder.mkdir(exist_ok=True)
    return folder / name


def _binaries() -> List[str]:
    return [shutil.which("chromium") or shutil.which("chromium-browser") or "", shutil.which("chromedriver") or ""]


def _install_chromium() -> None:
    """apt-get install chromium chromium-driver, once per machine, when we may."""
    if all(_binaries()):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("no chromium/chromedriver, and not root with apt-get to install them "
                    "(apt-get install chromium chromium-driver)")
    with open(cache_dir() / ".apt-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(_binaries()):
            return
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for step in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"]):
            done = subprocess.run(step, capture_output=True, text=True, env=env, timeout=1800)
            if done.returncode != 0:
                last = (done.stderr or done.stdout).strip().splitlines()[-1:] or [str(done.returncode)]
                pytest.skip(f"cannot install chromium ({' '.join(step)}): {last[0]}")
    if not all(_binaries()):
        pytest.skip("chromium or chromedriver still missing after apt-get install")


@contextlib.contextmanager
def chromium() -> Iterator["object"]:
    """A headless Chromium (a Selenium WebDriver), closed afterwards."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
    _install_chromium()
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = _binaries()
    options = Options()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1400", "--lang=en-US"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_script_timeout(900)  # axe on a loaded machine: a ceiling, not a measurement
    try:
        yield driver
    finally:
        driver.quit()


def without_javascript(driver) -> "contextlib.AbstractContextManager[None]":
    """The pages this driver opens run no script until the block ends (DevTools'
    Emulation.setScriptExecutionDisabled: the page is what a browser with JavaScript off shows),
    so that one browser serves both kinds of test instead of a second start (~1.5 CPU-s, 3-10 s
    on a loaded machine)."""
    @contextlib.contextmanager
    def off() -> Iterator[None]:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
        try:
            yield
        finally:
            driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})

    return off()


def shown(driver, css: str, attribute: str) -> List[str]:
    """`attribute` of each element matching `css` that is displayed, judged by Selenium's own
    isDisplayed atom (what WebElement.is_displayed runs), in one command: find_elements and then
    is_displayed and get_attribute per element is two round trips to the browser each, and the
    round trips were most of the Chromium test's time on a loaded machine."""
    from selenium.webdriver.remote import webelement

    if webelement.isDisplayed_js is None:
        webelement._load_js()
    return driver.execute_script(
        "var isDisplayed = (" + webelement.isDisplayed_js + "), name = arguments[1];"
        "return Array.prototype.filter.call(document.querySelectorAll(arguments[0]), function (e) {"
        "  return isDisplayed(e); }).map(function (e) { return e.getAttribute(name); });", css, attribute)


def axe_source() -> str:
    """axe.min.js of axe-core AXE_VERSION (npm pack, sha256-checked, cached)."""
    cache = cache_dir()
    tarball = cache / f"axe-core-{AXE_VERSION}.tgz"
    if not tarball.exists():
        if not shutil.which("npm"):
            pytest.skip("npm is not installed: cannot fetch axe-core for the accessibility check")
        done = subprocess.run(["npm", "pack", f"axe-core@{AXE_VERSION}", "--silent"], cwd=cache,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0 or not tarball.exists():
            pytest.skip(f"cannot download axe-core {AXE_VERSION} from the npm registry: "
                        f"{(done.stderr.strip().splitlines() or [done.returncode])[-1]}")
    if hashlib.sha256(tarball.read_bytes()).hexdigest() != AXE_SHA256:
        raise AssertionError(f"{tarball}: sha256 mismatch")
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("package/axe.min.js")
        assert member is not None
        return member.read().decode("utf-8")


def axe_violations(driver) -> List[str]:
    """axe-core's violations on the page shown (WCAG 2 A/AA and best practices), one line each."""
    driver.execute_script(axe_source())
    found = driver.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']}).then(function (r) { done(r.violations); });")
    return [f"{v['id']} ({v['impact']}): {v['help']}: {json.dumps([n['html'][:120] for n in v['nodes'][:3]])}"
            for v in found]
