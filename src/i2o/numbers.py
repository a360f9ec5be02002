"""``python -m i2o.numbers``: command line only; the code is in :mod:`i2o.provenance.numbers`."""

from i2o.provenance.numbers import main

if __name__ == "__main__":
    raise SystemExit(main())
