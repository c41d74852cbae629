"""Pass framework and pass tests; harness.py is the differential harness."""
