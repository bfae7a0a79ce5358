"""Executing plans for real: graphs by layer range, split execution over a link, pipelines."""
