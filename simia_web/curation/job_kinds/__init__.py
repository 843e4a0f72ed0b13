"""The curation app's job kinds, a module each: judging again, and bulk decisions over a filter."""
