"""Reads of the review pages, by concern: the review queue (`queue`), one trajectory (`trajectory`), how the
trajectory page shows its conversation and revisions (`conversation`), judge-versus-human agreement (`agreement`)
and the dashboard's figures (`dashboard`), both read from the rollups (`rollups`), and the people items are given to
(`people`). Each read names the workspaces it reads from (`workspace_ids`) and starts from accounts.scoping."""
