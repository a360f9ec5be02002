"""What would decide an undecided claim: the one command that runs it, with its cost measured in
this run.

A row left undecided for want of power carries, in its typed facts (:class:`i2o.decision.Needs`),
about how many independent values (seeds, seed pairs, examples) of the spread it measured would
decide it, and what they are (:class:`i2o.decision.Over`, which names the parameter raising them).
The chapter turns that into a :class:`Remedy`: the parameters to raise (its seeds, or the size of
an evaluation set), the command that runs the chapter with them, and what the extra
work costs at the rate this run measured (training seconds per seed, for instance). The command's
parameters pass the chapter's own checks (:func:`i2o.door.enter`) before it is printed; a count
beyond what the manifest allows gives no command.

Machinery: knows chapters only through the manifest and their door.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from i2o import door, profiles
from i2o.decision import EVALUATION_SET, Needs, Over

#: a remedy asks for this many times the count its row needs: the count is estimated from one
#: draw of the spread, and a new draw of it should not leave the row undecided again
HEADROOM = 1.25


@dataclass(frozen=True)
class Remedy:
    """A run that would decide a row: ``figure`` at ``profile`` with ``overrides``; ``seconds``
    the extra compute at this run's measured rate (NaN when unknown)."""

    figure: str
    profile: str
    overrides: tuple[tuple[str, Any], ...]
    seconds: float

    def command(self) -> str:
        """``make fig-<figure> PROFILE=… P="-p name 'value' …"`` (values as the book's ``-p``
        parses them, YAML)."""
        def shown(value: Any) -> str:
            if isinstance(value, list | tuple):
                return "'[" + ",".join(str(v) for v in value) + "]'"
            return str(value)

        pairs = " ".join(f"-p {name} {shown(value)}" for name, value in self.overrides)
        return f"make fig-{self.figure} PROFILE={self.profile}" + (f' P="{pairs}"' if pairs
                                                                   else "")

    def describe(self) -> str:
        sizes = ", ".join(f"{len(value)} {name}" if isinstance(value, list | tuple) else
                          f"{name} = {value}" for name, value in self.overrides) \
            or f"the {self.profile} profile"
        cost = (f"; about {_duration(self.seconds)} of compute at this run's measured rate"
                if math.isfinite(self.seconds) else "")
        return f"{sizes}{cost}: `{self.command()}`"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _profile(params: Mapping[str, Any]) -> str:
    """The profile of ``params`` (a :class:`i2o.profiles.Params` or a mapping with it)."""
    return str(getattr(params, "profile", None) or params["profile"])


def _checked(remedy: Remedy) -> Remedy | None:
    """``remedy`` when its parameters pass the chapter's checks, else ``None``."""
    try:
        door.enter(remedy.figure, remedy.profile, **dict(remedy.overrides))
    except profiles.ParameterError:
        return None
    return remedy


def more_seeds(figure: str, params: Mapping[str, Any], needs: Needs | None,
               seconds_per_seed: float) -> Remedy | None:
    """The seeds list raised to :data:`HEADROOM` × ``needs.count`` (new seeds after the largest
    one; the cached seeds are not recomputed), when more seeds raise what ``needs`` counts;
    ``None`` otherwise or when the manifest refuses it."""
    parameter = Over.SEEDS.raises
    if needs is None or parameter is None or needs.of.raises != parameter:
        return None
    seeds: Sequence[int] = list(params[parameter])
    extra = max(0, math.ceil(HEADROOM * needs.count) - len(seeds))
    if extra == 0:
        return None
    start = max(seeds) + 1 if seeds else 0
    chosen = [*seeds, *range(start, start + extra)]
    return _checked(Remedy(figure, _profile(params), ((parameter, chosen),),
                           extra * float(seconds_per_seed)))


def more_examples(figure: str, params: Mapping[str, Any], needs: Needs | None, parameter: str,
                  rerun_seconds: float = math.nan, eval_seconds: float = math.nan
                  ) -> Remedy | None:
    """The evaluation set ``parameter`` raised to :data:`HEADROOM` × ``needs.count``, when
    ``needs`` counts what that parameter raises (an evaluation set's examples, or units whose
    :attr:`~i2o.decision.Over.raises` is ``parameter``); ``None`` otherwise or when the manifest
    refuses it. The size is part of every job's key, so the whole chapter recomputes:
    ``rerun_seconds`` (this run's measured total) plus ``eval_seconds`` (its evaluation part)
    scaled to the new size."""
    if needs is None or needs.of.raises not in (EVALUATION_SET, parameter):
        return None
    now = int(params[parameter])
    target = math.ceil(HEADROOM * needs.count)
    if target <= now:
        return None
    seconds = float(rerun_seconds) + float(eval_seconds) * (target / now - 1)
    return _checked(Remedy(figure, _profile(params), ((parameter, target),), seconds))
