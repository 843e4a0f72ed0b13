"""Reads of the annotators' workspace, by concern: the review queue (`queue`), one trajectory (`trajectory`), how
the trajectory page shows its conversation and revisions (`conversation`), judge-versus-human agreement
(`agreement`) and the dashboard's figures (`dashboard`), both read from the rollups (`rollups`)."""
