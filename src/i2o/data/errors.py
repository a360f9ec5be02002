"""The errors the data loaders raise: no copy found, or a copy that is not the data set."""

from __future__ import annotations

from collections.abc import Iterable


class DataNotFoundError(FileNotFoundError):
    """No copy of a data set was found where it was looked for, and none could be downloaded;
    the message lists every path tried and the variable (``I2O_DATA_DIR``) that sets the first."""


class DataCorruptError(ValueError):
    """A copy of a data set whose files are missing, truncated or altered (they do not match the
    published checksums); the message names each bad file and says how to repair the copy.

    ``bad`` (``"<short path>: <what is wrong>"`` per file) and ``remedy`` (the command or step
    that checks or repairs the copy) let :meth:`summary` say the same in one line, for the places
    that print one line per data set (``make data``, the preflight of ``make book``).
    """

    def __init__(self, message: str, bad: Iterable[str] = (), remedy: str = "") -> None:
        super().__init__(message)
        self.bad = tuple(bad)
        self.remedy = remedy

    def summary(self, shown: int = 3) -> str:
        """One line: the count of bad files, the first ``shown`` of them, and the remedy."""
        first = str(self).strip().splitlines()[0].rstrip(":") if str(self).strip() else ""
        if not self.bad:
            return f"{first}; {self.remedy}" if self.remedy else first
        files = "; ".join(self.bad[:shown])
        more = f"; … and {len(self.bad) - shown} more" if len(self.bad) > shown else ""
        remedy = f". {self.remedy}" if self.remedy else ""
        return f"{first}: {files}{more}{remedy}"
