"""Text the method compares: term normalization for BM25 and claims, session and event time parsing."""
