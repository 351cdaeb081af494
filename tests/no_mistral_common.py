"""A pytest plugin that makes the `mistral` extra unimportable, as if it were absent.

    python -m pytest -p tests.no_mistral_common    (from the repository root)

Loaded before any test module, it marks `mistral_common` and `sentencepiece` (the
extra's packages) as missing in `sys.modules` (a `None` entry): importing them raises
`ModuleNotFoundError` and `importlib.util.find_spec` answers None, exactly as when they
are not installed. So the suite runs as an installation without `toolwire[mistral]`
runs it (tests/test_standalone.py does), without uninstalling anything.
"""

from __future__ import annotations

import sys

BLOCKED = ("mistral_common", "sentencepiece")

for _name in [m for m in sys.modules if m.split(".", 1)[0] in BLOCKED]:
    del sys.modules[_name]
for _name in BLOCKED:
    sys.modules[_name] = None  # type: ignore[assignment]
