"""The book as readers expect: presented notebooks (plumbing hidden, numbered captioned figures),
the Figures page, the generated execution-time table, offline MathJax, publishing files."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import yaml

from i2o.base import locations
from i2o.book import html_build, site
from i2o.compute import profiles

REPO = locations.repo_root()


@pytest.mark.parametrize("output, label", [
    ("figure-1-left", "Figure 1 (left)"), ("figure-5", "Figure 5"), ("figure-g3", "Figure G.3"),
    ("figure-deq-overparam", "Figure B1"), ("meta-ablation", "Figure B2"),
    ("separation-features", "Companion: rebuttal Figure 2"),
    ("separation-sawtooth", "Companion: Theorem 1, rebuttal Table 1")])
def test_paper_labels(output, label):
    assert site.paper_label(output) == label


def test_every_figure_has_one_visible_name_and_no_number_means_two_figures():
    """The paper's numbers, the companion's names and the book's own B-numbers never collide."""
    outputs = [o for f in profiles.figures() for o in profiles.entry(f)["outputs"]]
    labels = [site.paper_label(o) for o in outputs]
    assert len(set(labels)) == len(labels), labels
    assert not any(label.startswith("Book figure") for label in labels), labels
    companion = profiles.entry("separation")["outputs"]
    assert all(site.paper_label(o).startswith("Companion: ") for o in companion)


def _one_paragraph(text: str) -> bool:
    """Whether MyST reads ``text`` as one paragraph (what a figure caption must be)."""
    from markdown_it import MarkdownIt

    blocks = [t.type for t in MarkdownIt("commonmark").parse(text) if t.level == 0]
    return blocks == ["paragraph_open", "paragraph_close"]


@pytest.mark.parametrize("heading, output, start", [
    ("## 1. Linear regions: the sawtooth", "separation-sawtooth",
     "**Companion: Theorem 1, rebuttal Table 1.** Linear regions: the sawtooth. A DEQ"),
    ("## Figure 1 (left): overparametrization, Corollary 1", "figure-1-left",
     "**Figure 1 (left).** Overparametrization, Corollary 1. A DEQ"),
    ("## Figure 5", "figure-5", "**Figure 5.** A DEQ"),
    ("## Ablation: per-set batch normalization", "meta-ablation",
     "**Figure B2.** Ablation: per-set batch normalization. A DEQ"),
    ("", "separation-features", "**Companion: rebuttal Figure 2.** A DEQ")])
def test_captions_are_one_paragraph_starting_with_the_visible_name(heading, output, start):
    notebook = {"cells": [
        {"cell_type": "markdown", "metadata": {},
         "source": f"{heading}\n\nA DEQ of width $m$ makes {{glue:text}}`n` pieces. More."},
        _cell(f'plotting.show(draw(), "{output}", p)', [PNG])]}
    figure = site.present(notebook, [output])["cells"][1]["metadata"]["mystnb"]["figure"]
    caption = figure["caption"]
    assert caption.startswith(start), caption
    assert _one_paragraph(caption), caption


def _cell(source, outputs=(), tags=()):
    return {"cell_type": "code", "source": source, "outputs": list(outputs),
            "metadata": {"tags": list(tags)}, "execution_count": 1}


PNG = {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}
GLUE = {"output_type": "display_data",
        "data": {"application/papermill.record/text/plain": "1"}, "metadata": {}}
TEXT = {"output_type": "stream", "name": "stdout", "text": "profile 'smoke'\n"}
MD = {"output_type": "display_data", "data": {"text/markdown": "**verdict**"}, "metadata": {}}


