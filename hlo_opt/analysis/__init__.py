"""Analyses passes share: physical layouts, the cost model, a GPU performance model and
reachability.  Pure functions over the IR; nothing here changes a module."""
