"""What the HTML book adds to the executed notebooks when it is staged
(``i2o.book.html_build.stage``).

The notebooks in ``book/`` are never edited for presentation; their staged copies are:

- :func:`present` tags the cells: the parameters cell (and papermill's injected one) folded
  (``hide-input``); every other code cell's code removed (``remove-input``) while its figures,
  tables and text stay; a cell with nothing visible (imports, ``glue`` calls) removed altogether
  (``remove-cell``). A cell that saves figure ``<name>`` becomes a figure labelled ``fig-<name>``
  whose caption is its visible name (:func:`paper_label`: the paper's own number) in bold, then
  the heading and first sentence of the text above it; it spans the page's width
  (:data:`FULL_WIDTH`).
- :func:`figures_page` writes ``book/figures.md``: one row per figure of the manifest (its
  outputs), with its visible name linking to the figure, a thumbnail, the chapter and notebook,
  the profile it was built with and its chapter's claims (holds / fails / undecided).
- :func:`timings_table` fills the execution-time table of ``book/reproduce.md`` (between
  :data:`TIMINGS_START` and :data:`TIMINGS_END`) from the stamps of the executed notebooks.
- :func:`copy_mathjax` puts MathJax 3 (the npm package, ``npm ci``) into the book's static files
  so that math renders offline.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from i2o.base import locations
from i2o.compute import profiles
from i2o.provenance import numbers

HIDE, REMOVE_INPUT, REMOVE_CELL = "hide-input", "remove-input", "remove-cell"
HIDE_OUTPUT = "hide-output"
#: A figure spans the page's width, over the margin (sphinx-book-theme's tag), so that its text
#: is shown large enough to read.
FULL_WIDTH = "full-width"
#: Calls whose printout is a computation log (the parameters, the jobs computed): collapsed on
#: the page behind a toggle, not removed, so that the chapter's answer and figures come first.
LOG_CALLS = ("door.enter_namespace(", "figures.run_report(")
TIMINGS_START = "<!-- i2o:timings:start -->"
TIMINGS_END = "<!-- i2o:timings:end -->"
FIGURES_PAGE = "book/figures.md"
_INVISIBLE = ("application/papermill.record", "application/vnd.jupyter.widget")


# The companion chapter's figures, by the companion paper's own names (its theorems and the
# authors' rebuttal figures and table that each one reconstructs; see book/separation.ipynb).
COMPANION_LABELS = {
    "separation-sawtooth": "Companion: Theorem 1, rebuttal Table 1",
    "separation-steep": "Companion: Theorem 2, rebuttal Figure 1",
    "separation-diagonal": "Companion: Theorem 3",
    "separation-features": "Companion: rebuttal Figure 2",
    "separation-gotu": "Companion: Section 4 (GOTU)",
}
BOOK_PREFIX = "Figure B"


def _paper_number(output: str) -> str | None:
    """``figure-1-left`` → ``Figure 1 (left)``, ``figure-g3`` → ``Figure G.3``; ``None`` for a
    name that is not one of the paper's figures."""
    match = re.fullmatch(r"figure-([a-z]?)(\d+)(?:-(left|right|top|bottom))?", output)
    if not match:
        return None
    letter, number, side = match.groups()
    label = f"Figure {letter.upper()}.{number}" if letter else f"Figure {number}"
    return f"{label} ({side})" if side else label


def book_outputs() -> list[str]:
    """The manifest's outputs that are neither the paper's nor the companion's figures: the
    book's own, numbered ``Figure B1``, ``Figure B2``, … in the order of the chapters."""
    return [output for figure in profiles.figures() for output in profiles.entry(figure)["outputs"]
            if _paper_number(output) is None and output not in COMPANION_LABELS]


