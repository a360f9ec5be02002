"""``python -m i2o.probes``: command line only; the code is in :mod:`i2o.provenance.probes`."""

from i2o.provenance.probes import main

if __name__ == "__main__":
    raise SystemExit(main())
