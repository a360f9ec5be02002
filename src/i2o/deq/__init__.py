"""Fixed-point machinery for deep equilibrium models (PyTorch); solvers know nothing about models.

- :class:`SolverSpec` / :class:`SolverResult` — what to solve with, and the statistics returned
  (residual traces, steps, lowest residual, divergence and NaN/inf flags);
- :func:`solve` — fixed-point iteration, Anderson acceleration or Broyden's method (no line search),
  with or without autograd through the iterates;
- :class:`DEQ` — a DEQ layer with an implicit (IFT) or unrolled backward mode, the two training
  modes compared in the paper's Figure 5 (Section 5, Appendix F.2).
"""

from .backward import attach_implicit_backward
from .layer import DEQ, DEQStats
from .solve import solve
from .spec import SolverResult, SolverSpec

__all__ = ["DEQ", "DEQStats", "SolverResult", "SolverSpec", "attach_implicit_backward", "solve"]
