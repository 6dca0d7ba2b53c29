"""The HTML review page (`--format html`): one self-contained file that holds every edit and
finding of the JSON report, escapes what it shows, links each code to its documentation, and
(in a real headless Chromium, tests/browser.py) filters, searches, opens anchors and passes an
axe-core accessibility check.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from click.testing import CliRunner

from npu_migrate.cli import main
from npu_migrate.report.html import anchor, parse_diff

ROOT = Path(__file__).resolve().parent.parent

TRAIN = """\
import os

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 2).cuda()
torch.cuda.manual_seed(0)
model = nn.DataParallel(model)
import cupy
torch.backends.cudnn.benchmark = True
"""

HELPER = """\
import torch

def to_gpu(x):
    return x.cuda(non_blocking=True)
"""


def invoke(args: List[str], cache_dir: Path):
    return CliRunner().invoke(main, [*args, "--color", "never", "-j", "1"],
                              env={"NPU_MIGRATE_CACHE_DIR": str(cache_dir), "NO_COLOR": "1"})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src" / "utils").mkdir(parents=True)
    (root / "src" / "train.py").write_text(TRAIN)
    (root / "src" / "utils" / "gpu.py").write_text(HELPER)
    (root / "src" / "utils" / "plain.py").write_text("x = 1\n")
    (root / "run.sh").write_text("#!/bin/sh\nCUDA_VISIBLE_DEVICES=0 python src/train.py\n")
    return root


def reports(project: Path, tmp_path: Path, *extra: str) -> Tuple[dict, str]:
    """(the JSON report, the HTML page) of the same run, from inside the project."""
    import os

    cwd = os.getcwd()
    os.chdir(project)
    try:
        done = invoke([".", "--format", "json", "-o", str(tmp_path / "r.json"), *extra], tmp_path / "cache")
        assert done.exit_code == 0, done.output
        done = invoke([".", "--format", "html", "-o", str(tmp_path / "r.html"), *extra], tmp_path / "cache")
        assert done.exit_code == 0, done.output
    finally:
        os.chdir(cwd)
    return json.loads((tmp_path / "r.json").read_text()), (tmp_path / "r.html").read_text(encoding="utf-8")


class Page(HTMLParser):
    """What the tests read from a page: ids, the rows of each file's table, links and sources."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: List[str] = []
        self.rows: Dict[str, List[Tuple[str, str, str]]] = {}  # path -> (where, code, kind)
        self.links: List[str] = []
        self.sources: List[Tuple[str, str, str]] = []  # (tag, attribute, value) that load something
        self._file: Optional[str] = None
        self._row: Optional[List[str]] = None
        self._in_rows_table = False
        self._cell: Optional[List[str]] = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs) -> None:
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "section" and "file" in (a.get("class") or "").split():
            self._file = a["data-path"]
            self.rows[self._file] = []
        if tag == "table":
            self._in_rows_table = "rows" in (a.get("class") or "").split()
        if tag == "tr" and self._in_rows_table and "row" in (a.get("class") or "").split():
            self._row = [a["data-code"], a["data-kind"]]
        if tag == "td" and self._row is not None:
            self._cell = []
        if tag == "a" and "href" in a:
            self.links.append(a["href"])
        for attr in ("src", "href", "action", "poster", "data"):
            if attr in a and tag != "a":
                self.sources.append((tag, attr, a[attr]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        if tag == "tr" and self._row is not None and self._file is not None:
            code, kind, where = self._row[0], self._row[1], self._row[2]
            self.rows[self._file].append((where, code, kind))
            self._row = None
        if tag == "table":
            self._in_rows_table = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def test_every_edit_and_finding_of_the_json_report_is_on_the_page(project, tmp_path):
    doc, text = reports(project, tmp_path)
    page = Page(text)
    assert doc["summary"]["edits"] > 5 and doc["summary"]["findings"] >= 3  # the project has both
    for f in doc["files"]:
        expected = sorted([(f"{e['line']}:{e['column']}", e["code"], "rewrite") for e in f["edits"]]
                          + [(f"{x['line']}:{x['column']}", x["code"], x["severity"]) for x in f["findings"]])
        if not expected:
            assert f["path"] not in page.rows  # nothing to show: listed with the quiet files only
            assert f["path"] in text
            continue
        assert sorted(page.rows[f["path"]]) == expected, f["path"]
        for e in f["edits"] + f["findings"]:
            assert anchor(f["path"], e["line"]) in page.ids
    # every code shown links to its documentation, which the page holds
    codes = {e["code"] for f in doc["files"] for e in f["edits"] + f["findings"]}
    for code in codes:
        assert f"#code-{code}" in page.links
        assert f"code-{code}" in page.ids
    # every in-page link lands somewhere
    for link in page.links:
        assert link.startswith("#") and link[1:] in page.ids, link


def test_the_page_is_one_self_contained_file(project, tmp_path):
    _, text = reports(project, tmp_path)
    page = Page(text)
    assert page.sources == []  # no <script src>, <link href>, <img src>, <iframe>, <object>
    assert not re.search(r"url\(|@import|https?://|//cdn", text)
    assert text.startswith("<!DOCTYPE html>") and '<html lang="en">' in text
    assert text.count("<script>") == 1 and text.count("<style>") == 1


def test_summary_targets_command_and_generated_files(project, tmp_path):
    doc, text = reports(project, tmp_path, "--modelarts-entry", "--entry", "src/train.py")
    assert '<span class="num">4</span> files scanned' in text
    assert f'<span class="num">{doc["summary"]["changed"]}</span> files to migrate' in text
    assert "<dt>Command</dt><dd><code>npu-migrate . --format html -o" in text
    assert re.search(r"<dt>Target</dt><dd>torch_npu 2\.\d+", text)
    assert '<caption id="findings-by-severity">Findings by severity</caption>' in text
    assert "(generated by npu-migrate)" in text  # the boot file, listed under the entry script


def test_a_hostile_file_name_and_message_are_escaped(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    name = 'x<img src=1 onerror="alert(1)">&.py'
    (root / name).write_text("import torch\nx = torch.zeros(1).cuda()  # </script><script>alert(2)</script>\n")
    done = invoke([str(root), "--format", "html", "-o", str(tmp_path / "r.html")], tmp_path / "cache")
    assert done.exit_code == 0, done.output
    text = (tmp_path / "r.html").read_text()
    assert "<img" not in text and "alert(2)</script>" not in text
    assert "x&lt;img src=1 onerror=&quot;alert(1)&quot;&gt;&amp;.py" in text
    assert "&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in text


def test_notebook_findings_are_placed_by_cell(tmp_path):
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": ["import torch\n"]},
                    {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": ["x = torch.ones(1).cuda()\n"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb))
    done = invoke([str(tmp_path / "nb.ipynb"), "--format", "html", "-o", str(tmp_path / "r.html")],
                  tmp_path / "cache")
    assert done.exit_code == 0, done.output
    page = Page((tmp_path / "r.html").read_text())
    (rows,) = page.rows.values()
    assert sorted(rows) == [("cell 1, 2:1", "NPU108", "rewrite"), ("cell 2, 1:19", "NPU101", "rewrite")]
    assert any(i.endswith("&cell=2&line=1") for i in page.ids)


def test_parse_diff_numbers_the_old_and_new_lines():
    diff = ("--- a/t.py\n+++ b/t.py\n@@ -1,3 +1,4 @@\n import torch\n+import torch_npu  # noqa: F401\n"
            " \n-x = x.cuda()\n+x = x.npu()\n\\ No newline at end of file\n"
            "--- /dev/null\n+++ b/boot.py\n@@ -0,0 +1 @@\n+print(1)\n")
    own, boot = parse_diff(diff)
    assert own.name == "t.py" and not own.created and boot.name == "boot.py" and boot.created
    assert [(line.kind, line.old, line.new, line.text) for line in own.lines] == [
        ("hunk", None, None, "@@ -1,3 +1,4 @@"),
        ("context", 1, 1, "import torch"),
        ("add", None, 2, "import torch_npu  # noqa: F401"),
        ("context", 2, 3, ""),
        ("del", 3, None, "x = x.cuda()"),
        ("add", None, 4, "x = x.npu()"),
        ("note", None, None, "\\ No newline at end of file"),
    ]
    assert [(line.kind, line.new, line.text) for line in boot.lines][1:] == [("add", 1, "print(1)")]


def test_anchor_is_stable_and_holds_no_space():
    assert anchor("src/train.py", 12) == "file=src/train.py&line=12"
    assert anchor("my nb.ipynb", 3, cell=2) == "file=my%20nb.ipynb&cell=2&line=3"


# ----------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def driver():
    """One headless Chromium for this module's tests (a start is ~1.5 CPU-s; the test without
    JavaScript turns scripts off in it, tests/browser.py `without_javascript`)."""
    from browser import chromium

    with chromium() as driver:
        yield driver


@pytest.mark.slow
def test_filters_search_anchors_and_accessibility_in_chromium(project, tmp_path, driver):
    from browser import axe_violations, screenshot_path, shown

    _, text = reports(project, tmp_path)
    page_file = tmp_path / "r.html"
    driver.get(page_file.as_uri())
    visible = lambda: sorted(shown(driver, "section.file", "data-path"))
    count = lambda: driver.find_element("id", "shown-count").text
    all_files = visible()
    assert all_files == ["run.sh", "src/train.py", "src/utils/gpu.py"]
    assert count() == "3 of 3 files shown"

    # severity: only errors -> the file with DataParallel (NPU305) and cupy (NPU303)
    for kind in ("warning", "info", "rewrite"):
        driver.find_element("css selector", f"input[name=kind][value={kind}]").click()
    assert visible() == ["src/train.py"]
    kinds = set(shown(driver, "table.rows tr.row", "data-kind"))
    assert kinds == {"error"}
    for kind in ("warning", "info", "rewrite"):
        driver.find_element("css selector", f"input[name=kind][value={kind}]").click()
    assert visible() == all_files

    # a code
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", "f-code")).select_by_value("NPU101")
    assert visible() == ["src/train.py", "src/utils/gpu.py"]
    Select(driver.find_element("id", "f-code")).select_by_value("")
    # a folder
    Select(driver.find_element("id", "f-folder")).select_by_value("src/utils/")
    assert visible() == ["src/utils/gpu.py"]
    Select(driver.find_element("id", "f-folder")).select_by_value("")
    # the search box: a file's path, then a word of a message
    box = driver.find_element("id", "f-search")
    box.send_keys("gpu.py")
    assert visible() == ["src/utils/gpu.py"]
    box.clear()
    box.send_keys("cupy")
    assert visible() == ["src/train.py"]
    box.clear()
    box.send_keys("no such thing")
    assert visible() == [] and driver.find_element("id", "none-shown").is_displayed()
    box.clear()
    box.send_keys(" ")
    assert visible() == all_files

    # side by side: built on request, two code columns
    driver.find_element("css selector", "input[name=view][value=split]").click()
    split = [t for t in driver.find_elements("css selector", "table.split") if t.is_displayed()]
    assert split and all(not t.is_displayed() for t in driver.find_elements("css selector", "table.unified"))
    assert len(split[0].find_elements("css selector", "thead th")) == 4
    driver.find_element("css selector", "input[name=view][value=unified]").click()

    # an anchor opens its file and shows its row
    target = anchor("src/utils/gpu.py", 4)
    driver.get(page_file.as_uri() + "#" + target)
    row = driver.find_element("id", target)
    assert row.is_displayed() and "NPU101" in row.text

    # keyboard: a file's summary takes the focus and Enter folds and unfolds it
    from selenium.webdriver.common.keys import Keys

    summary = driver.find_element("css selector", "section.file details > summary")
    details = summary.find_element("xpath", "..")
    was_open = details.get_attribute("open") is not None
    driver.execute_script("arguments[0].focus()", summary)
    assert driver.switch_to.active_element == summary
    summary.send_keys(Keys.ENTER)
    assert (details.get_attribute("open") is not None) != was_open

    assert axe_violations(driver) == []
    driver.save_screenshot(str(screenshot_path("review-page.png")))


@pytest.mark.slow
def test_without_javascript_the_page_is_complete(project, tmp_path, driver):
    from browser import without_javascript

    reports(project, tmp_path)
    with without_javascript(driver):
        driver.get((tmp_path / "r.html").as_uri())
        assert not driver.find_element("id", "filters").is_displayed()  # filters need the script
        files = driver.find_elements("css selector", "section.file")
        assert len(files) == 3 and all(f.is_displayed() for f in files)
        driver.get((tmp_path / "r.html").as_uri() + "#" + anchor("src/train.py", 7))
        assert "NPU101" in driver.find_element("id", anchor("src/train.py", 7)).get_attribute("textContent")



# ----------------------------------------------------------------------------- the codes' pages


def _build_docs():
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_docs", ROOT / "scripts" / "build_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_codes_are_what_the_rules_say():
    wanted = _build_docs().pages()
    present = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "codes").glob("*.md")}
    stale = sorted(name for name in set(wanted) | set(present) if wanted.get(name) != present.get(name))
    assert stale == [], "run: python scripts/build_docs.py"


def test_every_code_has_a_page_and_every_link_lands():
    from npu_migrate.explain import explain
    from npu_migrate.rules import load_rules

    rules = load_rules()
    docs = ROOT / "docs" / "codes"
    for code in rules.codes():
        assert (docs / f"{code}.md").is_file(), code
        text = explain(rules, code)
        assert text is not None and f"Documentation: docs/codes/{code}.md in npu-migrate's source repository" in text
        first = (docs / f"{code}.md").read_text().splitlines()[0]
        assert first == f"# {code}: {text.splitlines()[0].split(': ', 1)[1]}"  # explain and the page agree
    for page in docs.glob("*.md"):
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            assert (docs / target).is_file(), f"{page.name}: broken link {target}"
    index = (docs / "README.md").read_text()
    assert all(f"[{code}]({code}.md)" in index for code in rules.codes())


def test_a_code_page_shows_its_rules_examples():
    from npu_migrate.codedocs import markdown, page
    from npu_migrate.rules import load_rules

    p = page(load_rules(), "NPU305")
    assert (p.reported_as, p.area, p.targets) == ("error", "PyTorch", "")
    text = markdown(p)
    assert "Flagged:\n\n```python\nimport torch\nmodel = torch.nn.DataParallel(model)\n```" in text
    assert "Not flagged:\n\n```python\nimport torch.nn as nn\nif isinstance(model, nn.DataParallel):" in text
    rewrite = page(load_rules(), "NPU101")
    assert rewrite.targets == "torch_npu (--torch-npu-version)"
    assert "Before:\n\n```python\nmodel = model.cuda()\n```\n\nAfter:\n\n```python\nmodel = model.npu()\n```" in markdown(rewrite)


def test_a_code_of_the_users_own_rules_has_no_page_to_point_at(tmp_path):
    from npu_migrate.codedocs import page
    from npu_migrate.explain import explain
    from npu_migrate.rules import load_rules

    rule_file = tmp_path / "team.toml"
    rule_file.write_text('[[finding]]\ncode = "NPU190"\nkind = "api"\nseverity = "warning"\n'
                         'apis = ["mylib.gpu_only"]\nmessage = "`{api}` needs our GPU cluster"\n'
                         'examples = [{ flagged = "import mylib\\nmylib.gpu_only()\\n" }]\n')
    rules = load_rules([rule_file])
    p = page(rules, "NPU190")
    assert (p.title, p.builtin, p.doc_path) == ("`<api>` needs our GPU cluster", False, "")
    text = explain(rules, "NPU190")
    assert text.startswith("NPU190: `<api>` needs our GPU cluster\nReported as: warning\n")
    assert "A code of your own rule files" in text and "docs/codes/NPU190" not in text
    assert page(rules, "NPU305").doc_path == "docs/codes/NPU305.md"


def test_the_page_names_the_targets_that_applied(tmp_path):
    # a TensorFlow-only project: the CANN target, not torch_npu (as the text summary says)
    root = tmp_path / "tf"
    root.mkdir()
    (root / "train.py").write_bytes((ROOT / "fixtures" / "tensorflow" / "biggan_train.py").read_bytes())
    done = invoke([str(root), "--format", "html", "-o", str(tmp_path / "r.html")], tmp_path / "cache")
    assert done.exit_code == 0, done.output
    header = (tmp_path / "r.html").read_text().split("</header>")[0]
    targets = re.findall(r"<dt>Target</dt><dd>([^<]*)</dd>", header)
    assert len(targets) == 1 and "CANN" in targets[0] and "torch_npu" not in header, header
