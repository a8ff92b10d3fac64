"""make bench: the speed figures of outbox-kit, each a ratio to a stdlib baseline measured in the same run."""
