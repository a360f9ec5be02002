"""The HTML book: the book sources staged with the executed notebooks (a page saying "not built"
and why for a chapter that did not run) and built by Jupyter Book 1 into ``_build/html``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

from i2o.base import locations
from i2o.book import claims_page, published, site
from i2o.book.execute import exclusive, failure_path
from i2o.book.stamps import STAMP_KEY, executed_path
from i2o.compute import profiles, timing_tables
from i2o.provenance import numbers, robustness_page


def stage() -> Path:
    """Assemble the book sources with executed notebooks into ``_build/stage``."""
    root, staged = locations.repo_root(), locations.build_dir() / "stage"
    if staged.exists():
        shutil.rmtree(staged)
    staged.mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(root / name, staged / name)
    shutil.copytree(root / "book", staged / "book",
                    ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints", "_build"))
    notebooks = {}
    for figure in profiles.figures():
        notebook = profiles.entry(figure)["notebook"]
        executed = executed_path(figure)
        reason = failure_path(figure).read_text().strip() if failure_path(figure).exists() \
            else None
        if reason is None and not executed.exists():
            reason = f"not executed yet: run `make fig-{figure}` or `make book`"
        notebooks[figure] = staged / notebook
        if reason is None:  # presented for reading: plumbing hidden, figures numbered
            shown = site.present(json.loads(executed.read_text()),
                                 profiles.entry(figure)["outputs"], code_url(figure))
            notebooks[figure].write_text(json.dumps(shown, indent=1))
        else:
            _write_not_built(notebooks[figure], figure, reason)
    copy_figure_files(staged)
    site.figures_page(staged, notebooks)
    fallback = published.robustness_fallback()
    robustness_page.write_page(staged, fallback)
    claims_page.write(staged, notebooks, fallback)  # anchors each chapter's claim rows too
    site.fill_timings(staged / "book" / "reproduce.md", notebooks)
    published.fill_reproduce(staged / "book" / "reproduce.md")
    timing_tables.fill_reproduce(staged / "book" / "reproduce.md")
    numbers.write()  # every glued number and claim row, served with the book (html())
    config = yaml.safe_load((staged / "_config.yml").read_text())
    if site.copy_mathjax(staged / "book" / "_static"):  # math rendered offline
        config.setdefault("sphinx", {}).setdefault("config", {})["mathjax_path"] = \
            "mathjax/tex-chtml.js"
    else:
        print("[i2o] MathJax is not installed (npm ci): the pages load it from a CDN",
              file=sys.stderr)
    (staged / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False,
                                                       allow_unicode=True))
    return staged


def code_url(figure: str) -> str:
    """The repository page of ``figure``'s figures module (``""`` when it has none)."""
    package = profiles.entry(figure)["package"]
    module = Path("src", *package.split(".")) / "figures.py"
    if not (locations.repo_root() / module).exists():
        return ""
    config = yaml.safe_load((locations.repo_root() / "_config.yml").read_text())
    repository = config["repository"]
    return f"{repository['url']}/blob/{repository.get('branch', 'main')}/{module.as_posix()}"


def copy_figure_files(staged: Path) -> None:
    """Every figure's PNG and PDF of this build into the staged book's ``_static/figures``,
    which the HTML serves beside the pages (:data:`i2o.book.site.FIGURE_FILES`)."""
    target = staged / "book" / "_static" / "figures"
    target.mkdir(parents=True, exist_ok=True)
    found = locations.build_dir() / "figures"
    for path in sorted(found.glob("*.png")) + sorted(found.glob("*.pdf")):
        shutil.copy(path, target / path.name)


def _write_not_built(path: Path, figure: str, reason: str) -> None:
    """A one-page notebook saying the chapter was not built, and why."""
    title = profiles.entry(figure)["title"]
    shown = reason.replace("`", "'")
    text = (f"# {title}\n\n:::{{error}}\n**Not built**: {shown}\n:::\n\n"
            f"This chapter's notebook did not run in the last build. Fix the cause and run "
            f"`make fig-{figure}` (or `make book`).")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])
    notebook.metadata[STAMP_KEY] = {"figure": figure, "not_built": reason}
    nbformat.write(notebook, str(path))


def html(strict: bool = False) -> Path:
    """Build the HTML book into ``_build/html`` from the staged sources (one build at a time).

    ``strict``: every Sphinx warning is an error (the tests' build: the book has none).
    """
    with exclusive("html", "the HTML build"):
        return _build_html(strict)


def _build_html(strict: bool = False) -> Path:
    staged = stage()
    out = locations.build_dir()
    command = ["jupyter-book", "build", str(staged), "--path-output", str(staged),
               "--builder", "html", *(["--warningiserror", "--keep-going"] if strict else [])]
    jb = Path(sys.executable).with_name("jupyter-book")
    command[0] = str(jb) if jb.exists() else command[0]
    completed = subprocess.run(command, cwd=staged, capture_output=True, text=True)
    log = out / "jupyter-book.log"
    log.write_text(completed.stdout + completed.stderr)
    if completed.returncode != 0:
        sys.stderr.write(completed.stdout[-4000:] + completed.stderr[-4000:])
        raise RuntimeError(f"jupyter-book build failed (full log: {log})")
    warnings = [line for line in (completed.stdout + completed.stderr).splitlines()
                if "WARNING" in line or "ERROR" in line]
    built = staged / "_build" / "html"
    target = out / "html"
    if target.exists():
        shutil.rmtree(target)
    shutil.move(built, target)
    shutil.copy(locations.build_dir() / numbers.FILENAME, target / numbers.FILENAME)
    print(f"[i2o] book built: {target / 'index.html'}"
          + (f" ({len(warnings)} warnings, see {log})" if warnings else ""))
    return target

