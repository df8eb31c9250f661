"""DP-FedAvg of the policy (user-level, McMahan et al. 2018): the alternative to PateGail's noisy rewards, built on
the same devices, secure aggregation, privacy plan and ledgers (``pategail train --method dp-fedavg``)."""
