"""``python -m i2o.compare``: command line only; the code is in :mod:`i2o.provenance.compare`."""

from i2o.provenance.compare import main

if __name__ == "__main__":
    raise SystemExit(main())
