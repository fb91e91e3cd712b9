"""The README, docs/ and the pages under results/ (issue 55): every relative link points at a file of the
repository, and at a heading of it where it names one; the README stays short; docs/' generated lists (the pipelines'
knobs, the results columns) are what the code makes now (`python -m bench.report.docs` rewrites them);
the column descriptions name every column but the knobs, and nothing else. The README's blocks made
from committed runs are checked in tests/test_report.py."""
from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path

import pytest

import pipelines
from bench import results
from bench.report import docs

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_PAGES = sorted((ROOT / "results").glob("**/*.md"))   # the runs' READMEs and reports link each other
README_MOST_LINES = 300
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def prose(page: Path) -> str:
    """The page's text without its fenced code blocks (a `[x](y)` in code is no link)."""
    return FENCE.sub("", page.read_text())


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces made hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file does not exist, or whose `#anchor` no heading of it makes."""
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):   # https:, mailto:: not a file of the repository
            continue
        path, _, anchor = urllib.parse.unquote(target).partition("#")
        file = (page.parent / path) if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and (file.suffix != ".md" or anchor not in {slug(h) for h in HEADING.findall(prose(file))}):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_points_at_a_file_and_a_heading_of_it(page):
    assert broken_links(page) == []


def test_every_relative_link_of_the_results_pages_points_at_a_file_and_a_heading_of_it():
    broken = {page.relative_to(ROOT).as_posix(): links for page in RUN_PAGES if (links := broken_links(page))}
    assert RUN_PAGES and broken == {}


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "other.md").write_text("# A `code` heading, with punctuation\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-code-heading-with-punctuation) [gone](nowhere.md) [no heading](other.md#b)\n"
                    "[here](#top) ![picture](other.md) [web](https://example.org/x)\n\n# Top\n"
                    "```\n[in code](not-a-link.md)\n```\n")
    assert broken_links(page) == ["nowhere.md", "other.md#b"]


def test_the_readme_is_at_most_300_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= README_MOST_LINES


def test_the_generated_lists_of_docs_are_what_the_code_makes_now():
    for path, text in docs.regenerated(ROOT / "docs").items():
        assert path.read_text() == text, f"{path.name} is out of date: run python -m bench.report.docs"


def test_the_knob_list_says_which_pipelines_read_each_knob():
    rows = {line.split(" | ")[0].strip("| `"): line for line in docs.knob_lines()[2:]}
    assert set(rows) == set(pipelines.declared_options())
    assert rows["prefetch_augment"].split(" | ")[5] == "`prefetch`"


def test_the_column_descriptions_name_every_column_but_the_knobs_and_only_columns():
    described = (ROOT / "docs" / "columns.md").read_text().split("## What they mean", 1)[1]
    named = {name for line in described.splitlines() if line.startswith("| `")
             for name in re.findall(r"`(\w+)`", line.split(" | ")[0])}
    columns = set(results.all_columns())
    assert named - columns == set()
    assert columns - set(pipelines.declared_options()) - named == set()


def test_every_committed_command_still_parses_and_names_files_that_exist():
    """Every `pipebench` line of a committed COMMAND.txt parses with today's command line (issue 69:
    four used --readme-answer / --readme-hosts, which it rejects), each plan (`--config`) it names
    exists, and a `--readme` page it names holds a block of that run."""
    import shlex

    from bench.cli.parser import build_parser
    parser = build_parser()
    checked = 0
    for path in sorted((ROOT / "results").glob("*/COMMAND.txt")):
        for line in path.read_text().splitlines():
            if not line.startswith("pipebench "):
                continue
            words = shlex.split(line)[1:]
            try:
                args = parser.parse_args(words)
            except SystemExit:
                pytest.fail(f"{path.relative_to(ROOT)}: {line!r} no longer parses")
            config = getattr(args, "config", None)
            assert config is None or (ROOT / config).is_file(), f"{path.relative_to(ROOT)}: no plan {config}"
            page = getattr(args, "readme", None)
            if page is not None:   # its markers name the report's folder (--out) relative to the page
                out = ROOT / (args.out or args.csv[0])   # --out, by default the one run's folder
                marker = f"of {Path(os.path.relpath(out, (ROOT / page).parent)).as_posix()}:"
                assert marker in (ROOT / page).read_text(), f"{path.relative_to(ROOT)}: {page} holds no block of it"
            checked += 1
    assert checked > 30


def test_every_repository_path_a_page_names_exists():
    """A path of the repository a page names in code (`bench/measuring/harness.py`) exists: the
    README, docs/ and every run's README (issue 69: pages named bench/busy.py and bench/standin.py
    after bench/ was grouped by role)."""
    named = re.compile(r"`((?:bench|pipelines|tests|docs|results)/[\w./-]+)`")
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "results").glob("*/README.md"))]
    missing = [f"{page.relative_to(ROOT)}: {path}" for page in pages for path in named.findall(page.read_text())
               if not (ROOT / path.rstrip(".")).exists()]
    assert missing == []
