"""The curation app's job kinds, a module each: judging again, bulk decisions over a filter, and rollup rebuilds."""
