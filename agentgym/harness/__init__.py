"""The harness: fixed checkpoints scored over many seeds, the results contract, statistics."""
