"""The book end to end: manifest consistency, parameter errors, every notebook at smoke, HTML."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from i2o.base import locations, runtime
from i2o.book import build, execute, plotting, site, stamps
from i2o.compute import profiles

REPO = locations.repo_root()


def _toc_files() -> set[str]:
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = {toc["root"]}
    for part in toc.get("parts", []):
        files |= {chapter["file"] for chapter in part.get("chapters", [])}
    return files


def test_every_manifest_figure_has_its_notebook_in_the_toc():
    toc = _toc_files()
    for figure in profiles.figures():
        notebook = profiles.entry(figure)["notebook"]
        assert (REPO / notebook).is_file(), f"figure {figure!r}: {notebook} does not exist"
        assert notebook.removesuffix(".ipynb") in toc, f"{notebook} is not in _toc.yml"


def test_every_notebook_is_in_the_manifest():
    listed = {profiles.entry(f)["notebook"] for f in profiles.figures()}
    on_disk = {str(p.relative_to(REPO)) for p in (REPO / "book").glob("*.ipynb")}
    assert on_disk == listed, f"notebooks not in the manifest: {sorted(on_disk - listed)}"


def test_source_notebooks_are_clean_and_parametrized():
    for figure in profiles.figures():
        notebook = json.loads((REPO / profiles.entry(figure)["notebook"]).read_text())
        code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        assert not any(c.get("outputs") or c.get("execution_count") for c in code), figure
        tagged = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{figure}: one cell must be tagged 'parameters'"
        source = "".join(tagged[0]["source"])
        for name in ["profile", *profiles.entry(figure)["parameters"]]:
            assert f"{name} =" in source, f"{figure}: parameter {name!r} not declared"


def test_cli_refuses_bad_parameters_before_compute(capsys):
    figure = profiles.figures()[0]
    assert build.main(["run", figure, "--profile", "huge"]) == 2
    assert "parameter 'profile' must be one of 'smoke', 'quick', 'paper'" in capsys.readouterr().err
    assert build.main(["run", figure, "-p", "no_such_parameter", "1"]) == 2
    assert "unknown parameter(s) 'no_such_parameter'" in capsys.readouterr().err
    assert not stamps.executed_path(figure).exists()


def test_notebook_itself_validates_papermill_parameters(tmp_path):
    """Run with papermill directly (bypassing the CLI): the validation cell stops the notebook."""
    import papermill

    figure = profiles.figures()[0]
    source = REPO / profiles.entry(figure)["notebook"]
    with pytest.raises(papermill.PapermillExecutionError) as error:
        papermill.execute_notebook(str(source), str(tmp_path / "bad.ipynb"),
                                   parameters={"profile": "smoke", "bogus_knob": 3},
                                   cwd=str(source.parent), kernel_name="python3",
                                   progress_bar=False)
    assert "ParameterError" in str(error.value) and "bogus_knob" in str(error.value)


@pytest.mark.skipif(os.name != "posix", reason="IPC sockets are POSIX only")
def test_the_kernel_runs_over_ipc_sockets_without_the_tcp_warning(tmp_path, capfd):
    """The book's kernels listen on Unix sockets in a temporary folder, not on TCP ports, so
    ipykernel's warning about unencrypted TCP (once per notebook before) is not printed."""
    import nbformat
    import papermill

    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_code_cell("print(6 * 7)"))
    nbformat.write(notebook, tmp_path / "tiny.ipynb")
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    papermill.execute_notebook(str(tmp_path / "tiny.ipynb"), str(tmp_path / "out.ipynb"),
                               kernel_name="python3", progress_bar=False,
                               **execute.kernel_manager(str(sockets)))
    assert nbformat.read(tmp_path / "out.ipynb", 4).cells[0].outputs[0]["text"] == "42\n"
    captured = capfd.readouterr()
    assert "without encryption" not in captured.out + captured.err
    assert execute.kernel_manager(str(sockets))["kernel_manager_class"]().transport == "ipc"


