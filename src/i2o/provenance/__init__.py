"""Provenance: where a result came from, whether two machines agree, how results move.

- :mod:`.fingerprint` — one SHA-256 per cached result (``python -m i2o.results fingerprint``);
- :mod:`.dependencies` — the modules each job's key covers (``python -m i2o.results deps``);
- :mod:`.bundles` — a chapter's cached results as one verified bundle
  (``python -m i2o.results export|import``); a bundle exported before keys hashed content
  imports at its old keys, which :mod:`.rekey` then moves;
- :mod:`.rekey` — a results cache and the published digests moved from located keys to content
  keys (``python -m i2o.results rekey``);
- :mod:`.golden` — the committed fingerprints every ``make test`` checks (``make golden``);
- :mod:`.probes` — each kernel family fingerprinted, on this CPU or an emulated one;
- :mod:`.numbers` — every glued number and claim row of a build, ``numbers.json``;
- :mod:`.compare` — two builds compared number by number (``python -m i2o.compare``);
- :mod:`.robustness` — the chapters at several replicates (``python -m i2o.provenance.robustness``);
  :mod:`.replicate_summary` — what they wrote, summarised; :mod:`.robustness_page` — the
  Robustness page.

``python -m i2o.provenance COMMAND`` (also ``python -m i2o.results COMMAND``) runs the commands
of :mod:`.__main__`.
"""
