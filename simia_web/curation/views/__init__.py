"""Pages of the annotators' workspace, one module a page: the dashboard, the review queue and its stream
(`queue`), one trajectory (`trajectory`), the editor (`editor`), bulk actions (`bulk`), agreement (`agreement`)
and near-duplicate clusters (`duplicates`). What they share is in `common`; what they show is read through
curation.selectors."""
