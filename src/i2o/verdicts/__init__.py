"""Verdicts: the paper's claims decided, recorded and written out, never computed.

- :mod:`.decision` — a verdict with its typed facts (the gate that closed it, what would decide
  it);
- :mod:`.intervals` — confidence intervals over seeds or examples; :mod:`.margins` — the
  predicates of an interval against a margin; :mod:`.ranks` — a monotone association across
  models; :mod:`.gates` — fit, health, count and resolution gates, and the combinators;
- :mod:`.curves` — a metric against the test-time iteration count, with its gaps and intervals;
- :mod:`.rule` — the book's one rule: more iterations help, hurt or make no difference beyond a
  margin, fewer hurt (stability, deq_gaps and ``i2o.diagnose``); :mod:`.margin_gates` — its
  margin δ and the gates on δ's scale and precision; :mod:`.questions` — each of its questions
  decided on one curve's intervals; :mod:`.recommendation` — the recommended count;
  :mod:`.converged` — the book's own row on a solve run to convergence (deq_gaps, stability);
- :mod:`.rows` — the rule's verdicts as claim rows, for every chapter;
- :mod:`.claims` — the claims table; :mod:`.deciding` — the run that would decide an undecided
  claim; :mod:`.prose` — conclusions written from claims;
- :mod:`.readings` — READING.md's five principles as predicates (a direction, "no benefit",
  the intervals a power gate may read, the regime's generalisation gate);
- :mod:`.paper_claims` — how a chapter maps a sentence of the paper to the rows that test it and
  says how the book reads it (each chapter's ``paper_claims`` declares its own), the claims
  several chapters test, and their merge.

No cache key covers a module of this room (``tests/test_keys.py``), and nothing here imports
:mod:`i2o.book`, :mod:`i2o.provenance` or a chapter (``tests/test_layout.py``).
"""
