"""Trajectory-quality metrics (docs/metrics.md): the corrected km mode (:mod:`.km`), the paper's
Table 1 mode (:mod:`.paper`) and the evaluation of generated days against a data set (:mod:`.evaluate`)."""
from pategail.metrics.evaluate import (METRIC_NAMES, check_days, evaluate, evaluate_days, evaluate_days_paper,
                                       floor, format_table)
from pategail.metrics.km import (distinct_cells, global_rank_shares, individual_rank_shares, jump_lengths_km,
                                 radius_of_gyration_km)

__all__ = ["METRIC_NAMES", "check_days", "evaluate", "evaluate_days", "evaluate_days_paper", "floor", "format_table",
           "distinct_cells", "global_rank_shares", "individual_rank_shares", "jump_lengths_km",
           "radius_of_gyration_km"]