def test_present_folds_parameters_removes_plumbing_and_numbers_figures():
    notebook = {"cells": [
        _cell('profile = "quick"\nn = None', tags=["parameters"]),
        _cell('profile = "smoke"', tags=["injected-parameters"]),
        _cell("params = resolve()\nshow(params)", [TEXT]),
        _cell("glue('x', 1, display=False)", [GLUE]),
        _cell("import numpy as np"),
        {"cell_type": "markdown", "metadata": {},
         "source": "(target)=\n## Figure 5\n\nTest accuracy {glue:text}`a` against N. More."},
        _cell('fig = draw(r["x"])\nplotting.save(fig, "figure-5", p)\nplt.show()', [PNG]),
        _cell('plotting.show(draw(), "not-in-the-manifest", p)', [PNG]),
        _cell('plotting.show(draw(), "figure-g1", p)\ndisplay(Markdown(x))', [TEXT, PNG, GLUE, MD]),
    ]}
    cells = site.present(notebook, ["figure-5", "figure-g1"])["cells"]
    tags = [c["metadata"].get("tags") for c in cells]
    assert "hide-input" in tags[0] and "hide-input" in tags[1]
    assert tags[2] == ["remove-input"]  # text output shown, code removed
    assert tags[3] == ["remove-cell"] and tags[4] == ["remove-cell"]  # nothing visible
    figure = cells[6]["metadata"]["mystnb"]["figure"]
    assert figure["name"] == "fig-figure-5"
    assert figure["caption"] == "**Figure 5.** Test accuracy … against N."
    assert "remove-input" in tags[6] and site.FULL_WIDTH in tags[6]  # spans the page
    assert site.FULL_WIDTH not in tags[2] and site.FULL_WIDTH not in tags[8]
    # under each figure, the links to its files
    assert cells[7]["outputs"] == [site.figure_files("figure-5")] and tags[7] == ["remove-input"]
    assert "mystnb" not in cells[8]["metadata"] and tags[8] == ["remove-input"]
    # a figure with a table after it: the table moves to a cell of its own after the figure
    assert cells[9]["metadata"]["mystnb"]["figure"]["name"] == "fig-figure-g1"
    assert cells[9]["outputs"] == [TEXT, PNG]
    assert cells[10]["outputs"] == [site.figure_files("figure-g1"), GLUE, MD]
    assert tags[10] == ["remove-input"]
    assert "".join(cells[10]["source"]).strip(), "myst-nb drops a cell with an empty source"
    assert len(cells) == 11


def test_each_figure_links_its_png_pdf_and_the_code_that_drew_it():
    html = site.figure_files("figure-5", "https://github.com/o/r/blob/main/src/i2o/chapters/"
                             "stability/figures.py")["data"]["text/html"]
    assert f'href="{site.FIGURE_FILES}/figure-5.png"' in html
    assert f'href="{site.FIGURE_FILES}/figure-5.pdf"' in html
    assert "<code>i2o/chapters/stability/figures.py</code>" in html
    assert "drawn by" not in site.figure_files("figure-5")["data"]["text/html"]


def test_presenting_twice_is_stable():
    notebook = {"cells": [_cell("x", [TEXT], tags=["remove-input"])]}
    site.present(notebook)
    site.present(notebook)
    assert notebook["cells"][0]["metadata"]["tags"] == ["remove-input"]


def _fake_build(tmp_path: Path, built: dict[str, float]) -> dict[str, Path]:
    """Executed notebooks with stamps for ``built`` ({figure: seconds}); placeholders otherwise."""
    build = locations.build_dir()
    (build / "figures").mkdir(parents=True, exist_ok=True)
    (build / "claims").mkdir(parents=True, exist_ok=True)
    notebooks = {}
    for figure in profiles.figures():
        path = tmp_path / f"{figure}.ipynb"
        if figure in built:
            meta = {"i2o": {"profile": "smoke", "seconds": built[figure], "git": "abc",
                            "date": "2026-11-23T10:00:00Z"}}
            cells = [_cell(f'plotting.save(fig, "{o}", p)', [PNG])
                     for o in profiles.entry(figure)["outputs"]]
            site.present({"cells": cells}, profiles.entry(figure)["outputs"])
            for output in profiles.entry(figure)["outputs"]:
                (build / "figures" / f"{output}.png").write_bytes(b"\x89PNG")
            (build / "claims" / f"{figure}.json").write_text(json.dumps(
                [{"holds": True}, {"holds": False}, {"holds": None}, {"holds": None}]))
        else:
            meta, cells = {"i2o": {"not_built": "DataNotFoundError: set I2O_DATA_DIR"}}, []
        path.write_text(json.dumps({"cells": cells, "metadata": meta}))
        notebooks[figure] = path
    return notebooks


def test_figures_page_has_one_row_per_manifest_figure(tmp_path):
    first = profiles.figures()[0]
    notebooks = _fake_build(tmp_path, {first: 75.0})
    staged = tmp_path / "stage"
    (staged / "book").mkdir(parents=True)
    text = site.figures_page(staged, notebooks).read_text()
    outputs = [o for f in profiles.figures() for o in profiles.entry(f)["outputs"]]
    rows = [line for line in text.splitlines() if line.startswith("* - ")]
    assert len(rows) == 1 + len(outputs)  # the header, then one row per figure
    assert "{numref}" not in text  # Sphinx's numbers are off: links carry the paper's names
    for output in profiles.entry(first)["outputs"]:
        assert f"{{ref}}`{site.paper_label(output)} <fig-{output}>`" in text
        assert (staged / "book" / "_figures" / f"{output}.png").exists()
    assert "1 / 1 / 2" in text and "`smoke`" in text
    assert "not built: DataNotFoundError" in text