def paper_label(output: str) -> str:
    """The visible name of figure ``output``, everywhere in the book (caption, Figures page): the
    paper's own number (``Figure 5``, ``Figure G.2``, ``Figure 1 (left)``), the companion paper's
    name (:data:`COMPANION_LABELS`), or for the book's own figures ``Figure B<k>``, so that no
    number means two figures. Sphinx's own numbers are off (book/_ext/paper_numbers.py)."""
    if (label := _paper_number(output)) is not None:
        return label
    if output in COMPANION_LABELS:
        return COMPANION_LABELS[output]
    own = book_outputs()
    return f"{BOOK_PREFIX}{own.index(output) + 1}" if output in own else f"Book figure {output}"


def figure_label(output: str) -> str:
    return f"fig-{output}"


def _visible(output: Mapping[str, Any]) -> bool:
    if output.get("output_type") == "stream":
        return bool("".join(output.get("text", "")).strip())
    if output.get("output_type") in ("display_data", "execute_result"):
        kinds = [k for k in output.get("data", {}) if not k.startswith(_INVISIBLE)]
        return bool(kinds)
    return True  # errors


def _glued_text(name: str, values: Mapping[str, Any]) -> str:
    """A ``{glue:text}`name[:format]``` role's text from the notebook's glued ``values``; "…"
    when it is not there (or its format does not apply)."""
    key, _, spec = name.partition(":")
    if key not in values:
        return "…"
    value = str(values[key]).strip().strip("'\"")
    if not spec:
        return value
    try:
        return format(float(value), spec)
    except ValueError:
        return "…"


def _cut(sentence: str, limit: int = 300) -> str:
    """``sentence`` cut at a word before ``limit`` characters, never inside ``$…$`` math."""
    if len(sentence) <= limit:
        return sentence
    cut = sentence[:limit - 3].rsplit(" ", 1)[0]
    if cut.count("$") % 2:  # inside an inline formula: cut before it opened
        cut = cut[:cut.rfind("$")].rstrip()
    return cut + " …"


def _caption(markdown: str, label: str, values: Mapping[str, Any] | None = None) -> str:
    """``**<label>.**`` then the heading and first sentence of the text above a figure, without
    the MyST roles and targets that cannot live in a caption: a ``{glue:text}`` role becomes
    the value the notebook glued (``values``, :func:`i2o.provenance.numbers.glued`), any other
    role "…".

    The heading loses what repeats the label (``Figure 5``, ``Figure 1 (left):``) and a section
    number (``1. ``); the caption starts with the bold label, so it is always one paragraph (a
    caption starting ``1. `` would be a list, which Sphinx refuses as a caption).
    """
    lines = [line for line in markdown.splitlines() if line.strip()
             and not re.fullmatch(r"\(.+\)=", line.strip())]
    heading = next((line.lstrip("#").strip() for line in lines if line.startswith("#")), "")
    heading = re.sub(rf"^{re.escape(label)}(?![\w.])", "", heading)  # not "Figure 1" of "… 10"
    heading = re.sub(r"^\d+\.\s+", "", heading.lstrip(":.— ")).strip()
    body = " ".join(line.strip() for line in lines if not line.startswith("#"))
    body = re.sub(r"\{glue:text\}`([^`]*)`", lambda m: _glued_text(m.group(1), values or {}),
                  body)
    body = re.sub(r"\{[a-z:]+\}`[^`]*`", "…", body)
    sentence = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0] if body else ""
    sentence = _cut(sentence)
    text = ". ".join(part.rstrip(".") for part in (heading[:1].upper() + heading[1:], sentence)
                     if part)
    return f"**{label}.** {text}." if text else f"**{label}.**"


#: The source of the cell that carries a figure cell's other outputs (hidden on the page).
MOVED_OUTPUTS = "# the outputs of the figure's cell above, other than its figure"


