"""Helpers the tests share (not tests themselves): the differential harness, random
graph generators, exactness checks, lit-file readers and the per-pass standard suites."""