@pytest.mark.book
def test_smoke_notebooks_ran_and_wrote_claims_and_figures(built_book):
    for figure, path in built_book["executed"].items():
        notebook = json.loads(Path(path).read_text())
        assert notebook["metadata"]["i2o"]["profile"] == "smoke"
        errors = [o for c in notebook["cells"] for o in c.get("outputs", [])
                  if o.get("output_type") == "error"]
        assert not errors, figure
        rows = json.loads((built_book["build"] / "claims" / f"{figure}.json").read_text())
        assert rows and all(set(r) >= {"claim", "holds", "value", "profile"} for r in rows)
        assert all(r["holds"] in (True, False, None) and r["profile"] == "smoke" for r in rows)
        for output in profiles.entry(figure)["outputs"]:
            for suffix in (".png", ".pdf"):
                assert (built_book["build"] / "figures" / f"{output}{suffix}").is_file()


@pytest.mark.book
def test_the_book_builds_without_a_warning(built_book):
    """The fixture's build runs with warnings as errors; its log says so and shows none."""
    log = (built_book["build"] / "jupyter-book.log").read_text()
    assert "WARNING" not in log and "ERROR" not in log, log[-3000:]


@pytest.mark.book
def test_pages_carry_no_job_log_and_no_library_noise(built_book):
    """What a chapter prints is for the reader: no sweep job lines, nothing on stderr (library
    warnings are filtered at their source)."""
    for figure, path in built_book["executed"].items():
        for cell in json.loads(Path(path).read_text())["cells"]:
            for output in cell.get("outputs", []):
                if output.get("output_type") != "stream":
                    continue
                text = "".join(output.get("text", ""))
                assert output.get("name") != "stderr", f"{figure}: stderr in the page: {text!r}"
                assert "submitted " not in text and "finished " not in text, (figure, text)


def _words(text: str) -> list[str]:
    """The words of a text, markup and entities dropped: what survives rendering."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    return re.findall(r"[A-Za-z0-9]+", text)


def _output_text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return "".join(output.get("text", ""))
    data = output.get("data", {})
    for kind in ("text/html", "text/markdown", "text/plain"):
        if kind in data:
            return "".join(data[kind])
    return ""


@pytest.mark.book
def test_every_executed_output_reaches_its_page(built_book):
    """Nothing lost between the executed notebook and the page: the first words of every visible
    text output are on the chapter's page, and it shows at least as many images as it made."""
    lost = []
    for figure, path in built_book["executed"].items():
        page = built_book["html"] / profiles.entry(figure)["notebook"].replace(".ipynb", ".html")
        shown = page.read_text()
        words = " ".join(_words(shown))
        images = 0
        for cell in json.loads(Path(path).read_text())["cells"]:
            for output in cell.get("outputs", []):
                if not site._visible(output) or output.get("output_type") == "error":
                    continue
                images += "image/png" in output.get("data", {})
                head = _words(_output_text(output))[:12]
                if head and " ".join(head) not in words:
                    lost.append(f"{figure}: {' '.join(head)}")
        assert shown.count("<img") >= images, f"{figure}: {images} images made, fewer shown"
    assert not lost, "outputs missing from their pages:\n" + "\n".join(lost)


@pytest.mark.book
def test_html_has_every_chapter_with_images_and_profile(built_book):
    site = built_book["html"]
    assert (site / "index.html").is_file()
    for figure in profiles.figures():
        page = site / profiles.entry(figure)["notebook"].replace(".ipynb", ".html")
        text = page.read_text()
        assert "<img" in text, f"{page} shows no figure"
        assert "profile 'smoke'" in text, f"{page} does not name its profile"
        assert "i2o-claims" in text, f"{page} has no claims table"


@pytest.mark.book
def test_every_chapter_records_its_numerics_and_serves_its_numbers(built_book):
    served = json.loads((built_book["html"] / "numbers.json").read_text())
    assert set(served) == set(profiles.figures())
    for figure, path in built_book["executed"].items():
        provenance = json.loads(Path(path).read_text())["metadata"]["i2o"]["provenance"]
        assert provenance["numerics"] == runtime.numerics_mode() and provenance["pinned"], figure
        assert served[figure]["provenance"] == provenance, figure
        assert served[figure]["numbers"] and served[figure]["claims"], figure
        page = built_book["html"] / profiles.entry(figure)["notebook"].replace(".ipynb", ".html")
        assert f"Numerics {runtime.numerics_mode()}" in page.read_text(), page


