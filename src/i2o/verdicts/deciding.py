"""What would decide an undecided claim: the one command that runs it, with its cost measured in
this run.

A row left undecided for want of power carries, in its typed facts
(:class:`i2o.verdicts.decision.Needs`), about how many independent values (seeds, seed pairs,
examples) of the spread it measured would decide it, and what they are
(:class:`i2o.verdicts.decision.Over`, which names the parameter raising them). The chapter turns
that into a :class:`Remedy`: the parameters to raise (its seeds, or the size of an evaluation set),
the command that runs the chapter with them, and what the extra work costs at the rate this run
measured (training seconds per seed, for instance). The command's parameters pass the chapter's own
checks (:func:`i2o.compute.door.enter`) before it is printed; a count beyond what the manifest
allows gives no command.

Machinery: knows chapters only through the manifest and their door.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from i2o.compute import door, profiles
from i2o.verdicts.decision import EVALUATION_SET, Needs, Over

if TYPE_CHECKING:
    from i2o.verdicts.claims import Claim, Claims

#: a remedy asks for this many times the count its row needs: the count is estimated from one
#: draw of the spread, and a new draw of it should not leave the row undecided again
HEADROOM = 1.25
#: how many of its parameter's count one unit takes, where it is not one: the held-out and the
#: choosing tasks are each one half of the test tasks (``n_test_tasks``, split even/odd)
PER_UNIT = {Over.HELD_OUT_TASKS: 2, Over.CHOOSING_TASKS: 2}


@dataclass(frozen=True)
class Remedy:
    """A run that would decide a row: ``figure`` at ``profile`` with ``overrides``; ``seconds``
    the extra compute at this run's measured rate, ``run_seconds`` this run's own (NaN when
    unknown)."""

    figure: str
    profile: str
    overrides: tuple[tuple[str, Any], ...]
    seconds: float
    run_seconds: float = math.nan

    def command(self) -> str:
        """``make fig-<figure> PROFILE=… P="-p name 'value' …"`` (values as the book's ``-p``
        reads them, :func:`i2o.compute.inputs.read`)."""
        def shown(value: Any) -> str:
            if isinstance(value, list | tuple):
                return "'[" + ",".join(str(v) for v in value) + "]'"
            return str(value)

        pairs = " ".join(f"-p {name} {shown(value)}" for name, value in self.overrides)
        return f"make fig-{self.figure} PROFILE={self.profile}" + (f' P="{pairs}"' if pairs
                                                                   else "")

    @property
    def at_scale(self) -> bool:
        """Whether the run costs at most :data:`SCALE` times this one (unknown costs: yes)."""
        return not (math.isfinite(self.seconds) and math.isfinite(self.run_seconds)
                    and self.run_seconds > 0 and self.seconds > SCALE * self.run_seconds)

    def sizes(self) -> str:
        """What the run changes, in a few words: a seed list as its count and range."""
        def one(name: str, value: Any) -> str:
            if not isinstance(value, list | tuple):
                return f"{name} = {value}"
            values = list(value)
            consecutive = values == list(range(values[0], values[0] + len(values))) \
                if values and all(isinstance(v, int) for v in values) else False
            return (f"{len(values)} {name} ({values[0]}–{values[-1]})" if consecutive
                    and len(values) > 2 else f"{len(values)} {name}")

        return ", ".join(one(name, value) for name, value in self.overrides) \
            or f"the {self.profile} profile"

    def describe(self) -> str:
        """One line for a table or a list: what the run changes and costs, then its command
        when it is short enough to read (:data:`COMMAND_CHARS`; ``make claims`` prints every
        command); beyond :data:`SCALE` times this run, "not decidable at this scale"."""
        if not self.at_scale:
            return (f"not decidable at this scale: needs {self.sizes()}, about "
                    f"{self.seconds / 3600:.1f} CPU-hours at this run's measured rate "
                    f"({self.seconds / self.run_seconds:.0f}× this run)")
        cost = (f"; about {_duration(self.seconds)} of compute at this run's measured rate"
                if math.isfinite(self.seconds) else "")
        command = self.command()
        shown = (f": `{command}`" if len(command) <= COMMAND_CHARS
                 else " (`make claims` prints the command)")
        return f"{self.sizes()}{cost}{shown}"


#: A run costing more than this many times the one that left a row open is "not decidable at
#: this scale" (its command would not be run from a page).
SCALE = 10.0
#: The longest command a page shows (a seed list of thousands would fill a screen).
COMMAND_CHARS = 160


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _profile(params: Mapping[str, Any]) -> str:
    """The profile of ``params`` (a :class:`i2o.compute.profiles.Params` or a mapping with it)."""
    return str(getattr(params, "profile", None) or params["profile"])


def _checked(remedy: Remedy) -> Remedy | None:
    """``remedy`` when its parameters pass the chapter's checks, else ``None``."""
    try:
        door.enter(remedy.figure, remedy.profile, **dict(remedy.overrides))
    except profiles.ParameterError:
        return None
    return remedy


