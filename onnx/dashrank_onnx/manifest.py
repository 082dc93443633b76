"""Check, print or rewrite a bundle's manifest and provenance (docs/bundle-format.md §7).

    python -m dashrank_onnx.manifest DIR            # check manifest + provenance, print them
    python -m dashrank_onnx.manifest DIR --write    # vouch for the .onnx files as they are now
    python -m dashrank_onnx.manifest DIR --stamp    # also record provenance hashes computed from
                                                    # the bundle's own weights (old bundles)

``--write`` is for deliberate edits (e.g. an expert mixing heads, loaded with
``--allow-provenance-mismatch``): the loader then trusts the files as written. ``--stamp`` is
for bundles written before manifests and provenance hashes existed; it refuses a bundle whose
heads hold different configuration mappers, since such a bundle has no single provenance.
"""

from __future__ import annotations

import argparse
import sys

from .bundle import BundleError, read_bundle
from .integrity import IntegrityError, describe, stamp_directory, write_manifest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashrank_onnx.manifest", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", help="bundle directory")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="rewrite manifest.json for the files as they are")
    g.add_argument("--stamp", action="store_true",
                   help="record provenance computed from the bundle's own weights, then write the manifest")
    ap.add_argument("--allow-provenance-mismatch", action="store_true",
                    help="when checking, accept heads of another model (reported as warnings)")
    a = ap.parse_args(argv)
    try:
        if a.stamp:
            f, m = stamp_directory(a.bundle)
            print(f"stamped {a.bundle}: featurizer {f}, mapper {m}")
        elif a.write:
            print(write_manifest(a.bundle))
        b = read_bundle(a.bundle, allow_provenance_mismatch=a.allow_provenance_mismatch)
        print(f"featurizer sha256: {b.featurizer_sha256}\nmapper sha256:     {b.mapper_sha256}")
        for line in describe(a.bundle):
            print(line)
        for w in b.provenance_warnings:
            print(f"warning: {w}", file=sys.stderr)
    except (BundleError, IntegrityError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
