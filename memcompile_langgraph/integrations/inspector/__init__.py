"""`memcompile inspect`: a local web page over a store (app.py), showing what each user has stored and why a query
selected the turns it did (explain.py), rendered on the server (pages.py)."""
