"""Chapter-level code: each chapter's claims (gated predicates) and the prose made from them."""
