"""``python -m i2o.results COMMAND``: command line only; the commands are those of
:mod:`i2o.provenance` (``fingerprint``, ``deps``, ``plan``, ``export``, ``import``, ``rekey``) and
the cache's face is :mod:`i2o.compute.results`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("i2o.provenance", run_name="__main__", alter_sys=True)
