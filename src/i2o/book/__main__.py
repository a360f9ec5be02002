"""``python -m i2o.book run|all|book|html|figures ...``: the commands of
:func:`i2o.book.build.main`."""

from i2o.book.build import main

if __name__ == "__main__":
    raise SystemExit(main())