def figure_files(name: str, code_url: str = "") -> dict[str, Any]:
    """The output put under figure ``name``: links to its PNG and PDF (staged into the book's
    ``_static/figures``, :func:`i2o.book.html_build.stage`) and, given ``code_url``, to the code
    that drew it."""
    code = (f' · drawn by <a href="{code_url}"><code>{code_url.rsplit("/src/", 1)[-1]}</code></a>'
            if code_url else "")
    text = (f'<p class="i2o-figure-files">Download: <a href="{FIGURE_FILES}/{name}.png">PNG</a>'
            f' · <a href="{FIGURE_FILES}/{name}.pdf">PDF</a>{code}</p>')
    return {"output_type": "display_data", "metadata": {}, "data": {"text/html": text}}


#: Where a page finds the figures' files, relative to a chapter's page (``book/<name>.html``).
FIGURE_FILES = "../_static/figures"


def present(notebook: dict[str, Any], outputs: Iterable[str] = (),
            code_url: str = "") -> dict[str, Any]:
    """Tag ``notebook`` (an executed notebook as JSON) in place for reading; return it.

    ``outputs``: the figure names the notebook saves (the manifest's ``outputs``). A cell whose
    code names exactly one of them (quoted) and shows exactly one image becomes that figure;
    myst-nb would wrap every display output of the cell in it, so the cell's other displays
    (tables, glue records) move to a copy of the cell placed right after it, after the links to
    the figure's files (:func:`figure_files`; ``code_url``: the chapter's figures module).
    """
    outputs = list(outputs)
    values = numbers.glued(notebook)
    last_markdown = ""
    cells: list[dict[str, Any]] = []
    for cell in notebook.get("cells", []):
        cells.append(cell)
        if cell["cell_type"] == "markdown":
            last_markdown = "".join(cell["source"])
            continue
        if cell["cell_type"] != "code":
            continue
        metadata = cell.setdefault("metadata", {})
        if "".join(cell["source"]) == PREVIEW:  # presented already
            continue
        tags = [t for t in metadata.get("tags", [])
                if t not in (HIDE, REMOVE_INPUT, REMOVE_CELL, HIDE_OUTPUT, FULL_WIDTH)]
        source = "".join(cell["source"])
        metadata["tags"] = tags
        if "parameters" in tags or "injected-parameters" in tags:
            tags.append(HIDE)
            continue
        if not any(_visible(o) for o in cell.get("outputs", [])):
            tags.append(REMOVE_CELL)
            continue
        tags.append(REMOVE_INPUT)
        if any(call in source for call in LOG_CALLS):
            tags.append(HIDE_OUTPUT)
        saved = [o for o in outputs if f'"{o}"' in source or f"'{o}'" in source]
        shown = cell.get("outputs", [])
        images = [i for i, o in enumerate(shown) if o.get("output_type") in
                  ("display_data", "execute_result") and "image/png" in o.get("data", {})]
        if len(saved) != 1 or len(images) != 1:
            continue
        tags.append(FULL_WIDTH)
        keep = [i for i, o in enumerate(shown)
                if i == images[0] or (i < images[0] and o.get("output_type") == "stream")]
        rest = [o for i, o in enumerate(shown) if i not in keep]
        cell["outputs"] = [shown[i] for i in keep]
        metadata.setdefault("mystnb", {})["figure"] = {
            "caption": _caption(last_markdown, paper_label(saved[0]), values),
            "name": figure_label(saved[0])}
        rest = [figure_files(saved[0], code_url), *rest]
        # a source of its own: myst-nb drops a code cell whose source is empty
        cells.append({"cell_type": "code", "execution_count": cell.get("execution_count"),
                      "metadata": {"tags": [REMOVE_INPUT]}, "outputs": rest,
                      "source": MOVED_OUTPUTS})
    notebook["cells"] = _with_preview(cells)
    return notebook


#: The source of the cell that shows a chapter's first figure under its answer box.
PREVIEW = "# the chapter's first figure, shown again under its answer"
#: The glue role that marks the cell holding a chapter's answer box (:mod:`i2o.verdicts.answer`).
ANSWER_MARK = "-answer"


