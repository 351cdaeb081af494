"""`python -m toolwire.integrations.vllm --path`: the file for `--tool-parser-plugin`."""

from __future__ import annotations

import sys

from toolwire.integrations.vllm import plugin_path


def main(argv: list[str]) -> int:
    if argv != ["--path"]:
        print(
            "usage: python -m toolwire.integrations.vllm --path\n"
            "prints the file to pass to vLLM's --tool-parser-plugin",
            file=sys.stderr,
        )
        return 2
    print(plugin_path())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
