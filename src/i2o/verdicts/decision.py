"""What a verdict is: a :class:`Decision` (holds / fails / undecided, its reason, its typed
:class:`Facts`), with the vocabularies its facts are written in: the :class:`Gate` that closed it
and, when more data would decide it, what it :class:`Needs` (a count of independent values
:class:`Over` which its interval was measured).

The prose of the chapters reads these facts, never a reason's wording; the vocabularies are enums
so that a misspelt gate or unit of replication is an error, not a silently different branch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: :attr:`Over.raises` of the units an evaluation set counts: the chapter names the parameter of
#: its evaluation set's size (``test_size``, ``cls_eval_size``, …)
EVALUATION_SET = "the evaluation set's size"


class Over(StrEnum):
    """What the ``n`` independent values of an interval are, as a reason names them, and what
    raises their count (:attr:`raises`): a manifest parameter, :data:`EVALUATION_SET` (each
    chapter names its evaluation set's parameter), or ``None`` when no parameter raises it
    alone."""

    raises: str | None

    def __new__(cls, text: str, raises: str | None) -> Over:
        member = str.__new__(cls, text)
        member._value_ = text
        member.raises = raises
        return member

    SEEDS = "seeds", "seeds"
    SEED_PAIRS = "seed pairs", "seeds"
    MODELS = "models", "seeds"
    EXAMPLES = "examples", EVALUATION_SET
    EVALUATION_BATCHES = "evaluation batches", None
    TASKS = "tasks", "n_test_tasks"
    HELD_OUT_TASKS = "held-out tasks", "n_test_tasks"
    CHOOSING_TASKS = "choosing tasks", "n_test_tasks"

    @classmethod
    def named(cls, text: str) -> Over:
        """The member whose text is ``text`` (a member is its own text); a text outside the
        vocabulary is refused, naming it."""
        for member in cls:
            if member.value == text:
                return member
        raise ValueError(f"{text!r} is not one of: {', '.join(m.value for m in cls)}")


class Gate(StrEnum):
    """The gate that closed a verdict (left it undecided)."""

    HEALTH = "health"            # a model diverged
    FIT = "fit"                  # a model does not fit its training set
    COUNT = "count"              # too few values to decide on
    RESOLUTION = "resolution"    # the margin is below what the measurement can tell apart
    POWER = "power"              # the interval is too wide for the margin
    REFERENCE = "reference"      # the reference effect of a relative margin is not established
    CONVERGENCE = "convergence"  # the solver does not converge beyond N
    REGIME = "regime"            # the models do not generalise beyond a trivial baseline
    CONDITION = "condition"      # a criterion stated by the caller (:func:`.gates.condition`)


@dataclass(frozen=True)
class Needs:
    """What would decide an undecided verdict: about ``count`` independent values ``of`` a kind
    (seeds, examples, seed pairs) at the spread measured."""

    count: int
    of: Over

    def __post_init__(self) -> None:
        object.__setattr__(self, "of", Over.named(self.of))

    def describe(self) -> str:
        return f"about {self.count:,} {self.of}"


@dataclass(frozen=True)
class Facts:
    """What a decision established besides its verdict, for the prose to read (never its
    reason's wording).

    Attributes:
        closed_by: the gate that closed it (``None`` when none did).
        not_fitting: the models a fit quorum set aside (named), when it opened without them.
        regime_reached: whether the overparametrized regime was reached (``None``: not checked).
        needs: what would decide it when undecided for want of power (``None``: unknown or not
            a matter of count).
    """

    closed_by: Gate | None = None
    not_fitting: tuple[str, ...] = ()
    regime_reached: bool | None = None
    needs: Needs | None = None

    def __post_init__(self) -> None:
        if self.closed_by is not None:
            object.__setattr__(self, "closed_by", Gate(self.closed_by))

    def merged(self, later: Facts) -> Facts:
        """These facts with ``later``'s set fields over them (a gate's facts, then the
        predicate's)."""
        return Facts(closed_by=later.closed_by or self.closed_by,
                     not_fitting=self.not_fitting + tuple(n for n in later.not_fitting
                                                          if n not in self.not_fitting),
                     regime_reached=(later.regime_reached if later.regime_reached is not None
                                     else self.regime_reached),
                     needs=later.needs or self.needs)

    def as_json(self) -> dict[str, Any]:
        """The facts as the claims JSON writes them (no gate: ``""``)."""
        return {"closed_by": str(self.closed_by or ""), "not_fitting": list(self.not_fitting),
                "regime_reached": self.regime_reached,
                "needs": None if self.needs is None else {"count": self.needs.count,
                                                          "of": str(self.needs.of)}}


@dataclass(frozen=True)
class Decision:
    """A verdict ``holds`` (``True`` / ``False`` / ``None``: undecided) with its ``reason`` and
    typed :class:`Facts`; two decisions are equal when all three are."""

    holds: bool | None
    reason: str = ""
    facts: Facts = field(default_factory=Facts)

    def __post_init__(self) -> None:
        if self.holds is not None:
            object.__setattr__(self, "holds", bool(self.holds))
        object.__setattr__(self, "reason", str(self.reason))

    def with_reason(self, reason: str) -> Decision:
        """This verdict and its facts, with ``reason`` in place of its reason."""
        return Decision(self.holds, reason, self.facts)