def _split_after_answer(markdown: str) -> tuple[str, str]:
    """``markdown`` cut after the fence (``:::``) that closes the admonition holding the answer
    glue: (up to it, the rest stripped); ``(markdown, "")`` when there is no such fence."""
    lines = markdown.split("\n")
    glue = next((i for i, line in enumerate(lines)
                 if line.startswith("```{glue:md}") and ANSWER_MARK in line), None)
    if glue is None:
        return markdown, ""
    close = next((i for i in range(glue + 1, len(lines)) if lines[i].strip() == ":::"), None)
    if close is None:
        return markdown, ""
    return "\n".join(lines[:close + 1]), "\n".join(lines[close + 1:]).strip()


def _with_preview(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``cells`` with, right after the markdown cell that shows the chapter's answer, a copy of
    its first figure's image and a link to that figure (with its caption and discussion), so
    that a reader's first screen has the verdicts and a figure. Unchanged when either is missing
    or the preview is there already."""
    if any("".join(c.get("source", [])) == PREVIEW for c in cells):
        return cells
    answer = next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                   and "{glue:md}" in "".join(c["source"])
                   and ANSWER_MARK in "".join(c["source"])), None)
    first = next((c for c in cells if c["cell_type"] == "code"
                  and "figure" in c.get("metadata", {}).get("mystnb", {})), None)
    if answer is None or first is None:
        return cells
    head, rest = _split_after_answer("".join(cells[answer]["source"]))
    if rest:  # the answer box, then the figure, then the rest of the cell (the introduction)
        cells = [*cells[:answer], {**cells[answer], "source": head},
                 {"cell_type": "markdown", "metadata": {}, "source": rest}, *cells[answer + 1:]]
    name = first["metadata"]["mystnb"]["figure"]["name"]
    image = next(o for o in first["outputs"] if "image/png" in o.get("data", {}))
    label = paper_label(name.removeprefix("fig-"))
    link = {"output_type": "display_data", "metadata": {}, "data": {"text/html": (
        f'<p class="i2o-preview-link"><a href="#{name}">{label}</a>, with its caption and '
        f'discussion, is below.</p>')}}
    preview = {"cell_type": "code", "execution_count": None,
               "metadata": {"tags": [REMOVE_INPUT, FULL_WIDTH, "i2o-preview"]},
               "outputs": [image, link], "source": PREVIEW}
    return [*cells[:answer + 1], preview, *cells[answer + 1:]]


def built_figures(notebooks: Mapping[str, Path]) -> set[str]:
    """The outputs that became labelled figures in the staged notebooks ``{figure: path}``."""
    labels = set()
    for path in notebooks.values():
        if not Path(path).exists():
            continue
        for cell in json.loads(Path(path).read_text()).get("cells", []):
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            if figure.get("name", "").startswith("fig-"):
                labels.add(figure["name"].removeprefix("fig-"))
    return labels


def claims_counts(figure: str) -> dict[str, int] | None:
    """``{"holds": n, "fails": n, "undecided": n}`` of a figure's claims, or ``None``."""
    path = locations.build_dir() / "claims" / f"{figure}.json"
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return {"holds": sum(r.get("holds") is True for r in rows),
            "fails": sum(r.get("holds") is False for r in rows),
            "undecided": sum(r.get("holds") is None for r in rows)}


def stamp_of(path: Path) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text())["metadata"].get("i2o", {})
    except (OSError, ValueError, KeyError):
        return {}


