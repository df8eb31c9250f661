"""Downstream evaluation of synthetic days: the two applications and the two attacks of the paper, run
together for `pategail evaluate` and every `train` report."""
