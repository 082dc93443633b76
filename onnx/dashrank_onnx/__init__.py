"""Python side of dashrank: bundle exporter, numpy reference (the oracle), WACO converter,
fixture and golden-output generators. See onnx/README.md and docs/bundle-format.md."""

FORMAT_VERSION = 1
SPARSE_DOMAIN = "ai.dashrank.sparse"

__all__ = ["FORMAT_VERSION", "SPARSE_DOMAIN"]
