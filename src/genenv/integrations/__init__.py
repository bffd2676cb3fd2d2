"""genenv inside other trainers: :mod:`genenv.integrations.trl` (TRL's GRPOTrainer, the ``trl`` extra)."""
