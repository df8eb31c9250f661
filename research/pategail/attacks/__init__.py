"""Privacy attacks on a generator's outputs (the paper's section "Privacy Risk Analysis").

- :mod:`uniqueness`  the highest overlap rate of each real day with any synthetic day;
- :mod:`membership`  the attack protocol shared by both membership inferences: members and non-members are
  *users*, a random forest on per-day features, grouped cross-validation, AUC and accuracy with bootstrap
  intervals;
- :mod:`whitebox`    features from the published policy: per-step log-probabilities of a real day's actions;
- :mod:`blackbox`    features from the synthetic days only: distance to the closest synthetic days.
"""
