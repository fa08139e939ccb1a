"""Container image recipes and their builder, build.py (a package, so mypy tells it from tools/helm)."""
