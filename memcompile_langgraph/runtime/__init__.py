"""The runtime shell around the algorithm core: what one graph run works with (engine.py, context.py), the memory's
host in this process (host.py) with each user's derived state and its stamp (user_state.py, cache.py,
snapshot_file.py), writers (unit_of_work.py) and store consistency (consistency.py). Locks and their order:
../store/locks.py."""
