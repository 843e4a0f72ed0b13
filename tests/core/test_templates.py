"""Templates as Django reads them: a {# #} comment is one line only, and one that runs over lines is printed on the
page as text."""

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
UNCLOSED_COMMENT = re.compile(r"\{#(?![^\n]*#\})")


def test_no_template_comment_runs_over_lines():
    spread = [
        f"{path.relative_to(TEMPLATES)}:{text.count(chr(10), 0, match.start()) + 1}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for text in [path.read_text()]
        for match in UNCLOSED_COMMENT.finditer(text)
    ]
    assert not spread, f"{{# #}} comments over several lines (use {{% comment %}}): {spread}"
