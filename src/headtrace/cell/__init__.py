"""One cell (model x revision): the capture pass, participation ratio, the six-class screen,
the positional check and the per-head bootstrap."""
