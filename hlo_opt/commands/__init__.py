"""One click command per module; each exposes ``command``.  ``opt`` is the default."""