@pytest.mark.book
def test_smoke_results_match_the_golden_fingerprints(built_book):
    """The cross-machine test of portable numerics: every smoke result of every chapter is bit
    for bit what the machine that wrote ``tests/golden/`` computed (``make golden`` rewrites them
    after a change meant to change results). On a mismatch: the entries, the first numerics
    probe that differs, both CPUs."""
    from i2o.provenance import fingerprint, golden, probes

    if runtime.numerics_mode() != "portable" or not runtime.is_x86_64():
        pytest.skip("the goldens are those of portable mode on x86-64")
    if runtime.device() != "cpu":
        pytest.skip("the goldens are CPU results; the smoke book ran on a GPU here")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("I2O_RESULTS_DIR", str(built_book["build"].parent / "results"))
        found = fingerprint.fingerprint(profile="smoke")
    assert all(not chapter["missing"] for chapter in found["chapters"].values()), found
    expected = golden.read(golden.smoke_path())
    if golden.mismatch(expected, found) is None:
        return
    message = golden.mismatch(expected, found, golden.read(golden.probes_path()),
                              probes.run(mode="portable"))
    pytest.fail(message)


@pytest.mark.book
def test_second_run_is_up_to_date(built_book, capsys):
    figure = profiles.figures()[0]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("I2O_BUILD_DIR", str(built_book["build"]))
        execute.run(figure, "smoke")
    assert "up to date" in capsys.readouterr().out


def _chromium() -> str | None:
    for candidate in ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"):
        if os.path.exists(candidate):
            return candidate
    return None


def _pages(site: Path) -> list[str]:
    """Every page of the book: the root, the chapters, the Figures page and the others."""
    toc = _toc_files()
    return sorted(f"{name}.html" for name in toc)


@pytest.mark.book
@pytest.mark.browser
def test_pages_render_in_a_real_browser(built_book):
    """Headless Chromium loads every page: no console error, every image decoded, every internal
    link resolves, nothing requested from outside the book (MathJax included), math typeset by
    MathJax, plumbing hidden (parameters folded, no glue calls shown), numbered captioned figures,
    launch and repository buttons, and one row per manifest figure on the Figures page."""
    executable = _chromium()
    if executable is None:
        pytest.skip("headless Chromium is absent (Debian package 'chromium'; .ci/run installs it)")
    playwright = pytest.importorskip("playwright.sync_api")
    import functools
    import http.server
    import threading
    import urllib.error
    import urllib.parse
    import urllib.request

    from i2o.book import site as site_module

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    root = built_book["html"]
    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    offline_math = site_module.mathjax_source() is not None
    chapters = {profiles.entry(f)["notebook"].replace(".ipynb", ".html")
                for f in profiles.figures()}
    checked_links: dict[str, int] = {}
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"])
            for name in _pages(root):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                problems: list[str] = []
                outside: list[str] = []
                page.on("console", lambda m, out=problems: m.type == "error" and out.append(m.text))
                page.on("pageerror", lambda e, out=problems: out.append(str(e)))
                page.on("request", lambda r, out=outside: None if r.url.startswith(
                    (base, "data:", "blob:")) else out.append(r.url))
                page.goto(base + name, wait_until="load")
                page.wait_for_timeout(300)
                if offline_math:
                    assert not outside, f"{name}: requests outside the book {outside}"
                    assert not problems, f"{name}: console errors {problems}"
                else:  # MathJax from its CDN cannot load offline
                    problems = [m for m in problems if not m.startswith("Failed to load resource")]
                    assert not problems, f"{name}: console errors {problems}"
                widths = page.evaluate(
                    "Array.from(document.images).map(i => [i.src.slice(-60), i.naturalWidth])")
                assert all(w > 0 for _, w in widths), f"{name}: broken images {widths}"
                math = page.evaluate("document.querySelectorAll('.math').length")
                if math and offline_math:
                    page.wait_for_function(
                        "window.MathJax && MathJax.startup && MathJax.startup.document"
                        " && document.querySelectorAll('mjx-container').length > 0", timeout=20000)
                    raw = page.evaluate("Array.from(document.querySelectorAll('.math'))"
                                        ".filter(e => !e.querySelector('mjx-container')).length")
                    assert raw == 0, f"{name}: {raw} of {math} formulas not typeset"
                links = page.evaluate("Array.from(document.querySelectorAll('a[href]'))"
                                      ".map(a => a.href)")
                for link in links:
                    url = urllib.parse.urldefrag(link)[0]
                    if url.startswith(base) and url not in checked_links:
                        try:
                            checked_links[url] = urllib.request.urlopen(url, timeout=10).status
                        except urllib.error.HTTPError as error:
                            checked_links[url] = error.code
                broken = [u for u in links if checked_links.get(urllib.parse.urldefrag(u)[0],
                                                                200) != 200]
                assert not broken, f"{name}: broken internal links {broken}"
                if name in chapters:
                    _check_chapter(page, name, widths, built_book["build"])
                if name == "book/figures.html":
                    _check_figures_page(page, root)
                page.close()
            browser.close()
    finally:
        server.shutdown()
    (built_book["build"] / "browser-measurements.json").write_text(json.dumps(MEASURED, indent=1))


