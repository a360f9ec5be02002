"""The claims the toy chapter's rows test: one of the book's own, extending the paper's sentence
(the format, and the claims several chapters share: :mod:`i2o.verdicts.paper_claims`)."""

from __future__ import annotations

from i2o.verdicts.paper_claims import PaperClaim, Reading, own, rows

from . import FIGURE

#: The claims this chapter's rows test, in the order of the claims page.
CLAIMS: tuple[PaperClaim, ...] = (
    own("toy-more-help", "More fixed-point iterations at test time lower a toy contraction's "
        "relative residual", "increasing the number of iterations above N produces better "
        "approximation of the inner problem", "Section 4", rows(FIGURE, "more-iterations-help")),
)

#: How the book reads the claims this chapter declares: a chapter of the paper writes each
#: claim's reading here, with the commit that fixed it, before any verdict is computed.
READINGS: dict[str, Reading] = {}
