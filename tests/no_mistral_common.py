"""A pytest plugin that makes mistral-common unimportable, as if the extra were absent.

    pytest -p tests.no_mistral_common

Loaded before any test module, it puts a finder first on `sys.meta_path` that refuses
`mistral_common` and its submodules with the `ModuleNotFoundError` a missing package
raises, so the suite can be run as an installation without `toolwire[mistral]` runs it
(tests/test_standalone.py does), without uninstalling anything.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

BLOCKED = "mistral_common"


class _Refuse:
    """A meta path finder refusing one top-level package."""

    @staticmethod
    def find_spec(
        name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == BLOCKED or name.startswith(BLOCKED + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


if not any(isinstance(finder, _Refuse) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Refuse())
for loaded in [m for m in sys.modules if m == BLOCKED or m.startswith(BLOCKED + ".")]:
    del sys.modules[loaded]