#: The smallest figure text a reader can read at 100 % on a 1,280-px window, in CSS pixels.
MIN_FIGURE_TEXT_PX = 9.0
#: What the browser test measured, printed at its end (the closing note quotes it).
MEASURED: dict[str, list] = {}


def _check_chapter(page, name: str, widths: list, build: Path) -> None:
    """A chapter page: plumbing hidden, figures numbered with captions, launch buttons."""
    assert widths, f"{name}: no image on the page"
    visible = page.evaluate("document.querySelector('main').innerText")
    for plumbing in ("glue(", "resolve_namespace(", "import matplotlib"):
        assert plumbing not in visible, f"{name}: plumbing code {plumbing!r} is visible"
    folded = page.evaluate(
        "Array.from(document.querySelectorAll('details.hide')).filter(d => !d.open"
        " && d.parentElement.textContent.includes('profile =')).length")
    assert folded >= 1, f"{name}: the parameters cell is not folded"
    from i2o.book import site as site_module

    captions = page.evaluate("Array.from(document.querySelectorAll('figure[id]'))"
                             ".map(f => [f.id, f.querySelector('figcaption')?.innerText || ''])")
    assert captions, f"{name}: no labelled figure"
    files = page.evaluate("document.querySelectorAll('p.i2o-figure-files a[href$=\".pdf\"]')"
                          ".length")
    assert files >= len(captions), f"{name}: {files} PDF links for {len(captions)} figures"
    for anchor, caption in captions:
        label = site_module.paper_label(anchor.removeprefix("fig-"))
        assert caption.strip().startswith(f"{label}."), \
            f"{name}: figure {anchor} is not captioned with its paper name {label!r}: {caption!r}"
    shown = page.evaluate("Array.from(document.querySelectorAll('figure[id]')).map(f => [f.id,"
                          " f.querySelector('img')?.getBoundingClientRect().width || 0])")
    for anchor, width in shown:
        png = build / "figures" / f"{anchor.removeprefix('fig-')}.png"
        extent = plotting.provenance(png)
        text = plotting.smallest_text_px(extent, width)
        MEASURED.setdefault("smallest figure text (px)", []).append((name, anchor, round(text, 1)))
        assert text >= MIN_FIGURE_TEXT_PX, \
            f"{name}: {anchor}'s smallest text is {text:.1f} px at {width:.0f} px wide"
    cut = page.evaluate("Array.from(document.querySelectorAll('main pre'))"
                        ".filter(p => p.scrollWidth > p.clientWidth + 1).length")
    assert cut == 0, f"{name}: {cut} output blocks run past the right edge"
    # a table fits its column, or scrolls sideways inside a box that does (a wide data frame)
    tables = page.evaluate(
        "Array.from(document.querySelectorAll('article table')).map(t => {"
        " const box = t.closest('div.output') || t;"
        " const scrolls = box !== t && getComputedStyle(box).overflowX === 'auto';"
        " return [t.className, Math.round((scrolls ? box : t).getBoundingClientRect().width),"
        " Math.round(t.closest('article').getBoundingClientRect().width)]; })")
    if tables:
        MEASURED.setdefault("widest table / column (px)", []).append(
            (name, *max(tables, key=lambda t: t[1] / max(t[2], 1))))
    wide = [t for t in tables if t[1] > t[2] + 1]
    assert not wide, f"{name}: tables wider than their column [class, width, column]: {wide}"
    for raw in ("|---", "\\frac", "$$"):
        assert raw not in visible, f"{name}: unrendered {raw!r} in the page's text"
    found = page.evaluate("Array.from(document.querySelectorAll('.admonition'))"
                          ".map(a => a.innerText).join(' ')")
    assert "What this run found" in found, f"{name}: no answer box at the top"
    # the first screen: the answer box, then a whole figure, above the window's bottom edge
    screen = page.evaluate(
        "[window.innerHeight, document.querySelector('.admonition').getBoundingClientRect().top,"
        " Array.from(document.querySelectorAll('main img')).map(i => i.getBoundingClientRect())"
        ".filter(r => r.width > 0)[0].bottom]")
    MEASURED.setdefault("first screen: [window, answer top, first figure bottom] (px)",
                        []).append((name, *map(round, screen)))
    assert screen[1] < screen[2] <= screen[0], \
        f"{name}: the first figure ends at {screen[2]:.0f} px, below the first screen"
    hrefs = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    for wanted in ("mybinder.org", "colab.research.google.com"):
        assert any(wanted in h for h in hrefs), f"{name}: no {wanted} launch button"
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config["repository"]["url"] in hrefs, f"{name}: no repository button"


