"""Sphinx extension: drop repeated ``<script>`` entries from every HTML page.

Jupyter Book 1 registers the inline scripts of sphinx-thebe and sphinx-togglebutton twice with
Sphinx 7, so each page declares ``const THEBE_JS_URL`` twice and the browser reports
"Identifier 'THEBE_JS_URL' has already been declared". Keeping the first of identical entries
fixes it without touching the theme.
"""

from __future__ import annotations


def _dedupe(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        attributes = getattr(script, "attributes", {}) or {}
        identity = (getattr(script, "filename", script) or "",
                    tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if identity not in seen:
            seen.add(identity)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _dedupe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
