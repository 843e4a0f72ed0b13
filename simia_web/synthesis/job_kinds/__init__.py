"""The synthesis job kinds, one module each: synthesize, rollout and amplify (see jobs.kinds.job_kinds_discover)."""
