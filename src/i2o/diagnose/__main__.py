"""``python -m i2o.diagnose`` (:mod:`i2o.diagnose.cli`)."""

from i2o.diagnose.cli import main

raise SystemExit(main())
