"""What synthetic days are good for (the paper's section "Practical Demonstrations").

- :mod:`prediction`      next-location prediction (a GRU and a Markov chain, against "stay") trained on real,
                         synthetic or both kinds of days;
- :mod:`recommendation`  location recommendation by implicit-feedback matrix factorisation (ALS).
Both are evaluated on real days the generator never saw.
"""
