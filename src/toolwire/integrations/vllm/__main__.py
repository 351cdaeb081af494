"""`python -m toolwire.integrations.vllm --serve-args FORMAT | --path`.

`--serve-args FORMAT` prints the flags that give `vllm serve` toolwire on both sides,
one per line (a shell splits them: `vllm serve MODEL $(python -m ... --serve-args
qwen3)`); `--path` prints the file for `--tool-parser-plugin`.
"""

from __future__ import annotations

import sys

from toolwire.errors import UsageError
from toolwire.integrations.vllm import entry_point_installed, plugin_path, serve_args

USAGE = """\
usage: python -m toolwire.integrations.vllm --serve-args FORMAT
       python -m toolwire.integrations.vllm --path

--serve-args FORMAT  the flags to add to `vllm serve` for toolwire on both sides
                     (FORMAT: a toolwire format or alias, such as qwen3), one per line
--path               the file to pass to vLLM's --tool-parser-plugin"""


def main(argv: list[str]) -> int:
    if argv == ["--path"]:
        print(plugin_path())
        return 0
    if len(argv) == 2 and argv[0] == "--serve-args":
        try:
            flags = serve_args(argv[1])
        except UsageError as exc:
            print(f"toolwire: {exc}", file=sys.stderr)
            return 2
        if not entry_point_installed():
            print(
                "toolwire: the vllm.general_plugins entry point is not installed in this "
                "environment, so vLLM would not find the renderer; install toolwire into "
                "vLLM's environment (pip install 'toolwire[vllm]')",
                file=sys.stderr,
            )
            return 2
        print("\n".join(flags))
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
