"""``python -m i2o.sweep``: command line only; the code is in :mod:`i2o.compute.sweep_command`
and :mod:`i2o.compute.sweep`."""

from i2o.compute.sweep_command import main

if __name__ == "__main__":
    raise SystemExit(main())