def test_timings_table_comes_from_the_stamps(tmp_path):
    first = profiles.figures()[0]
    notebooks = _fake_build(tmp_path, {first: 75.0})
    page = tmp_path / "reproduce.md"
    page.write_text(f"before\n{site.TIMINGS_START}\nold\n{site.TIMINGS_END}\nafter\n")
    assert site.fill_timings(page, notebooks)
    text = page.read_text()
    assert "old" not in text and text.startswith("before") and text.rstrip().endswith("after")
    assert f"| `{first}` | `smoke` | 1 min 15 s |" in text
    assert "not built (DataNotFoundError" in text


def test_reproduce_page_has_the_timing_markers():
    text = (REPO / "book" / "reproduce.md").read_text()
    assert site.TIMINGS_START in text and site.TIMINGS_END in text


def test_config_has_launch_buttons_and_one_repository_url():
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    url = config["repository"]["url"]
    assert url.startswith("https://")
    assert config["html"]["use_repository_button"] is True
    assert config["launch_buttons"]["binderhub_url"] and config["launch_buttons"]["colab_url"]
    # Sphinx's numbers off (by an extension: Jupyter Book turns numfig False into True)
    assert config["sphinx"]["local_extensions"]["paper_numbers"] == "book/_ext"
    assert "numfig" not in config["sphinx"]["config"]
    toc = (REPO / "_toc.yml").read_text()
    assert "book/figures" in toc


def test_mathjax_is_pinned_by_the_npm_lock():
    lock = json.loads((REPO / "package-lock.json").read_text())
    version = lock["packages"]["node_modules/mathjax"]["version"]
    assert version.startswith("3."), version
    assert lock["packages"]["node_modules/mathjax"].get("integrity", "").startswith("sha512-")


def test_staging_serves_mathjax_from_the_book(tmp_path):
    if site.mathjax_source() is None:
        pytest.skip("node_modules/mathjax is absent: run `npm ci`")
    staged = html_build.stage()
    config = yaml.safe_load((staged / "_config.yml").read_text())
    assert config["sphinx"]["config"]["mathjax_path"] == "mathjax/tex-chtml.js"
    assert (staged / "book" / "_static" / "mathjax" / "tex-chtml.js").is_file()
    assert (staged / "book" / "figures.md").read_text().startswith("# Figures")


def test_license_and_citation():
    assert "BSD 3-Clause License" in (REPO / "LICENSE").read_text()
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    # the SPDX form (setuptools >= 77): the table form is deprecated and stops building in 2027
    assert pyproject["project"]["license"] == "BSD-3-Clause"
    assert pyproject["project"]["license-files"] == ["LICENSE"]
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["license"] == "BSD-3-Clause"
    assert "Test like you Train" in citation["preferred-citation"]["title"]
    assert "reproducible book" in citation["title"]
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert citation["repository-code"] == config["repository"]["url"]


def test_pages_workflow_tests_builds_and_deploys():
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "book.yml").read_text())
    steps = [s.get("run", "") + s.get("uses", "")
             for job in workflow["jobs"].values() for s in job.get("steps", [])]
    text = "\n".join(steps)
    for needed in ("make test", "make book", "npm ci", "make data",
                   "actions/upload-pages-artifact", "actions/deploy-pages"):
        assert needed in text, needed
    assert workflow["jobs"]["deploy"]["permissions"]["pages"] == "write"


def test_a_computation_log_is_collapsed_behind_a_toggle_not_removed():
    notebook = {"cells": [
        _cell('chapter = door.enter_namespace("stability", globals())', [TEXT]),
        _cell("results = chapter.collect()\nprint(figures.run_report(results))", [TEXT]),
        _cell("print(figures.fit_report(results))", [TEXT])]}
    cells = site.present(notebook)["cells"]
    tags = [c["metadata"]["tags"] for c in cells]
    assert tags[0] == tags[1] == ["remove-input", "hide-output"]
    assert tags[2] == ["remove-input"]
    assert all(c["outputs"] == [TEXT] for c in cells)  # the outputs stay
    site.present(notebook)
    assert [c["metadata"]["tags"] for c in notebook["cells"]] == tags  # stable