def figures_page(staged: Path, notebooks: Mapping[str, Path]) -> Path:
    """Write ``book/figures.md`` into the staged book (thumbnails into ``book/_figures``)."""
    thumbs = staged / "book" / "_figures"
    thumbs.mkdir(parents=True, exist_ok=True)
    labelled = built_figures(notebooks)
    rows = []
    for figure in profiles.figures():
        entry = profiles.entry(figure)
        stamp = stamp_of(notebooks[figure])
        built = "not_built" not in stamp and bool(stamp)
        counts = claims_counts(figure) if built else None
        chapter = Path(entry["notebook"]).stem
        for output in entry["outputs"]:
            label = paper_label(output)
            png = locations.build_dir() / "figures" / f"{output}.png"
            if built and png.exists():
                shutil.copy(png, thumbs / png.name)
                thumbnail = f"![{label}](_figures/{png.name})"
            else:
                thumbnail = "not built" if not built else "no image"
            rows.append([
                f"{{ref}}`{label} <{figure_label(output)}>`" if output in labelled else label,
                thumbnail, f"{{doc}}`{Path(entry['notebook']).name} <{chapter}>`",
                f"`{stamp.get('profile')}`" if built
                else f"not built: {stamp.get('not_built', '?')}",
                (f"{counts['holds']} / {counts['fails']} / {counts['undecided']}"
                 if counts else "—")])
    header = ["Figure", "Thumbnail", "Chapter (notebook)", "Profile",
              "Claims: holds / fails / undecided"]
    lines = ["# Figures", "",
             "Every figure the book regenerates, in the order of the chapters, under the paper's "
             "own number (a link to the figure in its chapter); the companion chapter's figures "
             "under the companion paper's names; the book's own figures as Figure B1, B2, …. "
             "Then a thumbnail, the notebook (a link to its chapter), the profile this build ran "
             "it with, "
             "and the verdicts of that chapter's claims. Generated from "
             "`src/i2o/chapters/<name>/chapter.yaml` and the executed notebooks.",
             "", "```{list-table}", ":header-rows: 1", ":class: i2o-figures", ""]
    for row in [header, *rows]:
        lines.append(f"* - {row[0]}")
        lines += [f"  - {cell}" for cell in row[1:]]
    lines += ["```", ""]
    page = staged / FIGURES_PAGE
    page.write_text("\n".join(lines))
    return page


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{seconds:.1f} s"


def timings_table(notebooks: Mapping[str, Path]) -> str:
    """A Markdown table of the execution time of each notebook, from its stamp."""
    lines = ["| figure | profile | execution time | executed on | commit |",
             "|---|---|---|---|---|"]
    for figure, path in notebooks.items():
        stamp = stamp_of(path)
        if "seconds" in stamp:
            lines.append(f"| `{figure}` | `{stamp.get('profile')}` | {_duration(stamp['seconds'])}"
                         f" | {stamp.get('date', '?')} | `{stamp.get('git', '?')}` |")
        else:
            why = stamp.get("not_built", "not executed")
            lines.append(f"| `{figure}` | — | not built ({why.replace('|', '/')}) | — | — |")
    return "\n".join(lines)


def fill_between(page: Path, start: str, end: str, text: str) -> bool:
    """Replace what lies between the markers ``start`` and ``end`` of ``page`` by ``text``;
    ``False`` (the page untouched) if it lacks them."""
    content = page.read_text()
    if start not in content or end not in content:
        return False
    head, rest = content.split(start, 1)
    _, tail = rest.split(end, 1)
    page.write_text(f"{head}{start}\n{text}\n{end}{tail}")
    return True


def fill_timings(page: Path, notebooks: Mapping[str, Path]) -> bool:
    """Replace what lies between the timing markers of ``page``; ``False`` if it has none."""
    return fill_between(page, TIMINGS_START, TIMINGS_END, timings_table(notebooks))


def mathjax_source() -> Path | None:
    """MathJax 3's browser bundle as installed by ``npm ci`` (``node_modules/mathjax/es5``)."""
    folder = locations.repo_root() / "node_modules" / "mathjax" / "es5"
    return folder if (folder / "tex-chtml.js").is_file() else None


def copy_mathjax(static: Path) -> bool:
    """Copy MathJax into ``static/mathjax``; ``False`` (math then from the CDN) when absent."""
    source = mathjax_source()
    if source is None:
        return False
    shutil.copytree(source, static / "mathjax", dirs_exist_ok=True)
    return True
