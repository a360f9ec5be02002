"""The book: notebooks executed, pages staged, the HTML built.

- :mod:`.build` — papermill execution with stamps, the whole book's run, staging and the HTML
  (``python -m i2o.book``, :mod:`.__main__`);
- :mod:`.site` — what the staged book adds to the executed notebooks;
- :mod:`.published` — what was measured elsewhere, shown when a build has not computed it;
- :mod:`.claims_page` — the page "The paper's claims at a glance";
- :mod:`.plotting` — one figure style with provenance, for every chapter's figures.
"""
