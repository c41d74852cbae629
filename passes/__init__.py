"""The pass library: one file per pass (or family), each registering XLA's name."""
