"""One user's in-memory index (the view the query plane reads), its copy-on-write containers and its data-only
snapshot file format."""
