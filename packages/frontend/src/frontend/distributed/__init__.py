"""Compiling models under torch.distributed: DDP's gradient buckets as graph boundaries.

A `DistributedDataParallel` model compiles as its wrapped module (capture runs DDP's own forward
eagerly); each graph captured from it is cut into one subgraph per DDP gradient bucket, so that
in backward each bucket's gradients are ready, and all-reduced by DDP, while the subgraphs before
it still compute. ``options={"optimize_ddp": False}`` compiles each graph whole. See
docs/distributed.md.

Example::

    ddp = DistributedDataParallel(model, bucket_cap_mb=25)
    compiled = frontend.compile(ddp)          # one compiled subgraph per ~25 MiB of gradients
"""

from frontend.distributed.backend import BucketSplittingBackend, split_at_ddp_buckets
from frontend.distributed.buckets import (
    Bucket,
    BucketCaps,
    BucketPlan,
    InvalidBucketCapError,
    managed_parameters,
    plan_buckets,
)
from frontend.distributed.split import BucketedGraph, Subgraph, split_graph, subgraph_example_inputs

__all__ = [
    "Bucket",
    "BucketCaps",
    "BucketPlan",
    "BucketSplittingBackend",
    "BucketedGraph",
    "InvalidBucketCapError",
    "Subgraph",
    "managed_parameters",
    "plan_buckets",
    "split_at_ddp_buckets",
    "split_graph",
    "subgraph_example_inputs",
]
