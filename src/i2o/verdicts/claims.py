"""The paper's claims as predicates over regenerated results.

Every chapter ends with a table of claims: the statement, whether the results that the notebook
just computed support it (``holds``: True / False, or ``None`` when the profile that ran is too
small to decide), the measured number behind the verdict, which profile decides it, the
regime/power ``check`` that allowed (or refused) the verdict, and the equivalence ``margin`` the
predicate used (:mod:`i2o.verdicts.gates`). The same rows are written to
``_build/claims/<figure>.json``; ``make claims`` prints them all.

One writer records every row, :meth:`Claims.decide`: the reason of the verdict always goes to
``check``, the measurement to ``value``, the section of the chapter to ``section`` (so that
``robustness`` and ``compare`` can group rows), and the decision's typed facts
(:class:`i2o.verdicts.decision.Facts`: which gate closed, the models set aside, whether the regime
was reached, what would decide it) to ``facts``, which is what the prose reads: no prose reads a
reason's wording.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from i2o.base import locations
from i2o.verdicts.decision import Decision, Facts
from i2o.verdicts.paper_claims import PaperClaim


@dataclass(frozen=True)
class Claim:
    claim: str
    holds: bool | None
    value: str
    profile: str
    decided_by: str = ""
    check: str = ""          # the regime/power check behind the verdict (or why there is none)
    margin: str = ""         # the margin δ of the predicate, with its unit ("" when none)
    id: str = ""             # the row's name for the prose (unique in its table; "" unnamed)
    section: str = ""        # the part of the chapter the row belongs to ("" for the whole)
    facts: Facts = field(default_factory=Facts)

    @property
    def decision(self) -> Decision:
        return Decision(self.holds, self.check, self.facts)

    def as_json(self) -> dict[str, Any]:
        """The row as the claims JSON writes it."""
        return {**asdict(self), "facts": self.facts.as_json()}

    def verdict(self) -> str:
        if self.holds is None:
            return "undecided" + (f" (run {self.decided_by})" if self.decided_by.startswith(
                "make ") else f" (run {self.decided_by!r})" if self.decided_by else "")
        return "holds" if self.holds else "fails"


@dataclass
class Claims:
    """The claims checked by one figure's notebook in one profile."""

    figure: str
    profile: str
    rows: list[Claim] = field(default_factory=list)
    #: rows recorded with an ``id``, for the chapter's prose
    #: (:func:`i2o.verdicts.prose.conclusions`)
    by_id: dict[str, Claim] = field(default_factory=dict)
    #: what the prose needs besides the rows (counts, sizes); never written to the JSON
    facts: dict[str, object] = field(default_factory=dict)
    #: row id → the run that would decide that undecided row (:mod:`i2o.verdicts.deciding`)
    remedies: dict[str, Any] = field(default_factory=dict)
    #: the claims of the paper the chapter's rows test (its ``paper_claims.CLAIMS``), for its
    #: answer (:mod:`i2o.verdicts.answer`)
    paper: tuple[PaperClaim, ...] = field(default=(), repr=False)

    def decide(self, claim: str, decision: Decision, value: str,
               margin: str = "", decided_by: str = "", id: str = "", section: str = ""
               ) -> Claim:
        """Record a claim from a :class:`i2o.verdicts.decision.Decision`:
        its verdict, its reason in ``check``, its facts; the measurement in ``value``. An
        undecided row names the profile that decides it in ``decided_by`` when one does. ``id``
        names the row for the prose (``claims[id]``); ``section`` the part of the chapter."""
        row = Claim(
            claim, decision.holds, str(value), self.profile, decided_by, decision.reason,
            str(margin), id, section, decision.facts)
        self.rows.append(row)
        if id:
            if id in self.by_id:
                raise ValueError(f"claim id {id!r} recorded twice in {self.figure!r}")
            self.by_id[id] = row
        return row

    def add(self, claim: str, holds: bool | None, value: str, decided_by: str = "",
            check: str = "", margin: str = "", id: str = "", section: str = "") -> Claim:
        """:meth:`decide` with the verdict and its reason given apart."""
        return self.decide(claim, Decision(holds, check), value, margin, decided_by, id, section)

    def remedy(self, id: str, remedy: Any) -> None:
        """Name the run that would decide the undecided row ``id`` (an
        :class:`i2o.verdicts.deciding. Remedy`): its command becomes the row's ``decided_by`` (so
        the JSON and ``make claims`` show it) and :func:`i2o.verdicts.prose.conclusions` lists it
        with its cost."""
        row = self.by_id[id]
        if row.holds is not None:
            raise ValueError(f"claim {id!r} is decided: nothing to remedy")
        new = replace(row, decided_by=remedy.command())
        self.rows[next(k for k, r in enumerate(self.rows) if r is row)] = new
        self.by_id[id] = new
        self.remedies[id] = remedy

    def extend(self, other: Claims) -> None:
        """Append ``other``'s rows (their ids must be new here)."""
        for row in other.rows:
            self.rows.append(row)
            if row.id:
                if row.id in self.by_id:
                    raise ValueError(f"claim id {row.id!r} recorded twice in {self.figure!r}")
                self.by_id[row.id] = row
        self.remedies.update(other.remedies)

    def __getitem__(self, id: str) -> Claim:
        return self.by_id[id]

    def path(self) -> Path:
        return claims_dir() / f"{self.figure}.json"

    def write(self) -> Path:
        path = self.path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps([row.as_json() for row in self.rows], indent=1))
        tmp.replace(path)
        return path

    def to_html(self) -> str:
        colour = {"holds": "#1a7f37", "fails": "#cf222e"}
        extra = any(r.check or r.margin for r in self.rows)
        head = "<th>Check</th><th>Margin</th>" if extra else ""
        lines = ["<table class='i2o-claims'><thead><tr><th>Claim</th><th>Verdict</th>"
                 f"<th>Measured</th>{head}</tr></thead><tbody>"]
        for row in self.rows:
            remedy = self.remedies.get(row.id) if row.id else None
            # a named run (its command can be thousands of characters) goes under the check;
            # a profile named by hand stays in the verdict ("undecided (run 'paper')")
            verdict = "undecided" if remedy is not None else row.verdict()
            style = f" style='color:{colour.get(verdict, '#9a6700')};font-weight:bold'"
            decides = (f"<br><small><em>What would decide it:</em> "
                       f"{html.escape(remedy.describe())}</small>" if remedy is not None else "")
            cells = (f"<td>{html.escape(row.check)}{decides}</td>"
                     f"<td>{html.escape(row.margin)}</td>" if extra else "")
            value = html.escape(row.value) + ("" if extra else decides)
            lines.append(f"<tr><td>{html.escape(row.claim)}</td><td{style}>{verdict}</td>"
                         f"<td>{value}</td>{cells}</tr>")
        lines.append(f"</tbody></table><p><em>Profile {self.profile!r}.</em></p>")
        return "\n".join(lines)

    def to_text(self) -> str:
        def line(r: Claim) -> str:
            text = f"[{r.verdict():>9}] {r.claim} — {r.value}"
            if r.margin:
                text += f" (margin {r.margin})"
            return text + (f"\n{'':12}check: {r.check}" if r.check else "")

        return "\n".join(line(r) for r in self.rows)

    def glue_answer(self) -> None:
        """Glue the chapter's answer (:mod:`i2o.verdicts.answer`) as ``<figure>-answer``, for
        the box at the top of its page, and the list of the paper's claims it tests as
        ``<figure>-claims-answer``, shown under it (in a notebook; nothing elsewhere)."""
        from IPython.display import Markdown  # lazy: IPython and myst-nb only in a notebook
        from myst_nb import glue  # type: ignore[import-untyped]

        from i2o.verdicts.answer import GLUE, LIST_GLUE, answer_parts

        box, listed = answer_parts(self)
        glue(GLUE.format(figure=self.figure), Markdown(box), display=False)
        glue(LIST_GLUE.format(figure=self.figure), Markdown(listed or " "), display=False)

    def report(self) -> Claims:
        """Write the JSON and show the table (HTML in a notebook, text elsewhere)."""
        self.write()
        try:
            from IPython import get_ipython  # lazy: IPython only inside a notebook
            from IPython.display import HTML, display

            if get_ipython() is not None:
                display(HTML(self.to_html()))
                self.glue_answer()
                return self
        except ImportError:
            pass
        print(self.to_text())
        return self


def claims_dir() -> Path:
    return locations.build_dir() / "claims"


def read_all() -> dict[str, list[dict]]:
    """Every ``_build/claims/<figure>.json`` written so far."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(claims_dir().glob("*.json"))}


def main() -> int:
    found = read_all()
    if not found:
        print(f"no claims yet in {claims_dir()}: run `make book` (or `make fig-<name>`) first")
        return 1
    for figure, rows in found.items():
        profile = rows[0]["profile"] if rows else "?"
        print(f"\n== {figure} (profile {profile}) ==")
        for row in rows:
            known = {k: v for k, v in row.items() if k in Claim.__dataclass_fields__}
            c = Claim(**known)
            print(c.verdict().rjust(9), "|", c.claim, "—", c.value,
                  f"| check: {c.check}" if c.check else "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
