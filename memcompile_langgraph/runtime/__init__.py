"""The runtime shell around the algorithm core: what one graph run works with (engine.py, context.py), published
index snapshots (cache.py, snapshot_file.py), writers (unit_of_work.py) and store consistency (consistency.py).
Locks and their order: ../store/locks.py."""
