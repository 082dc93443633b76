"""CLI: convert a WACO checkpoint to a dashrank bundle.

    python -m dashrank_onnx.convert_waco --checkpoint PATH --kernel spmm|sddmm|spmv --out DIR [--fp16]
        [--stats matrix_stats.csv] [--train train.txt | --no-train-weighting]
        [--mean R C N --std R C N --source TEXT]

By default the shape-normalization constants are the proxy of ``waco.normalization_proxy``:
``matrix_stats.csv`` (default: ``<checkpoint>/../../matrix_stats.csv``) weighted by the
checkpoint's ``train.txt`` (default: next to the checkpoint).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .bundle import write_bundle
from .waco import convert, normalization_proxy


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashrank_onnx.convert_waco", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--kernel", required=True, choices=["spmm", "sddmm", "spmv"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--fp16", action="store_true", help="store initializers as FLOAT16")
    ap.add_argument("--stats", help="matrix_stats.csv for the normalization proxy")
    ap.add_argument("--train", help="train.txt used to weight the proxy")
    ap.add_argument("--no-train-weighting", action="store_true")
    ap.add_argument("--mean", nargs=3, type=float)
    ap.add_argument("--std", nargs=3, type=float)
    ap.add_argument("--source", default="given on the command line")
    ap.add_argument("--model-name")
    a = ap.parse_args(argv)
    ck = Path(a.checkpoint)
    if a.mean and a.std:
        mean, std, src = a.mean, a.std, a.source
    else:
        stats = Path(a.stats) if a.stats else ck.parent.parent.parent / "matrix_stats.csv"
        train = None if a.no_train_weighting else (Path(a.train) if a.train else ck.parent / "train.txt")
        if train is not None and not train.exists():
            train = None
        if not stats.exists():
            ap.error(f"{stats} not found: give --stats or --mean/--std")
        mean, std, src = normalization_proxy(stats, train)
    model = convert(ck, a.kernel, mean, std, src, a.model_name)
    for p in write_bundle(model, a.out, fp16=a.fp16):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
