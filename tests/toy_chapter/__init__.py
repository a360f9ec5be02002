"""A toy chapter: the template of a chapter and the book's end-to-end test.

It asks the book's question on the smallest model there is: a fixed-point iteration
z ← A z + b of a random contraction A (spectral norm ``contraction``). Run for ``train_iters``
iterations, does running it for ``test_iters`` instead lower the relative residual
‖z_n − z*‖ / ‖z_0 − z*‖ by more than a margin?

- :mod:`.jobs`    the cached computation (one job per seed, with a checkpoint to resume from);
- :mod:`.runs`    the jobs of a parameter set, their collection, the cross-parameter checks;
- :mod:`.claims`  the numbers the text quotes and the claims table;
- :mod:`.prose`   the conclusion written from the verdict;
- :mod:`.figures` the figure.

``chapter.yaml`` holds its manifest entry, ``toy.ipynb`` its notebook. Its modules import each
other relatively, so that the folder runs as ``i2o.chapters.<name>`` once copied there.
"""

FIGURE = "toy"