def more_seeds(figure: str, params: Mapping[str, Any], needs: Needs | None,
               seconds_per_seed: float, parameter: str = "seeds") -> Remedy | None:
    """The seed list ``parameter`` raised to :data:`HEADROOM` × ``needs.count`` (new seeds after
    the largest one; the cached seeds are not recomputed), when more seeds raise what ``needs``
    counts; ``None`` otherwise or when the manifest refuses it."""
    if needs is None or needs.of.raises != Over.SEEDS.raises:
        return None
    seeds: Sequence[int] = list(params[parameter])
    extra = max(0, math.ceil(HEADROOM * needs.count) - len(seeds))
    if extra == 0:
        return None
    start = max(seeds) + 1 if seeds else 0
    chosen = [*seeds, *range(start, start + extra)]
    return _checked(Remedy(figure, _profile(params), ((parameter, chosen),),
                           extra * float(seconds_per_seed),
                           len(seeds) * float(seconds_per_seed)))


def more_examples(figure: str, params: Mapping[str, Any], needs: Needs | None, parameter: str,
                  rerun_seconds: float = math.nan, eval_seconds: float = math.nan
                  ) -> Remedy | None:
    """The evaluation set ``parameter`` raised to :data:`HEADROOM` × ``needs.count``, when
    ``needs`` counts what that parameter raises (an evaluation set's examples, or units whose
    :attr:`~i2o.verdicts.decision.Over.raises` is ``parameter``); ``None`` otherwise or when the
    manifest refuses it. The size is part of every job's key, so the whole chapter recomputes:
    ``rerun_seconds`` (this run's measured total) plus ``eval_seconds`` (its evaluation part)
    scaled to the new size."""
    if needs is None or needs.of.raises not in (EVALUATION_SET, parameter):
        return None
    now = int(params[parameter])
    target = math.ceil(HEADROOM * needs.count)
    if target <= now:
        return None
    seconds = float(rerun_seconds) + float(eval_seconds) * (target / now - 1)
    return _checked(Remedy(figure, _profile(params), ((parameter, target),), seconds,
                           float(rerun_seconds)))


@dataclass(frozen=True)
class Rates:
    """What more data costs at this run's measured rates, in seconds (NaN: not measured):
    ``per_seed`` for each extra seed; ``rerun`` to recompute the chapter at a new evaluation
    size, of which ``evaluation`` scales with that size."""

    per_seed: float = math.nan
    rerun: float = math.nan
    evaluation: float = math.nan


def remedy(figure: str, params: Mapping[str, Any], needs: Needs | None, rates: Rates,
           parameters: Mapping[str, str] | None = None) -> Remedy | None:
    """The run that would decide a row whose typed facts say it ``needs`` more units: the
    parameter that raises them (:attr:`~i2o.verdicts.decision.Over.raises`, through the chapter's
    ``parameters`` where it names a kind: ``{EVALUATION_SET: "test_size"}``, ``{"seeds":
    "gotu_seeds"}``), a seed list extended (:func:`more_seeds`) or a size raised
    (:func:`more_examples`) to :data:`HEADROOM` × the count, :data:`PER_UNIT` of the parameter's
    count per unit; ``None`` when no parameter of the chapter raises them, when none is needed,
    or when the manifest refuses the count."""
    if needs is None or needs.of.raises is None:
        return None
    parameter = (parameters or {}).get(needs.of.raises, needs.of.raises)
    if parameter == EVALUATION_SET or parameter not in params:
        return None
    counted = Needs(PER_UNIT.get(needs.of, 1) * needs.count, needs.of)
    if isinstance(params[parameter], list | tuple):
        return more_seeds(figure, params, counted, rates.per_seed, parameter)
    return more_examples(figure, params, counted, parameter, rates.rerun, rates.evaluation)


def name_remedies(table: Claims, params: Mapping[str, Any], rates: Rates,
                  parameters: Mapping[str, str] | Callable[[Claim], Mapping[str, str]]
                  | None = None) -> None:
    """Name, on each undecided row of ``table`` whose facts say what it needs, the run that
    would decide it (:func:`remedy`; ``parameters`` the chapter's, or a function of the row
    giving them)."""
    for row in list(table.rows):
        if row.holds is None and row.id and row.facts.needs is not None:
            found = remedy(table.figure, params, row.facts.needs, rates,
                           parameters(row) if callable(parameters) else parameters)
            if found is not None:
                table.remedy(row.id, found)


def at_profile(figure: str, profile: str, seconds: float) -> Remedy:
    """The run of ``figure`` at another ``profile`` (more models, trained longer): the remedy
    of a row that no count of units decides at this profile; ``seconds`` its measured cost."""
    return Remedy(figure, profile, (), seconds)
