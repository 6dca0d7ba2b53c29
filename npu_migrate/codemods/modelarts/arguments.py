"""What an argparse argument of an entry script holds: the data it reads, the outputs it writes
(dests split at "_", their help text, default and type), for `modelarts_setup(data=..., outputs=...)`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional

import libcst as cst

from ...imports import dotted_name
from ..strings import string_value
from ..syntax import is_true, keyword_arg

# How data and output arguments are recognised (argparse dests split at "_"): see
# is_data_argument() and is_output_argument().
DATA_WORDS = {"data", "dataset", "datasets", "dataroot", "datadir", "datapath", "corpus", "root", "image", "images",
              "img", "imgs", "attr", "attrs", "annotation", "annotations", "ann", "anno", "label", "labels",
              "train", "val", "valid", "test", "input", "inputs", "mindrecord", "tfrecord", "lmdb", "wav", "audio",
              "text", "txt", "csv", "json", "list"}
GENERIC_DATA_NAMES = {"data", "dataset", "dataroot", "datadir", "root", "corpus", "input", "data_root"}
NOT_DATA_WORDS = {"resume", "pretrain", "pretrained", "load", "checkpoint", "ckpt", "weight", "weights", "model",
                  "config", "cfg", "log", "logs", "save", "out", "outf", "output", "outputs", "result", "results",
                  "sample", "samples", "cache", "tmp", "url", "name", "type", "format", "mode", "backend", "vocab",
                  "tokenizer", "size", "num", "workers", "split", "ratio", "snapshot", "export", "dist",
                  "upload", "uploads"}  # --s3_upload_dir: where the run sends its results, never its input
OUTPUT_WORDS = {"save", "saved", "saving", "out", "outf", "output", "outputs", "outdir", "ckpt", "ckpts", "checkpoint",
                "checkpoints", "log", "logs", "logdir", "logging", "sample", "samples", "result", "results", "snapshot",
                "snapshots", "tensorboard", "tb", "summary", "summaries", "exp", "experiment", "work", "workdir",
                "savedir", "model"}
SINGLE_OUTPUT_NAMES = {"save", "out", "outf", "output", "outputs", "outdir", "results", "logs", "logdir",
                       "checkpoints", "snapshot", "savedir", "workdir", "save_to"}
INPUT_WORDS = {"resume", "load", "pretrained", "pretrain", "restore", "init", "initial", "finetune", "teacher", "from"}
# A default folder with one of these names is where a run writes (`--train_dir` default "runs":
# rl_games/IsaacGymEnvs' checkpoints and summaries), whatever the argument's name says.
OUTPUT_FOLDER_NAMES = {"runs", "logs", "output", "outputs", "checkpoints", "ckpts", "results", "snapshots",
                       "summaries", "tensorboard", "experiments", "work_dirs"}
PATH_SUFFIXES = ("dir", "path", "folder", "root", "file", "prefix", "location")
# The data of one split named so, `--train_dataset` (bert-pytorch: "train dataset for train bert",
# required), `--eval_file data/dev.txt`: a file or a path read, whatever the help says, where the
# run needs it (required) or has one by default. Not an optional one without a default
# (bert-pytorch's `--test_dataset`, stanza's `--eval_file`): the runtime gives a data argument
# left None the input's folder (modelarts_setup: `--data_dir` unset reads data_url), and such a
# script would open that folder as its test file. A split's *folder* may be where its results go
# (`--eval_dir`): not taken by this.
SPLIT_WORDS = {"train", "val", "valid", "test", "eval", "dev"}
SPLIT_DATA_SUFFIXES = {"file", "path", "data", "dataset", "corpus"}
NAME_HELP_RE = re.compile(r"(?i)\bname\b")
NOT_OUTPUT_RE = re.compile(r"(?i)\b(load|loading|resume|resuming|pretrain\w*|restore|init\w*|continue training|"
                           r"read from|evaluate|finetune from)\b")
OUTPUT_HELP_RE = re.compile(r"(?i)\b(save[sd]?|saving|output|outputs|write|written|store[sd]?|checkpoints?|logs?|"
                            r"results?|samples?)\b")
# A help text saying the path is where the run puts something ("directory where the visualization
# images will be saved", "folder to write the predicted labels to") names an output, whatever it
# puts there (mmpose's --show-dir was taken for data: "images"); not a download folder (NPU217).
OUTPUT_DESTINATION_RE = re.compile(r"(?i)\b(will|would|shall|to)\s+be\s+(saved|written|stored|dumped|exported)\b|"
                                   r"\b(where|which|folder|directory|dir|path|file)\s+to\s+(save|write|store|dump)\b")
DOWNLOAD_RE = re.compile(r"(?i)\bdownload")
DATA_HELP_RE = re.compile(r"(?i)\b(data|dataset|datasets|corpus|images?|annotations?|labels?)\b|数据")
PATH_TYPES = {"str", "Path", "pathlib.Path", "os.path.abspath", "os.path.expanduser", "os.path.realpath"}
PATH_WORDS_RE = re.compile(r"(?i)\b(dir|directory|folder|path|root|location)\b|目录|路径|文件夹")

URL_ARGS = ("data_url", "train_url")
HELP = {
    "data_url": "ModelArts input: OBS URL or local path",
    "train_url": "ModelArts output: OBS URL or local path",
}


@dataclass
class Argument:
    dest: str
    call: cst.Call
    positional: bool
    required: bool
    path_like: bool  # default/help/metavar say it holds a path
    plain_value: bool  # a single string value: no choices, action, numeric type or nargs list
    help: str = ""  # the literal text of help= (pieces of an expression joined)
    default: Optional[str] = None  # a string default
    enumerates: bool = False  # its help lists names ("cifar10 | lsun | mnist")


def _literal_text(node: Optional[cst.BaseExpression]) -> str:
    """The string literals in an expression, joined (`'arch: ' + ' | '.join(names)`)."""
    if node is None:
        return ""
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - odd escapes: no text
            return ""
        return value if isinstance(value, str) else ""
    return " ".join(_literal_text(child) for child in node.children if isinstance(child, cst.BaseExpression))


ENUMERATION_RE = re.compile(r"\w\s*\|\s*\w|\bone of\b|\bchoose from\b|\bname of\b|\bwhich dataset\b|\{\w+,", re.IGNORECASE)


def describe_argument(call: cst.Call) -> Optional[Argument]:
    """What an `add_argument(...)` call defines, when its option strings are literals."""
    flags = []
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            continue
        value = string_value(arg.value)
        if value is None:
            return None
        flags.append(value)
    if not flags:
        return None
    positional = not flags[0].startswith("-")
    dest_arg = keyword_arg(call, "dest")
    dest = string_value(dest_arg.value) if dest_arg is not None else None
    if dest is None:
        longs = [f for f in flags if f.startswith("--")]
        dest = (longs[0] if longs else flags[0]).lstrip("-").replace("-", "_")
    nargs = keyword_arg(call, "nargs")
    required = positional and not (nargs is not None and string_value(nargs.value) in ("?", "*"))
    required = required or is_true(keyword_arg(call, "required"))
    type_arg = keyword_arg(call, "type")
    numeric = type_arg is not None and (dotted_name(type_arg.value) or "") not in PATH_TYPES
    list_nargs = nargs is not None and string_value(nargs.value) != "?"
    default = keyword_arg(call, "default")
    default_text = string_value(default.value) if default is not None else None
    other_default = default is not None and default_text is None and not (
        isinstance(default.value, cst.Name) and default.value.value == "None")
    plain = not (numeric or list_nargs or other_default or keyword_arg(call, "choices") or keyword_arg(call, "action"))
    help_arg = keyword_arg(call, "help")
    help_text = _literal_text(help_arg.value) if help_arg is not None else ""
    texts = [help_text]
    metavar = keyword_arg(call, "metavar")
    metavar_text = string_value(metavar.value) if metavar is not None else None
    if metavar_text:
        texts.append(metavar_text)
    path_like = bool(default_text and (default_text.startswith((".", "~", "/")) or "/" in default_text or "\\" in default_text))
    path_like = path_like or any(PATH_WORDS_RE.search(t) for t in texts)
    enumerates = bool(ENUMERATION_RE.search(help_text))
    return Argument(dest, call, positional, required, path_like, plain, help_text, default_text, enumerates)


def _words(dest: str) -> List[str]:
    return [w for w in dest.lower().split("_") if w]


def _default_names_output_folder(arg: Argument) -> bool:
    """`runs`, `./logs/`, `output/exp1`: a default folder named for what a run writes (not a
    file in one: `checkpoints/best.pt` is as often read)."""
    if not arg.default:
        return False
    parts = [p for p in re.split(r"[/\\]", arg.default) if p not in ("", ".")]
    return bool(parts) and parts[0] in OUTPUT_FOLDER_NAMES and "." not in parts[-1]


def is_output_argument(arg: Argument) -> bool:
    """--save model.pt, --outf, --output_dir, --model_save_dir, --log_dir, --sample_dir, ..."""
    if not arg.plain_value or arg.enumerates or arg.dest in URL_ARGS or NOT_OUTPUT_RE.search(arg.help):
        return False
    words = _words(arg.dest)
    if set(words) & INPUT_WORDS:
        return False  # --resume, --pretrained_path, --load_dir: read, not written
    if arg.dest in SINGLE_OUTPUT_NAMES or (len(words) == 1 and words[0] in OUTPUT_WORDS - {"model", "log"}):
        return True
    if words[-1] in PATH_SUFFIXES and words[-1] != "file" and _default_names_output_folder(arg):
        return True  # --train_dir runs: "train" reads as data, the default says where it writes
    if not set(words) & OUTPUT_WORDS:
        if not (OUTPUT_HELP_RE.search(arg.help) and arg.path_like):
            return False
        destination = OUTPUT_DESTINATION_RE.search(arg.help) and not DOWNLOAD_RE.search(arg.help)
        return bool(destination or not DATA_HELP_RE.search(arg.help))
    if "model" in words and not ({"dir", "save", "saved", "folder", "output"} & set(words)):
        return False  # --model_path is usually what is loaded
    return words[-1] in PATH_SUFFIXES or words[-1].endswith(PATH_SUFFIXES) or arg.path_like


def is_data_argument(arg: Argument) -> bool:
    """--data, --dataroot ("path to dataset"), --data_dir, --celeba_image_dir, --attr_path, ...;
    never a dataset *name* (choices, or a help text listing names)."""
    if not arg.plain_value or arg.enumerates or arg.dest in URL_ARGS or is_output_argument(arg):
        return False
    words = _words(arg.dest)
    if set(words) & NOT_DATA_WORDS:
        return False
    if len(words) == 2 and words[0] in SPLIT_WORDS and words[1] in SPLIT_DATA_SUFFIXES \
            and (arg.required or arg.default) and not NAME_HELP_RE.search(arg.help):
        return True  # train_dataset (required), eval_file with a default (SPLIT_WORDS)
    if set(words) & DATA_WORDS and len(words) > 1 and words[-1] in PATH_SUFFIXES:
        return True  # data_dir, celeba_image_dir, attr_path, train_root
    if arg.dest in GENERIC_DATA_NAMES or "".join(words) in GENERIC_DATA_NAMES:
        return arg.path_like or bool(arg.default is None and DATA_HELP_RE.search(arg.help))
    if set(words) & DATA_WORDS:
        return arg.path_like
    return bool(DATA_HELP_RE.search(arg.help) and PATH_WORDS_RE.search(arg.help))


def output_rank(arg: Argument) -> int:
    """Output folders first (their files go to the top of train_url), then the others."""
    words = set(_words(arg.dest))
    if words & {"output", "outputs", "out", "outf", "outdir", "save", "savedir", "ckpt", "checkpoint", "checkpoints",
                "model", "work", "workdir", "exp", "experiment"}:
        return 0
    return 1


def generated_argument(argument: Optional[Argument]) -> bool:
    """Whether an existing --data_url/--train_url argument is the one this tool adds."""
    if argument is None:
        return False
    help_arg = keyword_arg(argument.call, "help")
    return help_arg is not None and string_value(help_arg.value) == HELP.get(argument.dest)
