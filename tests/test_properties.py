"""Property-based tests: generated Python programs (hypothesmith) with device code
spliced in at random places. Whatever the program, the engine

* never raises, and an error is one line;
* produces output that parses whenever the input did;
* is idempotent: migrating the output again changes nothing;
* gives the same result when libcst parses the whole file (partial.py parses less);
* never changes a comment (it may add the `# noqa: F401` of `import torch_npu`) nor a string
  that is not a device string.

CI runs a fixed, database-less profile (derandomized: the same examples every run, no state
written). More and fresh examples locally: NPU_MIGRATE_PROPERTY_EXAMPLES=2000
NPU_MIGRATE_PROPERTY_RANDOM=1 pytest tests/test_properties.py
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
import warnings
from collections import Counter
from typing import List, Optional

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npu_migrate.dispatch import migrate_source
from npu_migrate.source import decode_python, encode

# hypothesmith compiles what it generates: `{1}()` draws a SyntaxWarning, not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")

PROPERTIES = settings(
    max_examples=int(os.environ.get("NPU_MIGRATE_PROPERTY_EXAMPLES", "100")),
    derandomize=not os.environ.get("NPU_MIGRATE_PROPERTY_RANDOM"),
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

# Device code to splice in, and look-alikes that must stay as they are.
DEVICE_SNIPPETS = [
    "import torch\n",
    "import torch as th\n",
    "import torch.distributed as dist\n",
    "import os\n",
    "from torch.cuda.amp import GradScaler, autocast\n",
    "model = model.cuda()\n",
    "x = x.cuda(non_blocking=True)\n",
    "torch.cuda.set_device(0)\n",
    "th.cuda.synchronize()\n",
    "device = torch.device('cuda:0')\n",
    "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
    "x = x.to(f'cuda:{rank}')\n",
    "dist.init_process_group(backend='nccl')\n",
    "os.environ['CUDA_VISIBLE_DEVICES'] = '0,1'\n",
    "scaler = GradScaler()\n",
    "if x.is_cuda:\n    pass\n",
    "with autocast():\n    y = model(x)\n",
    "checkpoint = 'model_cuda.pt'  # not a device string\n",
    "use_cuda = args.cuda and not args.no_cuda\n",
    "print('moving to cuda')  # cuda in a comment\n",
    "def f(device='cuda'):\n    '''Run on cuda.'''\n    return device\n",
    "# torch.cuda.synchronize() in a comment\n",
]
ALWAYS_REWRITTEN = ["model = model.cuda()\n", "x = x.cuda(non_blocking=True)\n", "if x.is_cuda:\n    pass\n"]
DEVICE_STRING_RE = re.compile(
    r"^(?:(?i:cuda|gpu)(?::.*)?|(?i:nccl)|(?:CUDA|NCCL)_[A-Z0-9_]*|torch\.cuda\.\w+)$"
)


# ------------------------------------------------------------------------------ splicing


def splice(program: str, snippets: List[str], positions: List[int]) -> str:
    """Insert each snippet as statements into a statement block of `program` (the module or
    any indented block), chosen by `positions`; the program's own text is kept as it is."""
    module = cst.parse_module(program)
    blocks: List[cst.CSTNode] = []

    class Blocks(cst.CSTVisitor):
        def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
            blocks.append(node)

    module.visit(Blocks())
    targets = [module, *blocks]
    plan = {}
    for snippet, pos in zip(snippets, positions):
        plan.setdefault(id(targets[pos % len(targets)]), []).append((pos, snippet))

    def insert(body, items):
        body = list(body)
        for pos, snippet in items:
            stmts = list(cst.parse_module(snippet).body)
            at = pos % (len(body) + 1)
            body[at:at] = stmts
        return body

    class Insert(cst.CSTTransformer):
        def leave_IndentedBlock(self, original, updated):
            items = plan.get(id(original))
            return updated.with_changes(body=insert(updated.body, items)) if items else updated

    new = module.visit(Insert())
    items = plan.get(id(module))
    if items:
        new = new.with_changes(body=insert(new.body, items))
    return new.code


# Built once, on first use: from_grammar() compiles a parser each time it is called (~2 CPU-s
# with the import, which each xdist worker and the fast subset, -m "not slow", would otherwise pay
# at collection).
def _generated_programs():
    import hypothesmith  # (its import builds strategies too: ~1 CPU-s more)

    return st.one_of(hypothesmith.from_node(), hypothesmith.from_grammar())


GENERATED_PROGRAMS = st.deferred(_generated_programs)


@st.composite
def programs_with_device_code(draw):
    """(a generated program, the same program with device code spliced in)."""
    program = draw(GENERATED_PROGRAMS)
    try:
        cst.parse_module(program)
    except Exception:
        return program, program  # not libcst's kind of Python: the engine must still cope
    # One snippet that is always rewritten, then any mix.
    snippets = [draw(st.sampled_from(ALWAYS_REWRITTEN))]
    snippets += draw(st.lists(st.sampled_from(DEVICE_SNIPPETS), max_size=6))
    positions = draw(st.lists(st.integers(0, 10_000), min_size=len(snippets), max_size=len(snippets)))
    return program, splice(program, snippets, positions)


# ------------------------------------------------------------------------------ checks


def parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def tokens(text: str) -> Optional[Counter]:
    # A lone "\r" ends a line for the compiler (and libcst) but not for the tokenize module,
    # which would take the code after it for the rest of a comment.
    text = re.sub(r"\r(?!\n)", "\n", text)
    try:
        return Counter(
            (t.type, t.string)
            for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type in (tokenize.COMMENT, tokenize.STRING)
        )
    except (tokenize.TokenError, SyntaxError):
        return None


