"""``dashrank-export``: the exporter's commands behind one console script.

    dashrank-export waco --checkpoint resnet.pth --kernel spmm --out models/waco-spmm
    dashrank-export cognate --checkpoint cognate.pth --metadata meta.json --out models/my-cognate
    dashrank-export cognate-random --out models/cognate-random [--full-size]
    dashrank-export manifest models/my-cognate [--write | --stamp]

Each command is the module it names (``python -m dashrank_onnx.<module>`` runs the same);
``dashrank-export <command> --help`` lists its options. None needs torch: checkpoints are
read with numpy (``dashrank_onnx.pth``).
"""

from __future__ import annotations

import importlib
import sys
from typing import List, Optional

# command: (module, what it does)
COMMANDS = {
    "waco": ("convert_waco", "convert a WACO checkpoint (resnet.pth) into a bundle"),
    "cognate": ("convert_cognate", "convert a COGNATE/DASH state dict into a bundle, or add a head"),
    "cognate-random": ("cognate", "write a COGNATE/DASH bundle with seeded random weights"),
    "manifest": ("manifest", "check, rewrite or stamp a bundle's manifest and provenance"),
    "golden": ("golden", "reference outputs of a bundle on matrices, as JSON"),
    "fixtures": ("fixtures", "write the seeded test fixtures and broken files"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return "usage: dashrank-export <command> [options]\n\ncommands:\n" + "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        (sys.stdout if args else sys.stderr).write(usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        sys.stderr.write(f"dashrank-export: unknown command '{name}'\n\n{usage()}")
        return 2
    module = importlib.import_module(f"dashrank_onnx.{COMMANDS[name][0]}")
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
