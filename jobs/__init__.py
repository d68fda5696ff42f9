"""Entry points run with `python -m jobs.<name>` (or `ray job submit`)."""
