"""Training (section 5): schedule, loss, checkpoints, trainer, distributed set-up."""
