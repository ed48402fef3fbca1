"""What operators see of a running service: its logs (:mod:`~service.observability.logs`)."""
