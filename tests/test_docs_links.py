"""The README stays a front door: every relative link in it (a docs page, an image, a source file) names a file of
the repository, every anchor a heading of the page it points into, and it stays short. The pages under docs/ are
checked by `make docs` (MkDocs in strict mode)."""

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 200

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def prose(text: str) -> str:
    """The text without code blocks and code spans, where brackets are code, not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    body = prose(text)
    return LINK.findall(body) + REFERENCE.findall(body)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it (and MkDocs, for ASCII headings): lower case, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors by its text
    text = unicodedata.normalize("NFKC", text).lower().replace("`", "")
    text = "".join(char for char in text if char.isalnum() or char in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(heading) for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))}


def local_links(page: Path) -> list[tuple[str, Path, str]]:
    """(link, file it names, anchor) of every link of the page that is not to another site."""
    found = []
    for target in links(page.read_text(encoding="utf-8")):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        found.append((target, (page.parent / path).resolve() if path else page, anchor))
    return found


def test_the_readme_links_only_to_files_that_exist():
    found = local_links(README)
    assert found, "the README links to its docs"
    missing = [target for target, path, _ in found if not path.exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
    outside = [target for target, path, _ in found if not path.is_relative_to(ROOT)]
    assert not outside, f"README.md links outside the repository: {outside}"


def test_the_readmes_anchors_name_headings():
    broken = [
        target
        for target, path, anchor in local_links(README)
        if anchor and path.suffix == ".md" and path.exists() and anchor not in anchors(path)
    ]
    assert not broken, f"README.md links to anchors no heading makes: {broken}"


def test_the_readme_maps_every_docs_page():
    linked = {path for _, path, _ in local_links(README)}
    unmapped = sorted(page.name for page in (ROOT / "docs").glob("*.md") if page.resolve() not in linked)
    assert not unmapped, f"docs pages the README's map leaves out: {unmapped}"


def test_the_readme_stays_short():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move reference material to docs/ (at most {MAX_LINES})"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "see [the docs](docs/api.md#errors) and ![shot](docs/img/review.png)",
            ["docs/api.md#errors", "docs/img/review.png"],
        ),
        ("[site](https://example.com) `[not](a-link.md)`", ["https://example.com"]),
        ("```python\nx = a[0](1)\n```\n[ref]: docs/index.md", ["docs/index.md"]),
    ],
)
def test_links_are_read_from_prose_only(text, expected):
    assert links(text) == expected


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [("Review over REST", "review-over-rest"), ("`manage.py queue`", "managepy-queue"), ("A job kind", "a-job-kind")],
)
def test_anchors_are_made_as_github_makes_them(heading, anchor):
    assert slug(heading) == anchor
