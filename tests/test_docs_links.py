"""Every document the repository points to is in the repository (issue 43: docs that stand alone).

Three kinds of reference are checked, in every text file of the tree (virtual environments, `.git`, caches and
build metadata left out):

- a relative markdown link in a `.md` file, `[text](path)`, `[text](path#anchor)` or `[text](#anchor)`:
  the path must exist relative to the file, and an anchor must be a heading's slug (as GitHub makes it) or an
  `<a id=...>` of the target;
- a mention of a document under one of our top-level folders, such as `docs/sources.md#hardware` in a TOML
  comment or `tests/corpus/README.md` in a docstring: the path must exist from the repository's root, and the
  anchor, if any, must be in it (paths under folders we do not have, such as nccl-tests' `doc/PERFORMANCE.md`,
  name another repository's files and are not ours to check);
- a bare document name in capitals (`CONTRIBUTING.md`, or a design note that was never added): it must exist at the root or beside the
  file that names it, unless a folder precedes it (then it is a path, judged by the rule above or another
  repository's).

The checker is `broken_references(root)`; its buggy twin is a small tree written to tmp_path with one broken
reference of each kind (and the same tree fixed, which must come back clean).
"""
from __future__ import annotations

import os
import re
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = {".git", ".venv", "venv", ".pkbdata", "__pycache__", ".pytest_cache", ".ruff_cache", "node_modules",
             "build", "dist", "shared"}
TEXT_EXT = (".md", ".py", ".toml", ".txt", ".sh", ".cfg", ".ini", ".yaml", ".yml", ".json", ".cu", ".cuh", ".h")

LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")           # [text](target); images are left alone
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
BARE_CAPS = re.compile(r"(?<![\w./-])([A-Z][A-Z0-9_]+\.md)\b")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)          # a link in a heading keeps its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    out = []
    for ch in text:
        if ch in " -":
            out.append("-")
        elif ch == "_" or unicodedata.category(ch)[0] in "LN":
            out.append(ch)
    return "".join(out)


def anchors(md_text: str) -> set[str]:
    """The anchors a markdown document defines (duplicate headings get -1, -2, ... as on GitHub)."""
    found: set[str] = set(HTML_ID.findall(md_text))
    seen: dict[str, int] = {}
    in_code = False
    for line in md_text.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        m = None if in_code else HEADING.match(line)
        if m:
            base = _slug(m.group(2))
            n = seen.get(base, 0)
            found.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
    return found


def _files(root: str):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in filenames:
            if name.endswith(TEXT_EXT):
                yield os.path.join(dirpath, name)


def broken_references(root: str, skip: tuple[str, ...] = ()) -> list[str]:
    """'file:line: reference (why)' for every reference to a document that is not in the tree under root
    (files in skip, absolute paths, left out)."""
    tops = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and d not in SKIP_DIRS
            and not d.startswith(".")}
    mention = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*?[\w-]+\.md)(#[\w-]+)?" % "|".join(map(re.escape, sorted(tops)))) \
        if tops else None
    anchor_cache: dict[str, set[str]] = {}

    def has_anchor(path: str, anchor: str) -> bool:
        if path not in anchor_cache:
            with open(path, encoding="utf-8", errors="replace") as f:
                anchor_cache[path] = anchors(f.read())
        return anchor in anchor_cache[path]

    problems = []
    for path in _files(root):
        if os.path.abspath(path) in skip:
            continue
        rel = os.path.relpath(path, root)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        here = os.path.dirname(path)
        for lineno, line in enumerate(text.splitlines(), 1):
            where = f"{rel}:{lineno}"
            if path.endswith(".md"):
                for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):   # code spans are not links
                    if re.match(r"^[a-z][a-z0-9+.-]*:", target):          # http:, https:, mailto:
                        continue
                    file_part, _, anchor = target.partition("#")
                    dest = path if not file_part else os.path.normpath(os.path.join(here, file_part))
                    if not os.path.exists(dest):
                        problems.append(f"{where}: {target} (no such file)")
                    elif anchor and dest.endswith(".md") and not has_anchor(dest, anchor):
                        problems.append(f"{where}: {target} (no such anchor)")
            if mention is not None:
                for doc, anchor in mention.findall(line):
                    dest = os.path.join(root, doc)
                    if not os.path.exists(dest):
                        problems.append(f"{where}: {doc} (no such file)")
                    elif anchor and not has_anchor(dest, anchor[1:]):
                        problems.append(f"{where}: {doc}{anchor} (no such anchor)")
            for name in BARE_CAPS.findall(line):
                if not (os.path.exists(os.path.join(root, name)) or os.path.exists(os.path.join(here, name))):
                    problems.append(f"{where}: {name} (no such file)")
    return problems


def test_every_reference_in_the_repository_resolves():
    problems = broken_references(ROOT, skip=(os.path.abspath(__file__),))   # this file plants broken ones
    assert not problems, "references to documents not in the repository:\n" + "\n".join(problems)


def _tree(tmp_path, broken: bool):
    """A small repository: docs/guide.md with a heading and an id, a TOML and a module that cite it."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "topologies").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "CONTRIBUTING.md").write_text("# Contributing\n")
    (tmp_path / "docs" / "guide.md").write_text(
        "# Guide\n\n## The model (`pkg/model.py`)\n\n<a id=\"facts\"></a>\n## Facts\n\n"
        "See [the facts](#facts) and [the log](log.md#2026-12-05).\n")
    (tmp_path / "docs" / "log.md").write_text("# Log\n\n## 2026-12-05\n")
    doc = "docs/" + ("gone.md" if broken else "guide.md")
    anchor = "#no-such-heading" if broken else "#the-model-pkgmodelpy"
    caps = "DESIGN" if broken else "CONTRIBUTING"
    (tmp_path / "topologies" / "m.toml").write_text(f'# bandwidth: {doc}#facts\nx = 1\n')
    guide = "docs/" + "guide.md"                                   # split so this file itself names no doc
    (tmp_path / "pkg" / "model.py").write_text(f'"""What it does: {guide}{anchor}; rules: {caps}.md."""\n')
    link = "(log.md#no-such-day)" if broken else "(log.md#2026-12-05)"
    (tmp_path / "docs" / "index.md").write_text(f"# Index\n\n[the day]{link}, [guide](guide.md)\n")


def test_planted_broken_references_are_each_found(tmp_path):
    _tree(tmp_path, broken=True)
    problems = broken_references(str(tmp_path))
    assert any("topologies/m.toml:1: docs/gone.md (no such file)" in p for p in problems), problems
    assert any("pkg/model.py:1: docs/guide.md#no-such-heading (no such anchor)" in p for p in problems), problems
    assert any("pkg/model.py:1: DESIGN.md (no such file)" in p for p in problems), problems
    assert any("docs/index.md:3: log.md#no-such-day (no such anchor)" in p for p in problems), problems
    assert len(problems) == 4, problems


def test_the_fixed_twin_is_clean(tmp_path):
    _tree(tmp_path, broken=False)
    assert broken_references(str(tmp_path)) == []


def test_slugs_follow_github():
    assert _slug("Device kernels on one GPU (`benchmarks/device_kernel_model_check.py`)") == \
        "device-kernels-on-one-gpu-benchmarksdevice_kernel_model_checkpy"
    assert _slug("Known-good solutions at full size (`pkb screen`, 8 ranks, hgx-h100)") == \
        "known-good-solutions-at-full-size-pkb-screen-8-ranks-hgx-h100"
    assert anchors("## A\n## A\n") == {"a", "a-1"}