def _check_figures_page(page, root: Path) -> None:
    """One row per manifest figure, each linking by its paper name to its labelled figure in its
    chapter, and no cell or column wider than a 1280 px window allows."""
    from i2o.book import site as site_module

    outputs = [o for f in profiles.figures() for o in profiles.entry(f)["outputs"]]
    rows = page.evaluate("Array.from(document.querySelectorAll('table.i2o-figures tbody tr'))"
                         ".map(r => { const a = r.querySelector('td a.reference');"
                         " return a ? [a.innerText, a.getAttribute('href')]"
                         " : [r.innerText, null]; })")
    assert len(rows) == len(outputs), f"Figures page: {len(rows)} rows for {len(outputs)} figures"
    for output, (text, href) in zip(outputs, rows, strict=True):
        label = site_module.paper_label(output)
        assert href is not None, f"Figures page: {label} is not a link ({text!r})"
        assert text.strip() == label and href.endswith(f"#fig-{output}"), (label, text, href)
        target = (root / "book" / href.split("#")[0]).read_text()
        assert f'id="fig-{output}"' in target, f"{href}: no figure with that id"
    overflow = page.evaluate(
        "(() => { const t = document.querySelector('table.i2o-figures');"
        " const box = t.closest('article') || document.body;"
        " const cells = Array.from(t.querySelectorAll('th, td'))"
        ".filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText.slice(0, 40));"
        " return {cells, table: t.getBoundingClientRect().right,"
        " box: box.getBoundingClientRect().right,"
        " scroll: t.parentElement.scrollWidth > t.parentElement.clientWidth + 1}; })()")
    assert not overflow["cells"], f"Figures page: cells overflow {overflow['cells']}"
    assert overflow["table"] <= overflow["box"] + 1 and not overflow["scroll"], \
        f"Figures page: the table is wider than the page at 1280 px: {overflow}"
