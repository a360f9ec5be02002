"""Sphinx extension: no Sphinx figure numbers; the captions carry the paper's own.

Sphinx numbers figures in order through the book (Fig. 1, 2, …), so "Fig. 12" stood above the
paper's Figure 5 and "Fig. 4" meant the paper's Figure 3. Every caption starts with the paper's
own name of its figure instead (``i2o.book.site.paper_label``) and cross-references name it with
``{ref}``. ``numfig: false`` in ``_config.yml`` has no effect: sphinx-jupyterbook-latex, which
Jupyter Book 1 always loads, sets ``numfig = True`` for every builder when the configuration is
read. So numbering is switched off here, after it (a later priority of the same event).
"""

from __future__ import annotations

AFTER_THE_OTHERS = 900  # Sphinx's default listener priority is 500; higher runs later


def _no_numbers(app, config) -> None:
    config.numfig = False


def setup(app) -> dict:
    app.connect("config-inited", _no_numbers, priority=AFTER_THE_OTHERS)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
