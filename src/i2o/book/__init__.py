"""The book: notebooks executed, pages staged, the HTML built.

- :mod:`.build` — the command line (``python -m i2o.book``, :mod:`.__main__`);
- :mod:`.stamps` — where an executed notebook lives and the stamp that says it is current;
- :mod:`.execute` — one figure's notebook executed with papermill;
- :mod:`.all_chapters` — every chapter executed in one run, with one job pool;
- :mod:`.html_build` — the sources staged and the HTML built;
- :mod:`.site` — what the staged book adds to the executed notebooks;
- :mod:`.published` — what was measured elsewhere, shown when a build has not computed it;
- :mod:`.claims_page` — the page "The paper's claims at a glance"; :mod:`.claims_evidence` —
  what it knows of each chapter; :mod:`.claim_anchors` — the ids on the chapters' claim rows;
- :mod:`.plotting` — one figure style with provenance, for every chapter's figures.
"""