def test_a_caption_shows_the_glued_numbers_and_never_cuts_a_formula():
    glued = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "n"}},
             "data": {"application/papermill.record/text/plain": "'1024'"}}
    notebook = {"cells": [
        _cell("glue('n', 1024, display=False)", [glued]),
        {"cell_type": "markdown", "metadata": {},
         "source": "## Figure 5\n\nA DEQ of width $m$ makes {glue:text}`n` pieces of "
                   "{cite:t}`someone`. More."},
        _cell('plotting.show(draw(), "figure-5", p)', [PNG])]}
    caption = site.present(notebook, ["figure-5"])["cells"][2]["metadata"]["mystnb"][
        "figure"]["caption"]
    assert caption == "**Figure 5.** A DEQ of width $m$ makes 1024 pieces of …."
    long = "word " * 50 + "and $\\sum_i \\frac{1}{2\\beta_i^2} + \\frac{\\beta_i}{3}$ end"
    cut = site._cut(long)
    assert cut.count("$") % 2 == 0 and cut.endswith(" …") and len(cut) <= 300
    assert site._cut("short $x$.") == "short $x$."
    assert site._glued_text("missing", {}) == "…"
    assert site._glued_text("n:.1f", {"n": "2.25"}) == "2.2"


def test_each_notebook_installs_the_package_when_its_kernel_lacks_it():
    """Colab's launch button opens the source notebook in a kernel without ``i2o``: the cell
    after the parameters installs it from the book's own repository (a fork's URL included)."""
    url = yaml.safe_load((REPO / "_config.yml").read_text())["repository"]["url"]
    for path in sorted((REPO / "book").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        at = next(i for i, c in enumerate(cells)
                  if "parameters" in c.get("metadata", {}).get("tags", []))
        install = "".join(cells[at + 1]["source"])
        assert 'find_spec("i2o") or' in install, f"{path.name}: no install cell"
        assert f"git+{url}" in install, f"{path.name}: installs from elsewhere than {url}"
        first_import = next(i for i, c in enumerate(cells) if c["cell_type"] == "code"
                            and ("from i2o" in "".join(c["source"])
                                 or "import i2o" in "".join(c["source"])))
        assert first_import > at + 1, f"{path.name}: i2o is imported before it is installed"


def test_the_first_figure_is_shown_again_under_the_answer():
    """A reader's first screen: the chapter's answer, then its first figure (a copy linking to
    the figure with its caption), so the figure does not wait below the parameters and log."""
    answer = {"cell_type": "markdown", "metadata": {}, "source":
              "# Title\n\n:::{admonition} What this chapter found\n```{glue:md} toy-answer\n"
              ":format: myst\n```\n:::\n\nThe chapter's introduction."}
    notebook = {"cells": [
        answer,
        _cell('profile = "quick"', tags=["parameters"]),
        _cell("params = resolve()\nshow(params)", [TEXT]),
        {"cell_type": "markdown", "metadata": {}, "source": "## Figure 5\n\nAccuracy."},
        _cell('plotting.show(draw(), "figure-5", p)', [PNG]),
        _cell('plotting.show(draw(), "figure-g1", p)', [PNG]),
    ]}
    cells = site.present(notebook, ["figure-5", "figure-g1"])["cells"]
    # the answer's cell is cut after its box: the preview comes before the introduction
    assert cells[0]["source"].rstrip().endswith(":::")
    assert cells[2]["source"] == "The chapter's introduction."
    preview = cells[1]
    assert "".join(preview["source"]) == site.PREVIEW
    assert preview["outputs"][0] == PNG and "mystnb" not in preview["metadata"]
    assert site.FULL_WIDTH in preview["metadata"]["tags"]
    assert 'href="#fig-figure-5"' in preview["outputs"][1]["data"]["text/html"]
    assert "Figure 5" in preview["outputs"][1]["data"]["text/html"]
    again = site.present(notebook, ["figure-5", "figure-g1"])["cells"]
    assert ["".join(c["source"]) for c in again].count(site.PREVIEW) == 1
    assert site.FULL_WIDTH in again[1]["metadata"]["tags"]  # presenting again keeps it
    # no answer box, or no figure: nothing to preview
    plain = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# Title"},
                       _cell('plotting.show(draw(), "figure-5", p)', [PNG])]}
    assert len(site.present(plain, ["figure-5"])["cells"]) == 3  # the figure and its links
    no_figure = {"cells": [dict(answer), _cell("x", [TEXT])]}
    assert len(site.present(no_figure, ["figure-5"])["cells"]) == 2
