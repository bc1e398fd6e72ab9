"""The drift report as files: drift.yaml, the README summary, node pages, slice maps, Markdown escaping, and when a
report is committed."""
