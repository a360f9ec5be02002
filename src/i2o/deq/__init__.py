"""Fixed-point machinery for deep equilibrium models (PyTorch); solvers know nothing about models.

- :class:`SolverSpec` / :class:`SolverResult` — what to solve with, and the statistics returned
  (residual traces, steps, lowest residual, divergence and NaN/inf flags);
- :func:`solve` — fixed-point iteration, Anderson acceleration or Broyden's method (no line search),
  with or without autograd through the iterates;
- :class:`DEQ` — a DEQ layer with an implicit (IFT) or unrolled backward mode, the two training
  modes compared in the paper's Figure 5 (Section 5, Appendix F.2);
- :func:`sweep_iterations` — a trained DEQ evaluated with every test-time iteration count
  ``N + ΔN`` of a grid (metrics and residuals per example; :class:`Probe` plugs a task in).
"""

from .backward import attach_implicit_backward
from .layer import DEQ, DEQStats
from .solve import solve
from .spec import SolverResult, SolverSpec
from .sweep import Probe, iteration_grid, sweep_iterations

__all__ = ["DEQ", "DEQStats", "Probe", "SolverResult", "SolverSpec", "attach_implicit_backward",
           "iteration_grid", "solve", "sweep_iterations"]