def string_body(token: str) -> Optional[str]:
    m = re.match(r"(?is)^([rbuf]*)('''|\"\"\"|'|\")(.*)\2$", token)
    if not m or "b" in m.group(1).lower() or len(m.group(2)) == 3:
        return None  # bytes and triple-quoted text are never device strings
    body = m.group(3)
    return body.split("{", 1)[0] + "0" if "f" in m.group(1).lower() and "{" in body else body


def lines(text: str) -> List[str]:
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)


ADDED_IMPORT = "import torch_npu  # noqa: F401"


def assert_only_edited_lines_changed(before: str, after: str, edits) -> None:
    """Every line that differs holds an edit, and the only new line is the added import:
    nothing else moved, vanished or changed (libcst gives back everything else as it was)."""
    edited = {n for e in edits for n in range(e.span.line, e.span.end_line + 1)}
    a, b = lines(before), lines(after)
    extra = sum(line.strip() == ADDED_IMPORT for line in b) - sum(line.strip() == ADDED_IMPORT for line in a)
    assert extra in (0, 1), f"{extra} imports added"
    if extra:
        b.pop(next(i for i, line in enumerate(b) if line.strip() == ADDED_IMPORT
                   and (i >= len(a) or line != a[i])))
    assert len(a) == len(b), f"{len(a)} lines became {len(b)}"
    for k, (old, new) in enumerate(zip(a, b)):
        if old != new and not (k == len(a) - 1 and old == new.rstrip("\r\n")):  # the last line may gain its newline
            assert k + 1 in edited, f"line {k + 1} changed without an edit: {old!r} -> {new!r}"


def check_migration(text: str) -> None:
    result = migrate_source(text, "generated.py")
    # Partial parsing (partial.py) must not change anything: same text, edits, findings --
    # except where libcst cannot give the file back (it drops a lone `\` line) and the trouble
    # lies only in lines partial parsing leaves out: then the file is migrated, not refused.
    whole = migrate_source(text, "generated.py", partial=False)
    if not (result.error is None and (whole.error or "").startswith("cannot migrate faithfully")):
        assert (result.new_text, result.edits, result.findings, result.error, result.unused_ignores) == (
            whole.new_text, whole.edits, whole.findings, whole.error, whole.unused_ignores)
    if result.error is not None:
        assert "\n" not in result.error and result.error.strip() == result.error
        assert result.new_text is None
        return
    if result.new_text is None:
        return
    new = result.new_text
    assert result.edits, "changed text without an edit"
    if parses(text):
        assert parses(new), f"output does not parse:\n{new}"
    assert_only_edited_lines_changed(text, new, result.edits)
    again = migrate_source(new, "generated.py")
    assert again.error is None and again.new_text is None, f"second run changed:\n{new}\n---\n{again.new_text}"
    before, after = tokens(text), tokens(new)
    if before is None or after is None:
        return
    for (kind, tok), _n in (before - after).items():
        assert kind == tokenize.STRING, f"comment changed: {tok!r}"
        body = string_body(tok)
        assert body is not None and DEVICE_STRING_RE.match(body), f"non-device string changed: {tok!r}"
    for (kind, tok), _n in (after - before).items():
        if kind == tokenize.COMMENT:
            assert tok == "# noqa: F401", f"comment added: {tok!r}"


# ------------------------------------------------------------------------------ properties


@PROPERTIES
@given(programs_with_device_code())
@pytest.mark.slow
def test_generated_programs_alone_are_never_touched_and_with_device_code_migrate_cleanly(drawn):
    """Each generated program serves two properties, so that hypothesmith, ~90 % of their cost
    (~1 CPU-s per 10 programs), generates it once: as generated, without a device word, it is
    left as it is; with device code spliced in, it migrates cleanly (check_migration)."""
    program, text = drawn
    if not re.search(r"(?i)cuda|nccl|npu|gpu|tensorflow|mindspore", program):
        result = migrate_source(program, "generated.py")
        assert result.new_text is None and result.edits == []
    check_migration(text)


@PROPERTIES
@given(st.lists(st.one_of(st.sampled_from(DEVICE_SNIPPETS + ["\\\n", "(", ")", "'''", "#", "\t", "\r\n", "\r"]),
                          st.text(max_size=20)), max_size=12).map("".join))
def test_arbitrary_text_never_raises(text):
    check_migration(text)


@PROPERTIES
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200),
    st.sampled_from(["utf-8", "utf-8-sig", "gbk", "gb18030", "latin-1"]),
    st.sampled_from(["\n", "\r\n"]),
)
def test_decode_then_encode_gives_back_the_same_bytes(body, encoding, newline):
    cookie = "" if encoding in ("utf-8", "utf-8-sig") else f"# -*- coding: {encoding} -*-{newline}"
    text = cookie + body.replace("\x00", "")
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        return  # not representable in this encoding: nothing to round-trip
    try:
        decoded, detected = decode_python(data, "x.py")
    except Exception as exc:  # a refusal must be the reader's own one-line error
        assert type(exc).__name__ == "SourceError" and "\n" not in str(exc)
        return
    assert encode(decoded, detected) == data


@pytest.mark.parametrize("snippet", DEVICE_SNIPPETS)
def test_each_snippet_alone_migrates_cleanly(snippet):
    check_migration("import torch\nimport os\nimport torch.distributed as dist\n" + snippet)
