"""Under everything: what every layer may import and what imports no other i2o room.

- :mod:`.runtime` — device, threads, the numerics mode and its pins: what can change a number
  (in every job's key);
- :mod:`.replicates` — the seeds of each replicate;
- :mod:`.digests` — SHA-256 of bytes, files and arrays;
- modules that change no number and are in no key (:data:`i2o.compute.results.INERT`):
  :mod:`.locations` (paths), :mod:`.progress` (progress bars), :mod:`.lineage` (provenance,
  commit, clock), :mod:`.allocator` (the memory allocator).

They import nothing of i2o but each other (``tests/test_layout.py``).
"""
