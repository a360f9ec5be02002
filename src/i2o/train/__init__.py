"""The training loop with checkpoint/resume, deterministic seeding and tqdm progress; evaluation.

- :mod:`i2o.train.loop`       — the one step-based loop (any step loss), checkpointed;
- :mod:`i2o.train.classifier` — the MDEQ classifier's step (IFT or unrolled gradients) on that
  loop;
- :mod:`i2o.train.evaluate`   — accuracy and residuals for each test-time iteration count (through
  the generic sweep :func:`i2o.deq.sweep_iterations`);
- :mod:`i2o.train.health`     — the divergence flag of a training run;
- :mod:`i2o.train.schedule`, :mod:`i2o.train.checkpoint`, :mod:`i2o.train.seeding` — the parts.
"""

from i2o.train.checkpoint import load_checkpoint, save_checkpoint
from i2o.train.classifier import ARMS, TrainSettings, build_and_train, train_classifier
from i2o.train.evaluate import classification_probes, evaluate_iterations
from i2o.train.loop import Plan, train_steps
from i2o.train.schedule import cosine_lr, make_optimizer
from i2o.train.seeding import epoch_order, seed_everything

__all__ = ["ARMS", "Plan", "TrainSettings", "build_and_train", "classification_probes",
           "cosine_lr", "epoch_order", "evaluate_iterations", "load_checkpoint", "make_optimizer",
           "save_checkpoint", "seed_everything", "train_classifier", "train_steps"]
