"""The documentation's links resolve: every relative link in README.md, DEVELOPERS.md and
docs/**/*.md names a file of the repository, every ``#anchor`` a heading of its target (GitHub's
slug rule), and every fenced code block is closed (an open fence swallows the rest of a page).
Plain mentions count too, in the pages and in the code: ``docs/NAME.md`` names a page that
exists, and ``docs/NAME.md §N`` a numbered section of it."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "DEVELOPERS.md", *(ROOT / "docs").rglob("*.md")])

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
# a code span may run over a line break, never over a blank line (the end of a paragraph)
CODE_SPAN = re.compile(r"(`+)(?:[^`\n]|\n(?![ \t]*\n))+?\1")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*<?(\S+?)>?(?:[ \t].*)?$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
# a page named in prose or code, root-relative, with the section number that may follow it
MENTION = re.compile(r"(?<![\w/.-])(docs/[\w./-]*?\.md)`?(?:[ \t]*§[ \t]*(\d+))?")
NUMBERED_HEADING = re.compile(r"^#{1,6}[ \t]+§?(\d+)\.?[ \t]", re.M)
SOURCES = sorted(
    path
    for folder in ("puicl_common", "puicl_model", "prior_gen", "trainer", "benchmark", "tests",
                   "speed", "studies", "scripts", "examples", "configs")
    for path in (ROOT / folder).rglob("*")
    if path.suffix in {".py", ".yaml", ".sh", ".c"} and "__pycache__" not in path.parts
    and path != Path(__file__).resolve()  # this file's examples name pages that do not exist
)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# what GitHub keeps of a heading: letters, marks, decimal and letter numbers, connectors (_)
SLUG_CATEGORIES = {"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "Pc"}


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its rendered text lower-cased, keeping letters,
    combining marks, digits, underscores, hyphens and spaces, each space made a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    kept = (c for c in text.lower() if c in "- " or unicodedata.category(c) in SLUG_CATEGORIES)
    return "".join(kept).replace(" ", "-")


def split_fences(text: str) -> tuple[list[str], list[int]]:
    """The page's lines with fenced code blanked out, and the line numbers (1-based) of
    fences that are never closed."""
    prose: list[str] = []
    opening: tuple[str, int] | None = None  # (fence characters, line number)
    for number, line in enumerate(text.splitlines(), start=1):
        fence = FENCE.match(line)
        if opening is None:
            if fence:
                opening = (fence.group(1), number)
                prose.append("")
            else:
                prose.append(line)
            continue
        marker = opening[0]
        closes = (
            fence is not None
            and fence.group(1)[0] == marker[0]
            and len(fence.group(1)) >= len(marker)
            and line.strip() == fence.group(1)
        )
        if closes:
            opening = None
        prose.append("")
    return prose, [] if opening is None else [opening[1]]


def anchors(page: Path) -> set[str]:
    prose, _ = split_fences(page.read_text(encoding="utf-8"))
    seen: Counter[str] = Counter()
    found: set[str] = set()
    for line in prose:
        heading = HEADING.match(line)
        if heading:
            slug = github_slug(heading.group(2).strip())
            found.add(slug if seen[slug] == 0 else f"{slug}-{seen[slug]}")  # repeats get -1, -2
            seen[slug] += 1
    found.update(HTML_ANCHOR.findall("\n".join(prose)))
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every inline link, image and reference definition outside
    code."""
    prose, _ = split_fences(text)
    # blank code spans to the same length so that offsets still give line numbers
    joined = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), "\n".join(prose))
    found = [*INLINE_LINK.finditer(joined), *REFERENCE_DEFINITION.finditer(joined)]
    return sorted((joined.count("\n", 0, m.start()) + 1, m.group(1)) for m in found)


def problems(page: Path, root: Path = ROOT) -> list[str]:
    """One line per broken link or unclosed fence of ``page``."""
    text = page.read_text(encoding="utf-8")
    name = page.relative_to(root).as_posix()
    _, unclosed = split_fences(text)
    found = [f"{name}:{line}: code fence opened here is never closed" for line in unclosed]
    for line, target in links(text):
        if SCHEME.match(target):
            continue  # a web address; not checked offline
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not destination.is_relative_to(root.resolve()) or not destination.exists():
            found.append(f"{name}:{line}: link {target!r}: no such file in the repository")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            found.append(f"{name}:{line}: link {target!r}: no heading with that anchor")
    return found


def broken_mentions(text: str, root: Path = ROOT) -> list[str]:
    """Each ``docs/NAME.md`` mention of ``text`` whose page, or whose ``§N``, does not exist."""
    found = []
    for match in MENTION.finditer(text):
        name, section = match.group(1), match.group(2)
        line = text.count("\n", 0, match.start()) + 1
        page = root / name
        if not page.is_file():
            found.append(f"{line}: {name}: no such page")
        elif section and section not in NUMBERED_HEADING.findall(page.read_text("utf-8")):
            found.append(f"{line}: {name} §{section}: the page has no section {section}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_link_resolves_and_every_fence_closes(page: Path) -> None:
    assert problems(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_pages_and_sections_named_in_the_pages_exist(page: Path) -> None:
    assert broken_mentions(page.read_text(encoding="utf-8")) == []


def test_pages_and_sections_named_in_the_code_exist() -> None:
    found = {
        path.relative_to(ROOT).as_posix(): broken_mentions(path.read_text(encoding="utf-8"))
        for path in SOURCES
    }
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_pages_are_found() -> None:
    names = {page.relative_to(ROOT).as_posix() for page in PAGES}
    assert {"README.md", "DEVELOPERS.md", "docs/architecture.md", "docs/decisions.md"} <= names


def test_slugs_follow_github() -> None:
    assert github_slug("7. Model and classifier") == "7-model-and-classifier"
    assert github_slug("The `cpu_kernel` backend — why") == "the-cpu_kernel-backend--why"
    assert github_slug("AUC at π = 0.2 (see [card](x.md))") == "auc-at-π--02-see-card"
    assert github_slug("The class prior π̂, x² ≥ 1") == "the-class-prior-π̂-x--1"


def test_a_broken_link_a_missing_anchor_and_an_open_fence_are_reported(tmp_path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Same\n\n## Same\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n"
        "[ok](other.md#same-1) [ok](#title) [ok](https://example.org/none) `[code](none.md)`\n"
        "[gone](missing.md) and [no anchor](other.md#absent)\n"
        "[outside](../../etc/passwd)\n\n"
        "```bash\n[in code](none.md)\n",
        encoding="utf-8",
    )
    assert problems(page, root=tmp_path) == [
        "page.md:7: code fence opened here is never closed",
        "page.md:4: link 'missing.md': no such file in the repository",
        "page.md:4: link 'other.md#absent': no heading with that anchor",
        "page.md:5: link '../../etc/passwd': no such file in the repository",
    ]


def test_a_missing_page_or_section_named_in_prose_is_reported(tmp_path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## 1. Start\n\n## §2 End\n", "utf-8")
    text = "See `docs/guide.md` §1, docs/guide.md §2,\ndocs/guide.md §3 and docs/gone.md.\n"
    assert broken_mentions(text, root=tmp_path) == [
        "2: docs/guide.md §3: the page has no section 3",
        "2: docs/gone.md: no such page",
    ]
